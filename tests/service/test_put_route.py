"""``PUT .../memories/by-key/{key}``: the manager's ``put`` over HTTP, through the remote
client and raw HTTP, over the real native provider (SQLite): an add when the key is new,
a new version when it is held, a 412 when ``If-Match`` names a stale revision, and the
key's scope checked like every write."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import attrs
import httpx
import pytest
from governed_memory import GovernedMemoryManager, MemoryScopeError, Permission, Scope
from governed_memory.clock import ManualClock
from governed_memory_service import (
    ApiKeyStore,
    AsyncMemoryClient,
    BearerAuthenticator,
    PreconditionFailedError,
    create_app,
)
from starlette.applications import Starlette

ALICE = Scope("acme", user_id="alice")


@attrs.frozen
class Served:
    app: Starlette
    token: str

    def client(self) -> AsyncMemoryClient:
        return AsyncMemoryClient("http://service.test", self.token,
                                 transport=httpx.ASGITransport(app=self.app))


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    clock = ManualClock()
    manager = GovernedMemoryManager.from_plugins(
        "native", {"backend": "sqlite", "path": str(tmp_path / "memory.db")}, clock=clock)
    keys = ApiKeyStore(tmp_path / "keys.db")
    async with manager, keys:
        made = await keys.create(tenant_id="acme", kind="user", user_id="alice",
                                 permissions=[Permission.READ, Permission.WRITE])
        yield Served(create_app(manager, BearerAuthenticator(keys)), made.token)


async def test_put_adds_then_versions_the_record_under_its_key(served: Served) -> None:
    async with served.client() as alice:
        first = await alice.put(ALICE, "team-lead", "Dana leads the team",
                                metadata={"source": "hr"})
        second = await alice.put(ALICE, "team-lead", "Eli leads the team")
        assert (second.id, second.version, second.key) == (first.id, 2, "team-lead")
        assert dict(second.metadata) == {"source": "hr"}
        with pytest.raises(PreconditionFailedError):
            await alice.put(ALICE, "team-lead", "Fay", expected_revision=first.revision)
        third = await alice.put(ALICE, "team-lead", "Fay leads the team",
                                expected_revision=second.revision)
        assert third.version == 3
        assert len((await alice.list(ALICE)).items) == 1
        with pytest.raises(MemoryScopeError):
            await alice.put(Scope("acme", user_id="bob"), "team-lead", "Bob")


async def test_put_answers_with_the_revision_as_etag(served: Served) -> None:
    async with httpx.AsyncClient(base_url="http://service.test",
                                 headers={"Authorization": f"Bearer {served.token}"},
                                 transport=httpx.ASGITransport(app=served.app)
                                 ) as http:
        response = await http.put("/v1/tenants/acme/memories/by-key/plan",
                                  params={"user_id": "alice"}, json={"content": "gold"})
        assert response.status_code == 200
        assert response.headers["etag"].strip('"') == response.json()["revision"]
        stale = await http.put("/v1/tenants/acme/memories/by-key/plan",
                               params={"user_id": "alice"}, json={"content": "silver"},
                               headers={"If-Match": '"not-the-revision"'})
        assert stale.status_code == 412
