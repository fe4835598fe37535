"""The search-cache-store contract (``governed_memory.cache.CacheStore``).

What the search cache's promise rests on, store by store: revisions never go back and
every bump raises each name it names; a fill lands only if every revision still reads
what the lookup read (checked and written in one step); entries are per tenant, digest
and revisions, and live no longer than their TTL; a bump records expiry marks with the
revision, and a lookup reports the earliest mark after its ``now``; a store that can
erase a tenant (``ErasingCacheStore``) removes exactly that tenant's entries.
"""

from __future__ import annotations

import asyncio
import itertools

import pytest
from governed_memory.cache import CacheStore, ErasingCacheStore
from governed_memory.clock import ManualClock

from governed_memory_conformance.stores.base import StoreConformanceBase, store_scenario

NAMES = ("sh1:scope-a", "epoch")
OTHER_NAMES = ("sh1:scope-b", "epoch")
DIGEST = "d" * 64


class CacheStoreConformance(StoreConformanceBase[CacheStore]):
    """Subclass and implement ``make_store(clock)``: a fresh, empty store (every name
    unbumped, no entry), private to the test."""

    @store_scenario
    async def test_a_fill_is_found_under_the_revisions_it_was_stored_under(
        self, store: CacheStore, clock: ManualClock
    ) -> None:
        assert isinstance(store, CacheStore), "make_store returned no CacheStore"
        found = await store.lookup("t1", NAMES, DIGEST, 100.0)
        assert found.value is None and len(found.revisions) == len(NAMES)
        assert await store.fill("t1", NAMES, found.revisions, DIGEST, b"answer", 60.0)
        again = await store.lookup("t1", NAMES, DIGEST, 100.0)
        assert (again.revisions, again.value) == (found.revisions, b"answer")
        for tenant, digest in (("t2", DIGEST), ("t1", "e" * 64)):
            assert (await store.lookup(tenant, NAMES, digest, 100.0)).value is None, (
                f"an entry of t1/{DIGEST[:4]}… was found as {tenant}/{digest[:4]}…")

    @store_scenario
    async def test_bumps_only_raise_revisions(self, store: CacheStore,
                                              clock: ManualClock) -> None:
        seen = [(await store.lookup("t1", NAMES, DIGEST, 0.0)).revisions]
        for _ in range(3):
            await store.bump("t1", NAMES[:1], (), 0.0)
            seen.append((await store.lookup("t1", NAMES, DIGEST, 0.0)).revisions)
        scope_revisions = [revisions[0] for revisions in seen]
        assert all(a < b for a, b in itertools.pairwise(scope_revisions)), (
            f"a bumped name read {scope_revisions}: revisions must rise with every bump")
        before = (await store.lookup("t2", NAMES, DIGEST, 0.0)).revisions
        await store.bump("t1", NAMES, (), 0.0)
        assert (await store.lookup("t2", NAMES, DIGEST, 0.0)).revisions == before, (
            "a bump of one tenant moved another tenant's revisions")

    @store_scenario
    async def test_a_fill_under_moved_revisions_is_refused(self, store: CacheStore,
                                                           clock: ManualClock) -> None:
        found = await store.lookup("t1", NAMES, DIGEST, 0.0)
        await store.bump("t1", ("epoch",), (), 0.0)
        assert not await store.fill("t1", NAMES, found.revisions, DIGEST, b"stale", 60.0), (
            "a fill under revisions a bump moved must report that it stored nothing")
        now = await store.lookup("t1", NAMES, DIGEST, 0.0)
        assert now.value is None, "an answer computed before a bump was served after it"
        assert await store.fill("t1", NAMES, now.revisions, DIGEST, b"fresh", 60.0)
        assert (await store.lookup("t1", NAMES, DIGEST, 0.0)).value == b"fresh"
        await store.bump("t1", NAMES[:1], (), 0.0)
        assert (await store.lookup("t1", NAMES, DIGEST, 0.0)).value is None, (
            "an entry was still reached after one of its names was bumped")

    @store_scenario
    async def test_concurrent_bumps_each_move_the_revision(self, store: CacheStore,
                                                           clock: ManualClock) -> None:
        found = await store.lookup("t1", NAMES, DIGEST, 0.0)
        await asyncio.gather(*(store.bump("t1", NAMES[:1], (), 0.0) for _ in range(20)),
                             store.fill("t1", NAMES, found.revisions, DIGEST, b"racing", 60.0))
        after = await store.lookup("t1", NAMES, DIGEST, 0.0)
        assert after.revisions[0] > found.revisions[0] and after.value is None

    @store_scenario
    async def test_expiry_marks_set_the_lookup_horizon(self, store: CacheStore,
                                                       clock: ManualClock) -> None:
        assert (await store.lookup("t1", NAMES, DIGEST, 100.0)).horizon is None
        await store.bump("t1", NAMES[:1], (150.0, 120.0), 100.0)
        await store.bump("t1", OTHER_NAMES[:1], (110.0,), 100.0)
        assert (await store.lookup("t1", NAMES, DIGEST, 100.0)).horizon == 120.0, (
            "the horizon is the earliest mark after now among the names looked up")
        assert (await store.lookup("t1", NAMES, DIGEST, 120.0)).horizon == 150.0, (
            "a mark at now has passed")
        assert (await store.lookup("t1", NAMES, DIGEST, 150.0)).horizon is None
        both = (NAMES[0], OTHER_NAMES[0], "epoch")
        assert (await store.lookup("t1", both, DIGEST, 100.0)).horizon == 110.0
        assert (await store.lookup("t2", NAMES, DIGEST, 100.0)).horizon is None

    @store_scenario
    async def test_an_entry_lives_no_longer_than_its_ttl(self, store: CacheStore,
                                                         clock: ManualClock) -> None:
        found = await store.lookup("t1", NAMES, DIGEST, 0.0)
        assert await store.fill("t1", NAMES, found.revisions, DIGEST, b"brief", 0.05)
        await asyncio.sleep(0.3)  # the TTL runs on the store's own clock
        assert (await store.lookup("t1", NAMES, DIGEST, 0.0)).value is None

    @store_scenario
    async def test_erasing_a_tenant_removes_exactly_its_entries(self, store: CacheStore,
                                                                clock: ManualClock) -> None:
        if not isinstance(store, ErasingCacheStore):
            pytest.skip(f"{self.describe()} cannot erase a tenant (no erase_tenant)")
        for tenant in ("doomed", "kept"):
            for n in range(3):
                digest = f"{n}" * 64
                found = await store.lookup(tenant, NAMES, digest, 0.0)
                assert await store.fill(tenant, NAMES, found.revisions, digest, b"v", 60.0)
        assert await store.erase_tenant("doomed") == 3
        assert await store.erase_tenant("doomed") == 0
        for n in range(3):
            digest = f"{n}" * 64
            assert (await store.lookup("doomed", NAMES, digest, 0.0)).value is None
            assert (await store.lookup("kept", NAMES, digest, 0.0)).value == b"v"
