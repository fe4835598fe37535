"""The working-state-store contract (``governed_memory.tiers.WorkingStateStore``).

One run's scratch state per exact scope: ``update`` merges (or replaces) atomically and
moves the expiry to ``now + ttl``; a read at or after the expiry finds nothing, and an
expired state is never merged into the next one; concurrent merges lose no key.
"""

from __future__ import annotations

import asyncio

from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryValidationError
from governed_memory.scope import Scope
from governed_memory.tiers import WorkingStateStore
from governed_memory.tiers.working import MAX_WORKING_STATE_BYTES

from governed_memory_conformance.harness import expect_error
from governed_memory_conformance.scopes import OTHER_TENANT, TENANT
from governed_memory_conformance.stores.base import StoreConformanceBase, store_scenario

RUN = Scope(TENANT, user_id="alice", session_id="s1", run_id="r1")
OTHER_RUN = RUN.replace(run_id="r2")
ELSEWHERE = Scope(OTHER_TENANT, user_id="alice", session_id="s1", run_id="r1")


class WorkingStateStoreConformance(StoreConformanceBase[WorkingStateStore]):
    """Subclass and implement ``make_store(clock)``."""

    @store_scenario
    async def test_update_merges_replace_swaps_clear_drops(self, store: WorkingStateStore,
                                                           clock: ManualClock) -> None:
        assert isinstance(store, WorkingStateStore), "make_store returned no WorkingStateStore"
        first = await store.update(RUN, {"step": "plan", "n": 1}, ttl_s=60, replace=False,
                                   now=100.0)
        second = await store.update(RUN, {"n": 2, "nested": {"a": [1, 2]}}, ttl_s=60,
                                    replace=False, now=110.0)
        assert (first.revision, second.revision) == (1, 2)
        assert dict(second.state) == {"step": "plan", "n": 2, "nested": {"a": [1, 2]}}
        assert (second.updated_at, second.expires_at) == (110.0, 170.0)
        read = await store.read(RUN, 120.0)
        assert read is not None and dict(read.state) == dict(second.state)
        replaced = await store.update(RUN, {"only": 1}, ttl_s=60, replace=True, now=130.0)
        assert dict(replaced.state) == {"only": 1} and replaced.revision == 3
        assert await store.clear(RUN) is True and await store.clear(RUN) is False
        assert await store.read(RUN, 130.0) is None

    @store_scenario
    async def test_runs_and_tenants_are_isolated(self, store: WorkingStateStore,
                                                 clock: ManualClock) -> None:
        await store.update(RUN, {"mine": 1}, ttl_s=60, replace=False, now=100.0)
        for other in (OTHER_RUN, ELSEWHERE, RUN.replace(run_id=None)):
            assert await store.read(other, 100.0) is None, f"state of {RUN} read from {other}"
        await store.update(ELSEWHERE, {"theirs": 2}, ttl_s=60, replace=False, now=100.0)
        assert await store.clear(ELSEWHERE) is True
        read = await store.read(RUN, 100.0)
        assert read is not None and dict(read.state) == {"mine": 1}

    @store_scenario
    async def test_state_expires_at_its_ttl(self, store: WorkingStateStore,
                                            clock: ManualClock) -> None:
        await store.update(RUN, {"a": 1}, ttl_s=30, replace=False, now=100.0)
        assert await store.read(RUN, 129.9) is not None
        assert await store.read(RUN, 130.0) is None, "state is gone at expires_at"
        fresh = await store.update(RUN, {"b": 2}, ttl_s=30, replace=False, now=131.0)
        assert dict(fresh.state) == {"b": 2} and fresh.revision == 1, (
            "an expired state was merged into the next one")

    @store_scenario
    async def test_concurrent_merges_lose_no_key(self, store: WorkingStateStore,
                                                 clock: ManualClock) -> None:
        await asyncio.gather(*(store.update(RUN, {f"k{i}": i}, ttl_s=60, replace=False,
                                            now=100.0) for i in range(30)))
        state = await store.read(RUN, 101.0)
        assert state is not None and dict(state.state) == {f"k{i}": i for i in range(30)}
        assert state.revision == 30

    @store_scenario
    async def test_an_oversized_state_is_refused_and_changes_nothing(
        self, store: WorkingStateStore, clock: ManualClock
    ) -> None:
        await store.update(RUN, {"kept": True}, ttl_s=60, replace=False, now=100.0)
        await expect_error(MemoryValidationError,
                           store.update(RUN, {"big": "x" * MAX_WORKING_STATE_BYTES}, ttl_s=60,
                                        replace=False, now=101.0),
                           "an update past the working-state size limit")
        read = await store.read(RUN, 102.0)
        assert read is not None and dict(read.state) == {"kept": True} and read.revision == 1
