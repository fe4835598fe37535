"""The turn-store contract (``governed_memory.tiers.TurnStore``), for every store.

A conversation's turns, per exact session scope: numbered by the store from 1 with no
gaps and never reused (a clear does not restart them), named turns stored once,
sessions and users isolated, erasure by user, and, for a durable store, every append
there after a restart.
"""

from __future__ import annotations

import asyncio

import pytest
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryConflictError, MemoryValidationError
from governed_memory.scope import Scope
from governed_memory.tiers import Role, ToolCall, TurnDraft, TurnStore

from governed_memory_conformance.harness import expect_error
from governed_memory_conformance.scopes import OTHER_TENANT, TENANT
from governed_memory_conformance.stores.base import StoreConformanceBase, store_scenario

S1 = Scope(TENANT, user_id="alice", session_id="s1")
S2 = Scope(TENANT, user_id="alice", session_id="s2")
BOB = Scope(TENANT, user_id="bob", session_id="s1")
ELSEWHERE = Scope(OTHER_TENANT, user_id="alice", session_id="s1")


class TurnStoreConformance(StoreConformanceBase[TurnStore]):
    """Subclass and implement ``make_store(clock)`` (and ``reopen_store`` if durable)."""

    @store_scenario
    async def test_turns_come_back_in_order_with_every_field(self, store: TurnStore,
                                                             clock: ManualClock) -> None:
        assert isinstance(store, TurnStore), "make_store returned no TurnStore"
        call = ToolCall("call_1", "search", '{"q": "ünïcode"}')
        drafts = [TurnDraft.user("hello"), TurnDraft.assistant("", tool_calls=(call,)),
                  TurnDraft.tool("call_1", "found 3", metadata={"ms": 12, "ok": True}),
                  TurnDraft.assistant("done", name="helper")]
        stored = [await store.append(S1, draft, 100.0 + i) for i, draft in enumerate(drafts)]
        assert [t.seq for t in stored] == [1, 2, 3, 4], "turns are numbered 1, 2, 3, …"
        assert all(t.scope_hash == S1.scope_hash for t in stored)
        assert [t.created_at for t in stored] == [100.0, 101.0, 102.0, 103.0], (
            "created_at is the time given to append")
        recent = await store.recent(S1, 10)
        assert recent == tuple(stored), "recent does not return the turns as appended"
        assert recent[1].tool_calls == (call,) and dict(recent[2].metadata) == {
            "ms": 12, "ok": True}
        assert recent[2].role is Role.TOOL and recent[2].tool_call_id == "call_1"
        assert recent[3].name == "helper"
        assert [t.seq for t in await store.recent(S1, 2)] == [3, 4], (
            "recent(limit) is the newest turns, oldest first")
        assert [t.seq for t in await store.after(S1, 1, 2)] == [2, 3]
        assert await store.after(S1, 4, 10) == ()

    @store_scenario
    async def test_sessions_users_and_tenants_are_isolated(self, store: TurnStore,
                                                           clock: ManualClock) -> None:
        for scope, text in ((S1, "alice s1"), (S2, "alice s2"), (BOB, "bob s1"),
                            (ELSEWHERE, "alice elsewhere")):
            assert (await store.append(scope, TurnDraft.user(text), 1.0)).seq == 1, (
                "every session numbers its own turns")
        assert [t.content for t in await store.recent(S1, 10)] == ["alice s1"]
        assert [t.content for t in await store.recent(BOB, 10)] == ["bob s1"]
        assert await store.recent(Scope(TENANT, user_id="alice"), 10) == (), (
            "a scope is exact: the user's scope is not the session's")
        assert await store.delete_user(TENANT, "alice") == 2
        assert await store.recent(S1, 10) == () and await store.recent(S2, 10) == ()
        assert [t.content for t in await store.recent(BOB, 10)] == ["bob s1"]
        assert [t.content for t in await store.recent(ELSEWHERE, 10)] == [
            "alice elsewhere"], "delete_user reached another tenant"
        assert await store.delete_user(TENANT, "alice") == 0

    @store_scenario
    async def test_named_turns_are_stored_once(self, store: TurnStore,
                                               clock: ManualClock) -> None:
        first = await store.append(S1, TurnDraft.user("once", turn_id="t-1"), 1.0)
        assert first.turn_id == "t-1"
        assert await store.append(S1, TurnDraft.user("once", turn_id="t-1"), 2.0) == first, (
            "a retried named turn must return the stored one")
        await expect_error(MemoryConflictError,
                           store.append(S1, TurnDraft.user("other", turn_id="t-1"), 3.0),
                           "a turn id reused for another turn")
        assert (await store.append(S2, TurnDraft.user("once", turn_id="t-1"), 1.0)).seq == 1, (
            "the same turn id in another session is another turn")
        assert len(await store.recent(S1, 10)) == 1

    @store_scenario
    async def test_numbers_keep_counting_after_a_clear(self, store: TurnStore,
                                                       clock: ManualClock) -> None:
        for i in range(3):
            await store.append(S1, TurnDraft.user(f"m{i}"), float(i))
        assert await store.clear(S1) == 3
        assert await store.recent(S1, 10) == ()
        assert (await store.append(S1, TurnDraft.user("after"), 9.0)).seq == 4, (
            "a clear must not restart the numbering (a summary frontier would cover it)")
        assert await store.clear(S2) == 0

    @store_scenario
    async def test_concurrent_appends_get_distinct_gap_free_numbers(
        self, store: TurnStore, clock: ManualClock
    ) -> None:
        turns = await asyncio.gather(*(store.append(S1, TurnDraft.user(f"m{i}"), float(i))
                                       for i in range(25)))
        assert sorted(t.seq for t in turns) == list(range(1, 26))
        assert [t.seq for t in await store.recent(S1, 100)] == list(range(1, 26))

    @store_scenario
    async def test_an_invalid_turn_is_refused_and_stores_nothing(
        self, store: TurnStore, clock: ManualClock
    ) -> None:
        for draft in (TurnDraft(Role.TOOL, "an answer to no call"),
                      TurnDraft.user("x", tool_call_id="call_1"),
                      TurnDraft.user("")):
            await expect_error(MemoryValidationError, store.append(S1, draft, 1.0),
                               f"append of an invalid {draft.role.value} turn")
        assert await store.recent(S1, 10) == ()
        assert (await store.append(S1, TurnDraft.user("valid"), 2.0)).seq == 1

    def test_appended_turns_survive_a_reopen(self) -> None:
        if not self.store_is_durable():
            pytest.skip(f"{self.describe()} is not durable (durable = False)")

        async def before(store: TurnStore, clock: ManualClock) -> None:
            await store.append(S1, TurnDraft.user("durable", turn_id="t-1"), 1.0)
            await store.append(S1, TurnDraft.assistant("noted"), 2.0)

        async def after(store: TurnStore, clock: ManualClock) -> None:
            assert [t.content for t in await store.recent(S1, 10)] == ["durable", "noted"]
            again = await store.append(S1, TurnDraft.user("durable", turn_id="t-1"), 3.0)
            assert again.seq == 1, "a named turn stored before the restart is stored once"
            assert (await store.append(S1, TurnDraft.user("next"), 4.0)).seq == 3

        self.run_across_reopen(before, after)
