"""What the service tests share: the running service and its credentials."""

from __future__ import annotations

import attrs
import httpx
from governed_memory import GovernedMemoryManager, Permission
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
