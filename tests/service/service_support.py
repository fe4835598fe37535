"""What the service tests share: the running service and its credentials."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import attrs
import httpx
from governed_memory import GovernedMemoryManager, Permission, Scope
from governed_memory.events import InMemoryEventSink
from governed_memory.tiers import MemoryTiers
from governed_memory_service import (
    ApiKeyStore,
    AsyncMemoryClient,
    JwtSettings,
)

JWT_SECRET = "a-test-hmac-secret-" + "s" * 64
JWT = JwtSettings(issuer="https://issuer.test", audience="governed-memory",
                  key=JWT_SECRET, algorithms=("HS256",))
ALL = [Permission.READ, Permission.WRITE, Permission.DELETE]


@attrs.frozen(kw_only=True)
class Credentials:
    """The keys every service test holds: alice's (acme), bob's (another tenant) and a
    read-only key of alice's."""

    alice: str
    bob_other_tenant: str
    reader: str


async def issue_credentials(keys: ApiKeyStore) -> Credentials:
    alice = await keys.create(tenant_id="acme", kind="user", user_id="alice",
                              permissions=ALL)
    bob = await keys.create(tenant_id="globex", kind="user", user_id="bob",
                            permissions=ALL)
    reader = await keys.create(tenant_id="acme", kind="user", user_id="alice",
                               principal_id="user:alice-reader",
                               permissions=[Permission.READ])
    return Credentials(alice=alice.token, bob_other_tenant=bob.token, reader=reader.token)


@attrs.frozen(kw_only=True)
class Service:
    manager: GovernedMemoryManager
    sink: InMemoryEventSink
    keys: ApiKeyStore
    app: object
    tiers: MemoryTiers
    alice: str
    bob_other_tenant: str
    reader: str

    def client(self, credential: str) -> AsyncMemoryClient:
        return AsyncMemoryClient("http://service.test", credential,
                                 transport=httpx.ASGITransport(app=self.app))  # type: ignore[arg-type]

    def http(self, credential: str | None = None) -> httpx.AsyncClient:
        headers = {} if credential is None else {"Authorization": f"Bearer {credential}"}
        return httpx.AsyncClient(base_url="http://service.test", headers=headers,
                                 transport=httpx.ASGITransport(app=self.app))  # type: ignore[arg-type]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stored_contents(db: Path, scope: Scope) -> set[str]:
    """Every content in ``scope``, read by a fresh manager over the database a served
    process wrote (what survived it)."""
    from governed_memory.cli.common import operator

    async def read() -> set[str]:
        manager = GovernedMemoryManager.from_plugins("native",
                                                     {"backend": "sqlite", "path": str(db)})
        async with manager:
            found: set[str] = set()
            cursor: str | None = None
            while True:
                page = await manager.list(operator("acme"), scope, limit=100, cursor=cursor)
                found |= {record.content for record in page.items}
                if page.next_cursor is None:
                    return found
                cursor = page.next_cursor

    return asyncio.run(read())
