"""The store-wide purge of expired records through the search cache: no cached page
outlives it, whether the revisions live in the provider's storage (the purge's own
transactions advance them) or in the cache store (the wrapper bumps every scope the
purge's result names, tenant by tenant, as a per-scope purge bumps its one scope)."""

from __future__ import annotations

import pytest
from cache_support import ALICE, ALICE_SCOPE, CountingSink, WithoutScopeRevisions
from governed_memory import GovernedMemoryManager, Permission, Principal, Scope
from governed_memory.cache import CachedMemoryProvider, InMemoryCacheStore
from governed_memory.clock import ManualClock
from governed_memory.events import EventBus
from governed_memory.manager import MAINTENANCE_PRINCIPAL
from governed_memory_native import build_native_provider

GLOBEX = Scope("globex", user_id="alice")
GLOBEX_SERVICE = Principal("svc:globex", "service", "globex", permissions=[Permission.ADMIN])


@pytest.mark.parametrize("revisions", ["provider", "store"])
async def test_no_cached_page_outlives_a_store_wide_purge(revisions: str) -> None:
    clock = ManualClock()
    native = build_native_provider({"backend": "memory"}, clock)
    inner = native if revisions == "provider" else WithoutScopeRevisions(native)
    sink = CountingSink(keep=True)
    cache = CachedMemoryProvider(inner, InMemoryCacheStore(), events=EventBus([sink]),
                                 clock=clock, quarantine_retry_s=None)
    assert cache.checks_provider_revisions == (revisions == "provider")
    manager = GovernedMemoryManager(cache, clock=clock)
    async with manager:
        await manager.add(ALICE, ALICE_SCOPE, "green tea in the morning")
        await manager.add(ALICE, ALICE_SCOPE, "green tea, for a while",
                          expires_at=clock.now() + 10)
        await manager.add(GLOBEX_SERVICE, GLOBEX, "expiring elsewhere",
                          expires_at=clock.now() + 10)
        clock.advance(20)
        first = await manager.search(ALICE, ALICE_SCOPE, "tea")
        assert [hit.record.content for hit in first.hits] == ["green tea in the morning"]
        await manager.search(ALICE, ALICE_SCOPE, "tea")
        assert sink.count("hit") == 1  # the page is cached and served

        purged = await manager.purge_expired_all(MAINTENANCE_PRINCIPAL)
        assert purged.records == 2
        assert set(purged.tenants) == {"acme", "globex"}
        hits = sink.count("hit")
        again = await manager.search(ALICE, ALICE_SCOPE, "tea")
        assert sink.count("hit") == hits, "a page cached before the purge was served"
        assert [hit.record.content for hit in again.hits] == ["green tea in the morning"]
        if revisions == "store":
            bumped = {(event.tenant_id, scope) for event in sink.events
                      if event.type == "memory.cache.invalidate"
                      and event.operation == "purge_expired_all"
                      for scope in (event.scope_hashes or (event.scope_hash,))}
            assert bumped == {("acme", ALICE_SCOPE.scope_hash),
                              ("globex", GLOBEX.scope_hash)}
