"""The service over the real native provider (memory and SQLite), with real keys."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from governed_memory import GovernedMemoryManager, Permission
from governed_memory.events import InMemoryEventSink
from governed_memory.tiers import InMemoryTurnStore, InMemoryWorkingStateStore, MemoryTiers
from governed_memory_service import ApiKeyStore, BearerAuthenticator, JwtVerifier, create_app
from service_support import ALL, JWT, Service


@pytest.fixture(params=["memory", "sqlite"])
async def service(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Service]:
    config = ({"backend": "memory"} if request.param == "memory"
              else {"backend": "sqlite", "path": str(tmp_path / "memory.db")})
    sink = InMemoryEventSink()
    manager = GovernedMemoryManager.from_plugins("native", config, sinks=[sink])
    keys = ApiKeyStore(tmp_path / "keys.db")
    async with manager, keys:
        alice = await keys.create(tenant_id="acme", kind="user", user_id="alice",
                                  permissions=ALL)
        bob = await keys.create(tenant_id="globex", kind="user", user_id="bob",
                                permissions=ALL)
        reader = await keys.create(tenant_id="acme", kind="user", user_id="alice",
                                   principal_id="user:alice-reader",
                                   permissions=[Permission.READ])
        tiers = MemoryTiers(long_term=manager, turns=InMemoryTurnStore(),
                            working=InMemoryWorkingStateStore())
        app = create_app(manager, BearerAuthenticator(keys, JwtVerifier(JWT)),
                         max_body_bytes=4096, tiers=tiers)
        yield Service(manager=manager, sink=sink, keys=keys, app=app, tiers=tiers,
                      alice=alice.token,
                      bob_other_tenant=bob.token, reader=reader.token)
