"""Faults: Redis cut off mid-run behind a local TCP proxy (refused, dropped, hung).
Reads keep succeeding from the provider, no search ever shows a state older than an
acknowledged write, and once Redis is back no stale page is served — by this process
at once (quarantine) and by another process as soon as the failed bump is retried."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from cache_coherence import Jitter, Model, run_workload, scope_of
from cache_proxy import TcpProxy
from cache_support import (
    ALICE_SCOPE,
    REDIS_URL,
    CountingSink,
    FaultyStore,
    WithoutScopeRevisions,
    delete_prefix,
    make_ctx,
    require_redis,
    require_redis_package,
    unique_prefix,
)
from governed_memory.cache import CachedMemoryProvider
from governed_memory.clock import ManualClock
from governed_memory.events import EventBus
from governed_memory.requests import AddRequest, SearchRequest, UpdateRequest
from governed_memory_native import NativeMemoryProvider, build_native_provider

require_redis_package()

from governed_memory_redis import RedisCacheStore, RedisStoreConfig  # noqa: E402

SCOPES = 4


@pytest.fixture
async def proxy() -> AsyncIterator[TcpProxy]:
    require_redis()
    started = await TcpProxy(REDIS_URL).start()
    try:
        yield started
    finally:
        await started.close()


@pytest.fixture
def prefix() -> Any:
    require_redis()
    value = unique_prefix("faults")
    yield value
    delete_prefix(value)


def store_at(url: str, prefix: str) -> RedisCacheStore:
    return RedisCacheStore(RedisStoreConfig(url=url, key_prefix=prefix, socket_timeout_s=0.2,
                                            connect_timeout_s=0.2))


def wrapper(inner: Any, store: Any, sink: CountingSink, clock: ManualClock,
            **options: Any) -> CachedMemoryProvider:
    options.setdefault("store_timeout_s", 0.3)
    return CachedMemoryProvider(inner, store, events=EventBus([sink]), clock=clock, **options)


async def wait_until(predicate: Any, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.02)
    return predicate()


@pytest.mark.parametrize("provider_revisions", [True, False],
                         ids=["provider-revisions", "store-revisions"])
async def test_redis_cut_off_mid_run_never_fails_a_read_or_serves_a_stale_page(
        proxy: TcpProxy, prefix: str, provider_revisions: bool) -> None:
    """With the provider's revisions a Redis outage can only cost hits: writes never
    touch Redis, so there is nothing to quarantine. With store-kept revisions a failed
    bump quarantines the scope until it lands."""
    clock = ManualClock()
    native = build_native_provider({"backend": "memory"}, clock)
    rng = random.Random(23)
    sink = CountingSink()
    inner: Any = Jitter(native, rng)
    cached = wrapper(inner if provider_revisions else WithoutScopeRevisions(inner),
                     store_at(proxy.url, prefix), sink, clock, quarantine_retry_s=0.05)
    await cached.start()
    model, acks = Model(23, SCOPES), [0] * SCOPES
    done = asyncio.Event()
    phases: list[str] = []

    async def chaos() -> None:
        cut = 0
        while not done.is_set():
            await asyncio.sleep(0.25)
            if done.is_set():
                break
            action = ("refuse", "blackhole")[cut % 2]
            getattr(proxy, action)()
            phases.append(action)
            cut += 1
            await asyncio.sleep(0.25)
            proxy.restore()
            phases.append("restore")

    chaos_task = asyncio.create_task(chaos())
    try:
        tally = await run_workload(writers=[cached], readers=[cached], model=model, acks=acks,
                                   write_scopes=range(SCOPES), scopes=SCOPES, searches=1500,
                                   reader_tasks=6, rng=rng, now=clock.now,
                                   searches_per_write=8)
    finally:
        done.set()
        await chaos_task
        proxy.restore()
    try:
        assert await wait_until(lambda: cached.quarantined == 0), "the failed bumps never landed"
        # Redis is back: every scope's page shows its latest acknowledged state.
        for scope in range(SCOPES):
            request = SearchRequest(scopes=(scope_of(scope),), query="alpha", limit=20)
            result = await cached.search(request, make_ctx(clock))
            seen = frozenset(int(hit.record.content.rsplit("n", 1)[1]) for hit in result.hits)
            assert seen == model.states[scope][acks[scope]]
    finally:
        await cached.close()
    print(f"\n[faults] phases={len(phases)} searches={tally.searches} writes={tally.writes} "
          f"stale={tally.stale} incoherent={tally.incoherent} hits={sink.count('hit')} "
          f"fills={sink.count('fill')} quarantines={sink.count('quarantine')} "
          f"bypassed(unavailable)={sink.count('bypassed', 'unavailable')} "
          f"bypassed(timeout)={sink.count('bypassed', 'timeout')} "
          f"bypassed(quarantined)={sink.count('bypassed', 'quarantined')} "
          f"retried bumps={sink.count('invalidate', 'quarantine_retry')}")
    assert tally.stale == 0 and tally.incoherent == 0, tally.examples
    assert "refuse" in phases and "blackhole" in phases
    assert sink.count("hit") > 0
    assert (sink.count("quarantine") == 0) if provider_revisions else (
        sink.count("quarantine") > 0)
    assert sink.count("bypassed", "unavailable") + sink.count("bypassed", "timeout") > 0


async def test_another_process_sees_the_write_once_the_failed_bump_is_retried(
        proxy: TcpProxy, prefix: str) -> None:
    clock = ManualClock()
    native = build_native_provider({"backend": "memory"}, clock)
    await native.start()
    sink_a, sink_b = CountingSink(), CountingSink()
    # Two app processes over one database: A reaches Redis through the proxy, B directly.
    # Store-kept revisions (a provider without its own): with the native provider's,
    # no write would need Redis at all.
    a = wrapper(WithoutScopeRevisions(native), store_at(proxy.url, prefix), sink_a, clock,
                quarantine_retry_s=0.05)
    b = wrapper(WithoutScopeRevisions(native), store_at(REDIS_URL, prefix), sink_b, clock,
                quarantine_retry_s=None)
    await a.start()
    request = SearchRequest(scopes=(ALICE_SCOPE,), query="alpha")
    try:
        record = await a.add(AddRequest(scope=ALICE_SCOPE, content="alpha before"), make_ctx(clock))
        await b.search(request, make_ctx(clock))
        assert (await a.search(request, make_ctx(clock))).hits[0].record.content == "alpha before"
        assert sink_a.count("hit") == 1

        proxy.refuse()
        await a.update(UpdateRequest(scope=ALICE_SCOPE, record_id=record.id, content="alpha after"),
                       make_ctx(clock))
        assert a.quarantined == 1 and sink_a.count("quarantine", "unavailable") == 1
        result = await a.search(request, make_ctx(clock))  # A itself: never the old page
        assert result.hits[0].record.content == "alpha after"

        proxy.restore()
        assert await wait_until(lambda: a.quarantined == 0)
        for provider in (a, b):
            result = await provider.search(request, make_ctx(clock))
            assert result.hits[0].record.content == "alpha after"
        assert sink_a.count("invalidate", "quarantine_retry") == 1
    finally:
        await a.close()
        await b.close()


async def test_a_hung_redis_costs_one_deadline_and_never_the_read(
        proxy: TcpProxy, prefix: str, native: NativeMemoryProvider) -> None:
    clock = ManualClock()
    sink = CountingSink()
    cached = wrapper(native, store_at(proxy.url, prefix), sink, clock, quarantine_retry_s=None,
                     close_store=True)
    await cached.add(AddRequest(scope=ALICE_SCOPE, content="alpha one"), make_ctx(clock))
    request = SearchRequest(scopes=(ALICE_SCOPE,), query="alpha")
    await cached.search(request, make_ctx(clock))
    proxy.blackhole()
    began = time.monotonic()
    result = await cached.search(request, make_ctx(clock))
    elapsed = time.monotonic() - began
    assert result.hits and elapsed < 1.5
    assert sink.count("bypassed", "timeout") == 1
    proxy.restore()
    await cached.search(request, make_ctx(clock))
    await cached.search(request, make_ctx(clock))
    assert sink.count("hit") >= 1
    await cached.store.close()


async def test_a_forced_failed_bump_on_redis_quarantines_then_recovers(
        prefix: str, native: NativeMemoryProvider) -> None:
    clock = ManualClock()
    sink = CountingSink()
    faulty = FaultyStore(store_at(REDIS_URL, prefix))
    cached = wrapper(WithoutScopeRevisions(native), faulty, sink, clock,
                     quarantine_retry_s=None)
    record = await cached.add(AddRequest(scope=ALICE_SCOPE, content="alpha one"), make_ctx(clock))
    request = SearchRequest(scopes=(ALICE_SCOPE,), query="alpha")
    await cached.search(request, make_ctx(clock))
    faulty.fail.add("bump")
    await cached.update(UpdateRequest(scope=ALICE_SCOPE, record_id=record.id, content="alpha two"),
                        make_ctx(clock))
    assert cached.quarantined == 1
    assert (await cached.search(request, make_ctx(clock))).hits[0].record.content == "alpha two"
    assert sink.count("bypassed", "quarantined") == 1
    faulty.fail.clear()
    assert await cached.retry_quarantined() == 0
    assert (await cached.search(request, make_ctx(clock))).hits[0].record.content == "alpha two"
    assert (await cached.search(request, make_ctx(clock))).hits[0].record.content == "alpha two"
    assert sink.count("hit") == 1
    await faulty.close()
