"""The service over the real native provider (memory and SQLite), with real keys."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from governed_memory import GovernedMemoryManager
from governed_memory.events import InMemoryEventSink
from governed_memory.tiers import InMemoryTurnStore, InMemoryWorkingStateStore, MemoryTiers
from governed_memory_service import ApiKeyStore, BearerAuthenticator, JwtVerifier, create_app
from service_support import JWT, Service, issue_credentials


@pytest.fixture(params=["memory", "sqlite"])
async def service(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Service]:
    config = ({"backend": "memory"} if request.param == "memory"
              else {"backend": "sqlite", "path": str(tmp_path / "memory.db")})
    sink = InMemoryEventSink()
    manager = GovernedMemoryManager.from_plugins("native", config, sinks=[sink])
    keys = ApiKeyStore(tmp_path / "keys.db")
    async with manager, keys:
        credentials = await issue_credentials(keys)
        tiers = MemoryTiers(long_term=manager, turns=InMemoryTurnStore(),
                            working=InMemoryWorkingStateStore())
        app = create_app(manager, BearerAuthenticator(keys, JwtVerifier(JWT)),
                         max_body_bytes=4096, tiers=tiers)
        yield Service(manager=manager, sink=sink, keys=keys, app=app, tiers=tiers,
                      alice=credentials.alice,
                      bob_other_tenant=credentials.bob_other_tenant,
                      reader=credentials.reader)
