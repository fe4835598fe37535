"""The wrapper's behaviour over the native provider with the in-memory store: hits,
invalidation by every kind of write, the guarded fill, bypasses, quarantine, expiry,
events and metrics."""

from __future__ import annotations

import asyncio
import collections
from typing import Any

import attrs
import pytest
from cache_support import (
    ALICE,
    ALICE_SCOPE,
    BOB_SCOPE,
    SERVICE,
    SHARED,
    CountingSink,
    FaultyStore,
    WithoutScopeRevisions,
    make_ctx,
)
from governed_memory import (
    MemoryConflictError,
    MemoryUnavailableError,
    Scope,
    SearchResult,
)
from governed_memory.cache import (
    CachedMemoryProvider,
    CacheStore,
    InMemoryCacheStore,
    Lookup,
    revision_names,
    tenant_tag,
)
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryStorageError
from governed_memory.events import EventBus
from governed_memory.operation_context import ProfileRef
from governed_memory.provider import MemoryProvider
from governed_memory.provider_kit import NoOptionalFeatures
from governed_memory.requests import (
    AddRequest,
    DeleteAllRequest,
    DeleteRequest,
    DeleteUserRequest,
    GetRequest,
    HistoryRequest,
    ListRequest,
    PurgeExpiredRequest,
    SearchRequest,
    UpdateRequest,
)
from governed_memory_native import NativeMemoryProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

QUERY = "alpha"


def search(*scopes: Scope, query: str = QUERY, **fields: Any) -> SearchRequest:
    return SearchRequest(scopes=scopes or (ALICE_SCOPE,), query=query, **fields)


class Spy:
    """Delegates to a provider, counting calls; hooks can fail or stall a call.

    It keeps no scope revisions of its own, so the cache over it runs the store-kept
    revision protocol (bumps, guarded fills, quarantine) that these tests are about;
    the provider-checked protocol is tested in ``test_provider_revisions.py``."""

    revisions = None

    def __init__(self, inner: NativeMemoryProvider) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls: collections.Counter[str] = collections.Counter()
        self.after: dict[str, Any] = {}
        self.search_error: BaseException | None = None

    def __getattr__(self, name: str) -> Any:
        target = getattr(self.inner, name)
        if not asyncio.iscoroutinefunction(target):
            return target

        async def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            if name == "search" and self.search_error is not None:
                raise self.search_error
            result = await target(*args, **kwargs)
            hook = self.after.get(name)
            if hook is not None:
                await hook()
            return result

        return call


@pytest.fixture
def spy(native: NativeMemoryProvider) -> Spy:
    return Spy(native)


def wrap(inner: Any, store: CacheStore, sink: CountingSink, clock: ManualClock,
         **options: Any) -> CachedMemoryProvider:
    options.setdefault("quarantine_retry_s", None)
    return CachedMemoryProvider(inner, store, events=EventBus([sink]), clock=clock, **options)


@pytest.fixture
def over_spy(spy: Spy, memory_store: InMemoryCacheStore, sink: CountingSink,
             clock: ManualClock) -> CachedMemoryProvider:
    return wrap(spy, memory_store, sink, clock)


async def add(provider: MemoryProvider, clock: ManualClock, content: str = "alpha one",
              scope: Scope = ALICE_SCOPE, **fields: Any) -> Any:
    return await provider.add(AddRequest(scope=scope, content=content, **fields),
                              make_ctx(clock))


async def direct(native: NativeMemoryProvider, clock: ManualClock,
                 request: SearchRequest) -> SearchResult:
    return await native.search(request, make_ctx(clock))


# -- hits and the provider contract ----------------------------------------------------


async def test_a_repeated_search_is_a_hit_equal_to_the_provider_answer(
        over_spy: CachedMemoryProvider, spy: Spy, native: NativeMemoryProvider,
        sink: CountingSink, clock: ManualClock) -> None:
    await add(over_spy, clock, "alpha one", metadata={"n": 1}, entity_ids=("e1",))
    await add(over_spy, clock, "alpha alpha two", expires_at=clock.now() + 1000)
    first = await over_spy.search(search(), make_ctx(clock))
    second = await over_spy.search(search(), make_ctx(clock))
    assert first == second == await direct(native, clock, search())
    assert spy.calls["search"] == 1
    assert (sink.count("miss", "absent"), sink.count("fill"), sink.count("hit")) == (1, 1, 1)


async def test_the_wrapper_is_a_provider_named_like_its_inner(
        cached: CachedMemoryProvider, native: NativeMemoryProvider) -> None:
    assert isinstance(cached, MemoryProvider)
    assert cached.name == native.name and cached.capabilities() == native.capabilities()
    assert cached.inner is native
    assert (await cached.health()).ok


async def test_reads_other_than_search_go_to_the_provider(
        over_spy: CachedMemoryProvider, spy: Spy, clock: ManualClock) -> None:
    record = await add(over_spy, clock)
    for _ in range(2):
        assert await over_spy.get(GetRequest(scope=ALICE_SCOPE, record_id=record.id),
                                  make_ctx(clock)) == record
        page = await over_spy.list(ListRequest(scope=ALICE_SCOPE), make_ctx(clock))
        assert page.items == (record,)
        history = await over_spy.history(HistoryRequest(scope=ALICE_SCOPE, record_id=record.id),
                                         make_ctx(clock))
        assert len(history) == 1
    assert (spy.calls["get"], spy.calls["list"], spy.calls["history"]) == (2, 2, 2)


# -- invalidation --------------------------------------------------------------------------


WRITES = ["add", "update", "soft_delete", "hard_delete", "delete_all", "purge_expired",
          "delete_user"]


async def apply_write(provider: MemoryProvider, kind: str, record_id: str,
                      clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    if kind == "add":
        await provider.add(AddRequest(scope=ALICE_SCOPE, content="alpha added later"), ctx)
    elif kind == "update":
        await provider.update(UpdateRequest(scope=ALICE_SCOPE, record_id=record_id,
                                            content="alpha changed"),
                              ctx)
    elif kind in ("soft_delete", "hard_delete"):
        await provider.delete(DeleteRequest(scope=ALICE_SCOPE, record_id=record_id,
                                            hard=kind == "hard_delete"),
                              ctx)
    elif kind == "delete_all":
        await provider.delete_all(DeleteAllRequest(scope=ALICE_SCOPE), ctx)
    elif kind == "purge_expired":
        await provider.purge_expired(PurgeExpiredRequest(scope=ALICE_SCOPE), ctx)
    else:
        await provider.delete_user(DeleteUserRequest(tenant_id="acme", user_id="alice"), ctx)


@pytest.mark.parametrize("kind", WRITES)
async def test_every_write_invalidates_the_searches_of_its_scope(
        kind: str, over_spy: CachedMemoryProvider, native: NativeMemoryProvider,
        sink: CountingSink, clock: ManualClock) -> None:
    record = await add(over_spy, clock, "alpha one")
    await add(over_spy, clock, "alpha shared note", scope=SHARED)
    request = search(ALICE_SCOPE, SHARED)
    await over_spy.search(request, make_ctx(clock))
    assert (await over_spy.search(request, make_ctx(clock))) == await direct(native, clock,
                                                                             request)
    await apply_write(over_spy, kind, record.id, clock)
    misses = sink.count("miss")
    after = await over_spy.search(request, make_ctx(clock))
    assert after == await direct(native, clock, request)
    assert sink.count("miss") == misses + 1
    assert sink.count("invalidate", "delete_user" if kind == "delete_user" else None) >= 1


async def test_a_write_elsewhere_keeps_the_entry(over_spy: CachedMemoryProvider,
                                                 sink: CountingSink, clock: ManualClock) -> None:
    await add(over_spy, clock)
    await over_spy.search(search(), make_ctx(clock))
    await add(over_spy, clock, "alpha for bob", scope=BOB_SCOPE)
    await add(over_spy, clock, "alpha elsewhere", scope=Scope("globex", user_id="alice"))
    await over_spy.search(search(), make_ctx(clock))
    assert sink.count("hit") == 1


async def test_delete_user_invalidates_every_scope_of_the_tenant_only(
        over_spy: CachedMemoryProvider, sink: CountingSink, clock: ManualClock) -> None:
    globex = Scope("globex", user_id="alice")
    await add(over_spy, clock, scope=BOB_SCOPE)
    await add(over_spy, clock, scope=globex)
    for scope in (BOB_SCOPE, globex):
        await over_spy.search(search(scope), make_ctx(clock))
    await over_spy.delete_user(DeleteUserRequest(tenant_id="acme", user_id="alice"),
                               make_ctx(clock))
    await over_spy.search(search(BOB_SCOPE), make_ctx(clock))  # epoch moved: a miss
    await over_spy.search(search(globex), make_ctx(clock))  # other tenant: a hit
    assert sink.count("hit") == 1 and sink.count("miss") == 3


async def test_refused_writes_do_not_invalidate(over_spy: CachedMemoryProvider,
                                                sink: CountingSink, clock: ManualClock) -> None:
    record = await add(over_spy, clock, key="taken")
    await over_spy.search(search(), make_ctx(clock))
    with pytest.raises(MemoryConflictError):
        await over_spy.update(UpdateRequest(scope=ALICE_SCOPE, record_id=record.id,
                                            expected_revision="r-stale",
                                            content="alpha never"), make_ctx(clock))
    with pytest.raises(MemoryConflictError):  # a refusal the provider makes
        await over_spy.add(AddRequest(scope=ALICE_SCOPE, content="beta", key="taken"),
                           make_ctx(clock))
    await over_spy.search(search(), make_ctx(clock))
    assert sink.count("hit") == 1 and sink.count("invalidate") == 1


async def test_a_failed_write_that_may_have_applied_still_invalidates(
        over_spy: CachedMemoryProvider, spy: Spy, native: NativeMemoryProvider,
        clock: ManualClock) -> None:
    record = await add(over_spy, clock)
    await over_spy.search(search(), make_ctx(clock))

    async def lost_reply() -> None:
        raise MemoryUnavailableError("the reply was lost after the commit")

    spy.after["update"] = lost_reply
    with pytest.raises(MemoryUnavailableError):
        await over_spy.update(UpdateRequest(scope=ALICE_SCOPE, record_id=record.id,
                                            content="alpha applied"),
                              make_ctx(clock))
    result = await over_spy.search(search(), make_ctx(clock))
    assert result.hits[0].record.content == "alpha applied"
    assert result == await direct(native, clock, search())


async def test_a_cancelled_write_still_invalidates(over_spy: CachedMemoryProvider, spy: Spy,
                                                   clock: ManualClock) -> None:
    record = await add(over_spy, clock)
    await over_spy.search(search(), make_ctx(clock))
    applied = asyncio.Event()

    async def stall() -> None:
        applied.set()
        await asyncio.sleep(3600)

    spy.after["update"] = stall
    task = asyncio.create_task(over_spy.update(
        UpdateRequest(scope=ALICE_SCOPE, record_id=record.id,
                      content="alpha applied"), make_ctx(clock)))
    await applied.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    result = await over_spy.search(search(), make_ctx(clock))
    assert result.hits[0].record.content == "alpha applied"


# -- the guarded fill ----------------------------------------------------------------------


async def test_a_revision_that_moves_during_the_call_gets_one_retry_then_no_fill(
        spy: Spy, memory_store: InMemoryCacheStore, sink: CountingSink,
        clock: ManualClock) -> None:
    faulty = FaultyStore(memory_store)
    provider = wrap(spy, faulty, sink, clock)
    await add(provider, clock)

    async def concurrent_write(tenant: str, names: Any) -> None:
        await memory_store.bump(tenant, [names[0]], (), clock.now())

    faulty.before_fill = concurrent_write
    result = await provider.search(search(), make_ctx(clock))
    assert result.hits and spy.calls["search"] == 2
    assert sink.count("miss", "revision_moved") == 1
    assert sink.count("bypassed", "revision_moved") == 1 and sink.count("fill") == 0


async def test_the_retry_fills_when_the_revision_holds_still(
        spy: Spy, memory_store: InMemoryCacheStore, sink: CountingSink,
        clock: ManualClock) -> None:
    faulty = FaultyStore(memory_store)
    provider = wrap(spy, faulty, sink, clock)
    await add(provider, clock)
    moves = [1]

    async def one_write(tenant: str, names: Any) -> None:
        if moves.pop() if moves else 0:
            await memory_store.bump(tenant, [names[0]], (), clock.now())

    faulty.before_fill = one_write
    await provider.search(search(), make_ctx(clock))
    await provider.search(search(), make_ctx(clock))
    assert spy.calls["search"] == 2
    assert (sink.count("fill"), sink.count("hit")) == (1, 1)


# -- bypasses ------------------------------------------------------------------------------


@pytest.mark.parametrize("failing", ["lookup", "fill"])
async def test_store_failures_bypass_and_never_fail_the_read(
        failing: str, spy: Spy, memory_store: InMemoryCacheStore, sink: CountingSink,
        native: NativeMemoryProvider, clock: ManualClock) -> None:
    faulty = FaultyStore(memory_store)
    faulty.fail.add(failing)
    provider = wrap(spy, faulty, sink, clock)
    await add(provider, clock)
    for _ in range(2):
        assert await provider.search(search(), make_ctx(clock)) == await direct(native, clock,
                                                                                 search())
    assert sink.count("bypassed", "unavailable") == 2 and sink.count("hit") == 0


class SlowStore(InMemoryCacheStore):
    async def lookup(self, tenant: str, names: Any, digest: str, now: float) -> Lookup:
        await asyncio.sleep(5)
        return await super().lookup(tenant, names, digest, now)


async def test_a_store_timeout_bypasses_within_the_deadline(
        native: NativeMemoryProvider, sink: CountingSink, clock: ManualClock) -> None:
    provider = wrap(native, SlowStore(), sink, clock, store_timeout_s=0.05)
    await add(provider, clock)
    loop = asyncio.get_running_loop()
    began = loop.time()
    result = await provider.search(search(), make_ctx(clock))
    assert result.hits and loop.time() - began < 1.0
    assert sink.count("bypassed", "timeout") == 1


async def test_oversized_results_are_returned_but_not_stored(
        native: NativeMemoryProvider, memory_store: InMemoryCacheStore, sink: CountingSink,
        clock: ManualClock) -> None:
    provider = wrap(native, memory_store, sink, clock, max_value_bytes=200)
    await add(provider, clock, "alpha " + "x" * 300)
    for _ in range(2):
        assert (await provider.search(search(), make_ctx(clock))).hits
    assert sink.count("bypassed", "oversized") == 2 and len(memory_store) == 0


async def test_undecodable_entries_bypass(spy: Spy, memory_store: InMemoryCacheStore,
                                          sink: CountingSink, clock: ManualClock) -> None:
    faulty = FaultyStore(memory_store)
    provider = wrap(spy, faulty, sink, clock)
    await add(provider, clock)
    await provider.search(search(), make_ctx(clock))
    faulty.corrupt_values = True
    assert (await provider.search(search(), make_ctx(clock))).hits
    assert sink.count("bypassed", "decode_error") == 1 and spy.calls["search"] == 2


async def test_an_entry_that_names_another_lookup_is_refused(
        spy: Spy, memory_store: InMemoryCacheStore, sink: CountingSink,
        clock: ManualClock) -> None:
    provider = wrap(spy, memory_store, sink, clock)
    await add(provider, clock)
    await add(provider, clock, scope=BOB_SCOPE)
    await provider.search(search(BOB_SCOPE), make_ctx(clock))
    # Copy Bob's entry over the key Alice's search will read.
    bob_key, bob_entry = next(iter(memory_store._entries.items()))
    alice_names = revision_names((ALICE_SCOPE,))
    found = await memory_store.lookup(tenant_tag("acme"), alice_names, "x", clock.now())
    from governed_memory.cache import search_digest

    digest = search_digest(search(), make_ctx(clock), provider.provider_revision)
    await memory_store.fill(tenant_tag("acme"), alice_names, found.revisions, digest,
                            bob_entry.value, 60)
    result = await provider.search(search(), make_ctx(clock))
    assert all(hit.record.scope_hash == ALICE_SCOPE.scope_hash for hit in result.hits)
    assert sink.count("bypassed", "decode_error") == 1
    assert bob_key


async def test_a_provider_failure_is_raised_and_never_retried(
        over_spy: CachedMemoryProvider, spy: Spy, clock: ManualClock) -> None:
    spy.search_error = MemoryStorageError("disk on fire")
    with pytest.raises(MemoryStorageError):
        await over_spy.search(search(), make_ctx(clock))
    assert spy.calls["search"] == 1


async def test_searches_that_are_not_cacheable_go_to_the_provider(
        over_spy: CachedMemoryProvider, spy: Spy, clock: ManualClock,
        monkeypatch: pytest.MonkeyPatch) -> None:
    import governed_memory.cache.provider as module

    monkeypatch.setattr(module, "is_cacheable", lambda request: False)
    await add(over_spy, clock)
    for _ in range(3):
        await over_spy.search(search(), make_ctx(clock))
    assert spy.calls["search"] == 3


# -- quarantine ----------------------------------------------------------------------------


async def test_a_failed_bump_quarantines_the_scope_until_a_bump_succeeds(
        spy: Spy, memory_store: InMemoryCacheStore, sink: CountingSink,
        native: NativeMemoryProvider, clock: ManualClock) -> None:
    faulty = FaultyStore(memory_store)
    provider = wrap(spy, faulty, sink, clock)
    record = await add(provider, clock)
    await provider.search(search(), make_ctx(clock))

    faulty.fail.add("bump")
    await provider.update(UpdateRequest(scope=ALICE_SCOPE, record_id=record.id,
                                        content="alpha after"),
                          make_ctx(clock))
    assert provider.quarantined == 1 and sink.count("quarantine", "unavailable") == 1
    lookups = faulty.calls["lookup"]
    for _ in range(2):  # the entry of the old revision is still in the store: never served
        result = await provider.search(search(), make_ctx(clock))
        assert result.hits[0].record.content == "alpha after"
    assert faulty.calls["lookup"] == lookups and faulty.calls["bump"] == 4  # add, update, 2 retries
    assert sink.count("bypassed", "quarantined") == 2

    faulty.fail.clear()
    result = await provider.search(search(), make_ctx(clock))
    assert result == await direct(native, clock, search())
    assert provider.quarantined == 0 and sink.count("invalidate", "quarantine_retry") == 1
    assert sink.count("fill") == 2
    assert (await provider.search(search(), make_ctx(clock))) == result
    assert sink.count("hit") == 1


async def test_other_scopes_stay_cached_during_a_quarantine(
        memory_store: InMemoryCacheStore, native: NativeMemoryProvider, sink: CountingSink,
        clock: ManualClock) -> None:
    faulty = FaultyStore(memory_store)
    provider = wrap(native, faulty, sink, clock)
    await add(provider, clock, scope=BOB_SCOPE)
    faulty.fail.add("bump")
    await add(provider, clock)
    faulty.fail.clear()
    faulty.fail.add("bump")  # keep the quarantine
    for _ in range(2):
        await provider.search(search(BOB_SCOPE), make_ctx(clock))
    assert sink.count("hit") == 1


async def test_the_background_task_retries_the_bump(
        native: NativeMemoryProvider, memory_store: InMemoryCacheStore, sink: CountingSink,
        clock: ManualClock) -> None:
    faulty = FaultyStore(memory_store)
    provider = wrap(WithoutScopeRevisions(native), faulty, sink, clock, quarantine_retry_s=0.01)
    await provider.start()
    try:
        faulty.fail.add("bump")
        await add(provider, clock, expires_at=clock.now() + 50)
        assert provider.quarantined == 1
        faulty.fail.clear()
        for _ in range(200):
            if provider.quarantined == 0:
                break
            await asyncio.sleep(0.01)
        assert provider.quarantined == 0
        # The expiry mark the failed bump owed was delivered by the retry.
        found = await memory_store.lookup(tenant_tag("acme"), revision_names((ALICE_SCOPE,)),
                                          "d", clock.now())
        assert found.horizon == clock.now() + 50
        event = next(e for e in sink.events if "quarantine_retry" in e.reasons)
        assert event.operation == "quarantine_retry" and event.tenant_id == "acme"
    finally:
        await provider.close()


async def test_a_bump_that_began_before_a_new_failure_does_not_release_it() -> None:
    from governed_memory.cache.quarantine import Quarantine

    quarantine = Quarantine()
    quarantine.hold("acme", "tag", ["a"])
    before = quarantine.snapshot("tag", ["a"])
    quarantine.hold("acme", "tag", ["a"], (5.0,))  # another write failed meanwhile
    assert before is not None and quarantine.release(before) == ()
    assert quarantine.held("tag", ["a"]) == ("a",)
    latest = quarantine.snapshot("tag", ["a"])
    assert latest is not None and latest.expiries == (5.0,)
    assert quarantine.release(latest) == ("a",) and not quarantine


# -- time ----------------------------------------------------------------------------------


async def test_a_record_on_the_page_expiring_ends_the_entry(
        over_spy: CachedMemoryProvider, native: NativeMemoryProvider, sink: CountingSink,
        clock: ManualClock) -> None:
    await add(over_spy, clock, "alpha stays")
    await add(over_spy, clock, "alpha goes", expires_at=clock.now() + 10)
    await over_spy.search(search(), make_ctx(clock))
    clock.advance(9)
    assert len((await over_spy.search(search(), make_ctx(clock))).hits) == 2
    clock.advance(1)
    result = await over_spy.search(search(), make_ctx(clock))
    assert [hit.record.content for hit in result.hits] == ["alpha stays"]
    assert result == await direct(native, clock, search())
    assert sink.count("miss", "outside_window") == 1


async def test_a_record_off_the_page_expiring_ends_the_entry_too(
        over_spy: CachedMemoryProvider, native: NativeMemoryProvider,
        clock: ManualClock) -> None:
    await add(over_spy, clock, "alpha alpha alpha first")
    await add(over_spy, clock, "alpha later", expires_at=clock.now() + 10)
    request = search(limit=1)
    before = await over_spy.search(request, make_ctx(clock))
    assert before.candidates == 2
    clock.advance(10)
    after = await over_spy.search(request, make_ctx(clock))
    assert after == await direct(native, clock, request) and after.candidates == 1


async def test_a_caller_behind_the_entry_is_not_served_a_later_answer(
        over_spy: CachedMemoryProvider, sink: CountingSink, clock: ManualClock) -> None:
    await add(over_spy, clock)
    await over_spy.search(search(), make_ctx(clock))
    await over_spy.search(search(), make_ctx(clock.now() - 5))
    assert sink.count("miss", "outside_window") == 1


# -- who is asking --------------------------------------------------------------------------


async def test_boundaries_and_profiles_do_not_share_entries(
        over_spy: CachedMemoryProvider, sink: CountingSink, clock: ManualClock) -> None:
    await add(over_spy, clock)
    await over_spy.search(search(), make_ctx(clock, ALICE))
    await over_spy.search(search(), make_ctx(clock, SERVICE))
    await over_spy.search(search(), make_ctx(clock, ALICE, profile=ProfileRef("p", "1", "r2")))
    twin = attrs.evolve(ALICE, principal_id="user:alice-on-phone")
    await over_spy.search(search(), make_ctx(clock, twin))
    assert sink.count("miss") == 3 and sink.count("hit") == 1


async def test_a_changed_policy_set_does_not_reuse_entries(
        over_spy: CachedMemoryProvider, spy: Spy, sink: CountingSink,
        clock: ManualClock) -> None:
    await add(over_spy, clock)
    for revision in ("policies-a", "policies-b", "policies-a"):
        await over_spy.search(search(), make_ctx(clock, ALICE, policy_revision=revision))
    assert (sink.count("miss"), sink.count("hit"), spy.calls["search"]) == (2, 1, 2)


# -- signals --------------------------------------------------------------------------------


async def test_events_name_the_operation_and_never_the_query(
        over_spy: CachedMemoryProvider, sink: CountingSink, clock: ManualClock) -> None:
    record = await add(over_spy, clock, "alpha zebra-secret")
    ctx = make_ctx(clock)
    await over_spy.search(search(query="zebra-secret"), ctx)
    await over_spy.search(search(query="zebra-secret"), ctx)
    await over_spy.delete(DeleteRequest(scope=ALICE_SCOPE, record_id=record.id), make_ctx(clock))
    assert {event.type for event in sink.events} == {
        "memory.cache.invalidate", "memory.cache.miss", "memory.cache.fill",
        "memory.cache.hit"}
    for event in sink.events:
        assert "zebra" not in event.to_json()
        assert event.scope_hash == ALICE_SCOPE.scope_hash and event.tenant_id == "acme"
    reads = [event for event in sink.events if event.operation == "search"]
    assert {event.operation_id for event in reads} == {ctx.operation_id}
    assert [event.count for event in reads if event.type == "memory.cache.hit"] == [1]


async def test_multi_scope_events_list_every_scope_hash(
        over_spy: CachedMemoryProvider, sink: CountingSink, clock: ManualClock) -> None:
    await over_spy.search(search(ALICE_SCOPE, SHARED), make_ctx(clock))
    assert sink.events[0].scope_hashes == (ALICE_SCOPE.scope_hash, SHARED.scope_hash)


async def test_metrics_count_every_outcome(native: NativeMemoryProvider,
                                           memory_store: InMemoryCacheStore,
                                           clock: ManualClock) -> None:
    reader = InMemoryMetricReader()
    faulty = FaultyStore(memory_store)
    provider = CachedMemoryProvider(WithoutScopeRevisions(native), faulty,
                                    meter_provider=MeterProvider(
        metric_readers=[reader]), clock=clock, quarantine_retry_s=None)
    record = await add(provider, clock)
    await provider.search(search(), make_ctx(clock))
    await provider.search(search(), make_ctx(clock))
    faulty.fail.add("bump")
    await provider.update(UpdateRequest(scope=ALICE_SCOPE, record_id=record.id, content="alpha b"),
                          make_ctx(clock))
    await provider.search(search(), make_ctx(clock))
    totals: dict[tuple[str, str | None], int] = collections.Counter()
    data = reader.get_metrics_data()
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            assert scope.scope.name == "governed_memory.cache"
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    reason = point.attributes.get("governed_memory.cache.reason")
                    totals[(metric.name, reason)] += point.value
    assert totals[("governed_memory.cache.hits", None)] == 1
    assert totals[("governed_memory.cache.misses", "absent")] == 1
    assert totals[("governed_memory.cache.fills", None)] == 1
    assert totals[("governed_memory.cache.invalidations", "add")] == 1
    assert totals[("governed_memory.cache.quarantines", "unavailable")] == 1
    assert totals[("governed_memory.cache.bypasses", "quarantined")] == 1


# -- optional operations: forwarded explicitly, exactly when the inner provider has them ---------


class Plain(NoOptionalFeatures):
    """A provider with nothing optional (and an operation of its own)."""

    name = "plain"

    async def peek(self, request: object, ctx: Any) -> str:
        return "peeked"

    marker = "plain attribute"


def test_optional_features_are_exactly_those_of_the_inner_provider(
        native: NativeMemoryProvider, memory_store: InMemoryCacheStore, sink: CountingSink,
        clock: ManualClock) -> None:
    full = wrap(native, memory_store, sink, clock)
    bare = wrap(Plain(), memory_store, sink, clock)
    # Indexing, the event outbox and replay are the provider's own objects; review is
    # the wrapper itself, so approving and rejecting invalidate.
    assert full.indexing is native.indexing and full.outbox is native.outbox
    assert full.replay is native.replay
    assert full.review is full
    assert (bare.review, bare.indexing, bare.outbox, bare.replay) == (None, None, None, None)
    # Nothing else leaks through: no generic delegate guesses at arguments.
    assert not hasattr(bare, "peek") and not hasattr(bare, "marker")
    assert not hasattr(full, "no_such_operation")


def test_every_public_operation_of_the_native_provider_is_reachable(
        native: NativeMemoryProvider, memory_store: InMemoryCacheStore, sink: CountingSink,
        clock: ManualClock) -> None:
    """A method added to the native provider and reachable neither on the wrapper nor
    through one of its feature accessors fails here, by name, rather than vanishing
    behind a profile's ``[cache] enabled``."""
    not_forwarded = {
        "backend": "the storage backend: reached through .inner, never governed",
        "indexing_settings": "the indexing settings: reached through .inner",
        "flush_snapshots": "a native tool (tests, benchmarks): reached through .inner",
        "vector_indexes": "in-process index status (benchmarks, tests): through .inner",
        "lexical_merger": "the SQLite delta merger (benchmarks, tests): through .inner",
        "ranking_pool": "the ranking workers' status (benchmarks, tests): through .inner",
    }
    full = wrap(native, memory_store, sink, clock)
    features = [feature for feature in (full.review, full.indexing, full.outbox, full.replay)
                if feature is not None]
    public = sorted(name for name in dir(NativeMemoryProvider) if not name.startswith("_"))
    missing = [name for name in public if name not in not_forwarded and not hasattr(full, name)
               and not any(hasattr(feature, name) for feature in features)]
    assert not missing, f"operations of the native provider the cache does not offer: {missing}"


async def test_close_closes_the_provider_and_the_store(native: NativeMemoryProvider,
                                                       clock: ManualClock) -> None:
    closed: list[str] = []

    class Store(InMemoryCacheStore):
        async def close(self) -> None:
            closed.append("store")

    provider = CachedMemoryProvider(native, Store(), clock=clock)
    await provider.start()
    await provider.close()
    assert closed == ["store"] and not (await native.health()).ok


def test_options_are_checked() -> None:
    store = InMemoryCacheStore()
    for bad in ({"ttl_s": 0}, {"store_timeout_s": -1}, {"max_value_bytes": 0},
                {"quarantine_retry_s": 0}):
        with pytest.raises(ValueError):
            CachedMemoryProvider(object(), store, **bad)  # type: ignore[arg-type]


# -- the decoded-entry memo -------------------------------------------------------------------


async def test_hits_on_flat_records_share_one_decoded_result(
        over_spy: CachedMemoryProvider, clock: ManualClock) -> None:
    await add(over_spy, clock, metadata={"lang": "en", "n": 1, "ok": True, "none": None})
    await over_spy.search(search(), make_ctx(clock))
    first = await over_spy.search(search(), make_ctx(clock))
    second = await over_spy.search(search(), make_ctx(clock))
    assert first.hits is second.hits  # decoded once
    assert first.snapshot_id != second.snapshot_id  # each hit has its own snapshot


async def test_hits_on_nested_metadata_are_decoded_afresh(
        over_spy: CachedMemoryProvider, clock: ManualClock) -> None:
    await add(over_spy, clock, metadata={"tags": ["a", "b"], "inner": {"k": 1}})
    await over_spy.search(search(), make_ctx(clock))
    first = await over_spy.search(search(), make_ctx(clock))
    first.hits[0].record.metadata["tags"].append("mutated by a caller")
    second = await over_spy.search(search(), make_ctx(clock))
    assert first is not second
    assert second.hits[0].record.metadata["tags"] == ["a", "b"]


async def test_the_memo_never_outlives_the_bytes_it_came_from(
        spy: Spy, memory_store: InMemoryCacheStore, sink: CountingSink,
        clock: ManualClock) -> None:
    faulty = FaultyStore(memory_store)
    provider = wrap(spy, faulty, sink, clock)
    await add(provider, clock)
    await provider.search(search(), make_ctx(clock))
    await provider.search(search(), make_ctx(clock))  # decoded and memoized
    faulty.corrupt_values = True
    await provider.search(search(), make_ctx(clock))
    assert sink.count("bypassed", "decode_error") == 1


def test_the_memo_is_bounded() -> None:
    from governed_memory.cache.codec import CachedSearch
    from governed_memory.cache.memo import DecodedMemo

    memo = DecodedMemo(2)
    entry = CachedSearch(SearchResult(hits=()), 0.0, None)
    for key in ("a", "b", "c"):
        memo.put(key, key.encode(), entry)
    assert len(memo) == 2 and memo.get("a", b"a") is None and memo.get("c", b"c") is entry
    assert memo.get("c", b"other bytes") is None
    disabled = DecodedMemo(0)
    disabled.put("a", b"a", entry)
    assert len(disabled) == 0


class Reviewing(NoOptionalFeatures):
    """Holds a pending record aside and makes it searchable on approve."""

    @property
    def review(self) -> Any:
        return self

    def __init__(self, inner: NativeMemoryProvider) -> None:
        self.inner = inner
        self.name = inner.name
        self.pending: dict[str, AddRequest] = {}

    def capabilities(self) -> Any:
        return self.inner.capabilities()

    async def search(self, request: SearchRequest, ctx: Any) -> SearchResult:
        return await self.inner.search(request, ctx)

    async def add(self, request: AddRequest, ctx: Any) -> Any:
        return await self.inner.add(request, ctx)

    async def approve(self, request: Any, ctx: Any) -> Any:
        return await self.inner.add(self.pending.pop(request.record_id), ctx)

    async def reject(self, request: Any, ctx: Any) -> Any:
        self.pending.pop(request.record_id)
        return None

    async def list_pending(self, request: Any, ctx: Any) -> Any:
        return list(self.pending)


async def test_approve_and_reject_pass_through_and_approve_invalidates(
        native: NativeMemoryProvider, memory_store: InMemoryCacheStore, sink: CountingSink,
        clock: ManualClock) -> None:
    from governed_memory.requests import ApproveRequest, RejectRequest

    inner = Reviewing(native)
    provider = wrap(inner, memory_store, sink, clock)
    assert provider.review is provider
    class WithoutReview(NoOptionalFeatures):  # the native provider reviews; this one never has
        name = "plain"

    assert wrap(WithoutReview(), memory_store, sink, clock).review is None
    inner.pending["rec-1"] = AddRequest(scope=ALICE_SCOPE, content="alpha approved later")
    inner.pending["rec-2"] = AddRequest(scope=ALICE_SCOPE, content="alpha rejected")
    assert not (await provider.search(search(), make_ctx(clock))).hits
    await provider.approve(ApproveRequest(scope=ALICE_SCOPE, record_id="rec-1"), make_ctx(clock))
    result = await provider.search(search(), make_ctx(clock))
    assert [hit.record.content for hit in result.hits] == ["alpha approved later"]
    await provider.reject(RejectRequest(scope=ALICE_SCOPE, record_id="rec-2"), make_ctx(clock))
    assert sink.count("invalidate", "approve") == 1 and sink.count("invalidate", "reject") == 1


def test_only_deeply_immutable_results_are_shareable() -> None:
    from governed_memory import MemoryRecord, SearchHit
    from governed_memory.cache.memo import shareable
    from governed_memory.records import HitExplanation

    record = MemoryRecord(id="r1", scope=ALICE_SCOPE, scope_hash=ALICE_SCOPE.scope_hash,
                          content="alpha", memory_type="note", version=1, revision="r",
                          content_hash="h", status="active", created_at=0.0, updated_at=0.0,
                          metadata={"a": 1})
    hit = SearchHit(record, 1.0, 1, HitExplanation(()))
    assert shareable(SearchResult((hit,)))
    assert not shareable(SearchResult([hit]))  # type: ignore[arg-type]
    listed = attrs.evolve(record, entity_ids=["e1"])  # type: ignore[arg-type]
    assert not shareable(SearchResult((attrs.evolve(hit, record=listed),)))
    nested = attrs.evolve(record, metadata={"a": [1]})
    assert not shareable(SearchResult((attrs.evolve(hit, record=nested),)))
