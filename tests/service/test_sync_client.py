"""The synchronous client over a real app: the app runs on an event loop in a thread
(anyio's blocking portal) and a small sync transport hands it each request, so the
client under test is the plain ``httpx.Client`` one applications use."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio.from_thread
import httpx
import pytest
from anyio.from_thread import BlockingPortal
from governed_memory import GovernedMemoryManager, MemoryNotFoundError, Permission, Scope
from governed_memory.tiers import (
    InMemoryTurnStore,
    InMemoryWorkingStateStore,
    MemoryTiers,
    TurnDraft,
)
from governed_memory_service import (
    ApiKeyStore,
    AsyncMemoryClient,
    BearerAuthenticator,
    MemoryClient,
    create_app,
)
from governed_memory_service.errors import PreconditionFailedError


class PortalTransport(httpx.BaseTransport):
    """Sends each sync request to an ASGI app on the portal's event loop."""

    def __init__(self, portal: BlockingPortal, app: object) -> None:
        self._portal = portal
        self._inner = httpx.ASGITransport(app=app)  # type: ignore[arg-type]

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()

        async def send() -> httpx.Response:
            forwarded = httpx.Request(request.method, request.url, headers=request.headers,
                                      content=body)
            response = await self._inner.handle_async_request(forwarded)
            content = await response.aread()
            return httpx.Response(response.status_code, headers=response.headers,
                                  content=content, request=request)

        return self._portal.call(send)


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[MemoryClient]:
    with anyio.from_thread.start_blocking_portal() as portal:
        manager = GovernedMemoryManager.from_plugins(
            "native", {"backend": "sqlite", "path": str(tmp_path / "memory.db")})
        keys = ApiKeyStore(tmp_path / "keys.db")
        portal.call(manager.start)
        try:
            issued = portal.call(lambda: keys.create(
                tenant_id="acme", kind="user", user_id="alice",
                permissions=[Permission.READ, Permission.WRITE, Permission.DELETE]))
            tiers = MemoryTiers(long_term=manager, turns=InMemoryTurnStore(),
                                working=InMemoryWorkingStateStore())
            app = create_app(manager, BearerAuthenticator(keys), tiers=tiers)
            with MemoryClient("http://service.test", issued.token,
                              transport=PortalTransport(portal, app)) as client:
                yield client
        finally:
            portal.call(keys.close)
            portal.call(manager.close)


def test_the_sync_client_has_the_same_surface(remote: MemoryClient) -> None:
    scope = Scope("acme", user_id="alice")
    record = remote.add(scope, "Alice takes her coffee black", memory_type="preference",
                        idempotency_key="coffee-1")
    assert remote.add(scope, "Alice takes her coffee black", memory_type="preference",
                      idempotency_key="coffee-1") == record
    assert remote.get(scope, record.id) == record
    assert [r.id for r in remote.list(scope).items] == [record.id]
    assert remote.search(scope, "coffee").hits[0].record.id == record.id
    updated = remote.update(scope, record.id, expected_revision=record.revision,
                            importance=0.9)
    with pytest.raises(PreconditionFailedError):
        remote.update(scope, record.id, expected_revision=record.revision, importance=0.1)
    assert [v.record.version for v in remote.history(scope, record.id)] == [1, 2]
    remote.delete(scope, record.id, expected_revision=updated.revision, hard=True)
    with pytest.raises(MemoryNotFoundError):
        remote.get(scope, record.id)
    assert "gmk_" not in repr(remote)


def test_the_sync_client_reaches_the_tiers_and_the_context(remote: MemoryClient) -> None:
    session = Scope("acme", user_id="alice", session_id="s1")
    run = Scope("acme", user_id="alice", run_id="r1")
    remote.add(Scope("acme", user_id="alice"), "Alice lives in Lisbon")
    assert remote.append(session, TurnDraft.user("where do I live?")).seq == 1
    assert [t.content for t in remote.recent(session)] == ["where do I live?"]
    assert [t.seq for t in remote.turns_after(session, 0)] == [1]
    assert dict(remote.update_working_state(run, {"step": 1}).state) == {"step": 1}
    state = remote.working_state(run)
    assert state is not None and state.revision == 1
    context = remote.build_context(session, "what is Lisbon like?")
    assert "Lisbon" in context.memory_block
    assert remote.clear_working(run) and remote.clear(session) == 1


def test_both_clients_have_the_same_operations() -> None:
    def operations(kind: type) -> set[str]:
        return {n for n in vars(kind) if not n.startswith("_")} - {"aclose", "close"}

    assert operations(AsyncMemoryClient) == operations(MemoryClient)
    assert {"add", "search", "append", "update_working_state", "build_context",
            "delete_user", "replay"} <= operations(MemoryClient)
