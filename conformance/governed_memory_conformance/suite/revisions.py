"""Scope revisions (capability ``scope_revisions``): every committed change advances its
scope, nothing else does, ``delete_user`` advances the tenant epoch, and the horizon is
the first instant a record of the scopes expires or becomes valid or invalid.

A search cache in any process trusts a page only while these read what they read when
the page was stored, so a change that does not advance its scope is a stale answer
served to every process, and a revision that goes back is one served again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence

from governed_memory.errors import MemoryNotFoundError
from governed_memory.requests import DeleteAllRequest, DeleteUserRequest, PurgeExpiredRequest
from governed_memory.scope import Scope
from governed_memory.scope_revisions import ScopeRevisions, ScopeState

from governed_memory_conformance.base import ConformanceBase, scenario
from governed_memory_conformance.capabilities import requires
from governed_memory_conformance.harness import Harness
from governed_memory_conformance.scopes import ELSEWHERE, HOME, SIBLING, TENANT


def _reader(h: Harness) -> ScopeRevisions:
    revisions = h.provider.revisions
    assert revisions is not None, (
        "the provider declares scope_revisions but its revisions accessor is None")
    return revisions


async def _state(h: Harness, scopes: Sequence[Scope] = (HOME, SIBLING)) -> ScopeState:
    state = await _reader(h).read(TENANT, [scope.scope_hash for scope in scopes],
                                  h.clock.now())
    assert len(state.revisions) == len(scopes) + 1, (
        f"read() of {len(scopes)} scopes returned {len(state.revisions)} revisions "
        "(one per scope, then the tenant epoch)")
    return state


class ScopeRevisionTests(ConformanceBase):
    @requires("scope_revisions")
    @scenario
    async def test_every_write_advances_its_scope_and_only_its_scope(self, h: Harness) -> None:
        start = await _state(h)
        record = await h.add("walrus on the ice")
        after_add = await _state(h)
        assert after_add.revisions[0] > start.revisions[0], "an add did not advance its scope"
        assert after_add.revisions[1:] == start.revisions[1:], (
            "an add advanced another scope or the tenant epoch")
        steps: list[tuple[str, Callable[[], Awaitable[object]]]] = [
            ("an update", lambda: h.update(record.id, content="walrus on the beach"))]
        if h.capabilities.soft_delete:
            steps.append(("a soft delete", lambda: h.delete(record.id)))
        for label, write in steps:
            before = await _state(h)
            await write()
            after = await _state(h)
            assert after.revisions[0] > before.revisions[0], f"{label} did not advance its scope"
            assert after.revisions[1] == before.revisions[1], f"{label} advanced a sibling"
        await h.add("a second walrus", scope=SIBLING)
        assert (await _state(h)).revisions[1] > start.revisions[1]

    @requires("scope_revisions")
    @scenario
    async def test_reads_and_refused_writes_advance_nothing(self, h: Harness) -> None:
        record = await h.add("quiet heron")
        before = await _state(h)
        await h.get(record.id)
        await h.ids()
        if h.capabilities.lexical_search or h.capabilities.vector_search:
            await h.search("heron")
        with contextlib.suppress(MemoryNotFoundError):  # refused, as it must be
            await h.update("missing-record-id", content="nothing")
        assert await _state(h) == before, "a read or a refused write moved a revision"

    @requires("scope_revisions", "hard_delete")
    @scenario
    async def test_a_hard_delete_advances_its_scope(self, h: Harness) -> None:
        record = await h.add("short story")
        before = await _state(h)
        await h.delete(record.id, hard=True)
        assert (await _state(h)).revisions[0] > before.revisions[0]

    @requires("scope_revisions", "delete_all")
    @scenario
    async def test_delete_all_advances_its_scope(self, h: Harness) -> None:
        await h.add("one of many")
        before = await _state(h)
        await h.send(DeleteAllRequest(scope=HOME), h.ctx())
        assert (await _state(h)).revisions[0] > before.revisions[0]

    @requires("scope_revisions", "purge_expired")
    @scenario
    async def test_a_purge_that_removes_records_advances_their_scope(self, h: Harness) -> None:
        await h.add("fleeting", expires_at=h.clock.now() + 5)
        h.advance(5)
        before = await _state(h)
        page = await h.send(PurgeExpiredRequest(scope=HOME, limit=10),
                                              h.ctx())
        assert page.deleted == 1
        assert (await _state(h)).revisions[0] > before.revisions[0]

    @requires("scope_revisions", "delete_user")
    @scenario
    async def test_delete_user_advances_the_tenant_epoch_and_never_goes_back(
            self, h: Harness) -> None:
        await h.add("alice's note")
        await h.add("bob's note", scope=SIBLING)
        other = await _reader(h).read(ELSEWHERE.tenant_id, [ELSEWHERE.scope_hash],
                                      h.clock.now())
        before = await _state(h)
        await h.send(DeleteUserRequest(tenant_id=TENANT, user_id="alice"),
                                     h.ctx())
        after = await _state(h)
        assert after.revisions[-1] > before.revisions[-1], "delete_user left the epoch"
        assert after.revisions[1] >= before.revisions[1], "another user's scope went back"
        assert await _reader(h).read(ELSEWHERE.tenant_id, [ELSEWHERE.scope_hash],
                                     h.clock.now()) == other, (
            "an erasure in one tenant moved another tenant's revisions")
        # A page stored under (scope, epoch) before the erasure is never reachable again:
        # whatever the erased scope reads now, the epoch differs.
        await h.add("alice writes again")
        again = await _state(h)
        assert again.revisions[-1] >= after.revisions[-1]
        assert (again.revisions[0], again.revisions[-1]) != (
            before.revisions[0], before.revisions[-1])

    @requires("scope_revisions", "expiry")
    @scenario
    async def test_the_horizon_is_the_first_expiry_after_now(self, h: Harness) -> None:
        now = h.clock.now()
        assert (await _state(h, (HOME,))).horizon is None, "a horizon with nothing to end"
        await h.add("lasting")
        await h.add("late", expires_at=now + 100)
        await h.add("early", expires_at=now + 40)
        await h.add("elsewhere", scope=SIBLING, expires_at=now + 10)
        assert (await _state(h, (HOME,))).horizon == now + 40
        assert (await _state(h, (HOME, SIBLING))).horizon == now + 10
        h.advance(40)  # an instant that has come is no longer ahead
        assert (await _state(h, (HOME,))).horizon == now + 100
