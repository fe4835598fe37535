"""Coherence: a search that starts after a write has returned never shows an answer
computed before that write. Concurrent tasks on one process (in-memory store and
Redis store), then two processes sharing a SQLite file and one Redis. Each run prints
its counts; the 10,000-search runs are marked ``slow``."""

from __future__ import annotations

import collections
import multiprocessing
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from cache_coherence import Jitter, Model, Tally, run_workload
from cache_support import (
    REDIS_URL,
    CountingSink,
    WithoutScopeRevisions,
    delete_prefix,
    require_redis,
    unique_prefix,
)
from governed_memory.cache import CachedMemoryProvider, CacheStore, InMemoryCacheStore
from governed_memory.clock import ManualClock
from governed_memory.events import EventBus
from governed_memory_native import build_native_provider

SCOPES = 4


def report(label: str, tally: Tally, sink: CountingSink | None = None) -> None:
    line = (f"\n[coherence {label}] searches={tally.searches} scope_checks={tally.scope_checks} "
            f"overlapping_writes={tally.overlapping} writes={tally.writes} "
            f"stale={tally.stale} incoherent={tally.incoherent}")
    if sink is not None:
        line += (f" hits={sink.count('hit')} fills={sink.count('fill')} "
                 f"misses={sink.count('miss')} moved={sink.count('miss', 'revision_moved')} "
                 f"bypassed={sink.count('bypassed')}")
    print(line)


class NoBumpStore(InMemoryCacheStore):
    """A broken store that forgets invalidations: the checker must catch it."""

    async def bump(self, tenant: str, names: Any, expiries: Any, now: float) -> None:
        return None


class FrozenRevisions:
    """A provider whose scope revisions never move: the checker must catch the cache
    that trusts them."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    @property
    def revisions(self) -> Any:
        outer = self

        class Frozen:
            async def read(self, tenant_id: str, scope_hashes: Any, now: float) -> Any:
                state = await outer._inner.revisions.read(tenant_id, scope_hashes, now)
                return attrs.evolve(state, revisions=(0,) * len(state.revisions))

        return Frozen()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


async def in_process(stores: list[CacheStore], searches: int, seed: int, *,
                     provider_revisions: bool = True,
                     frozen: bool = False) -> tuple[Tally, CountingSink]:
    """Two workers of one app over one provider, each with its store (one shared
    in-memory store, two in-memory stores as two processes have, or two Redis clients
    on the same prefix). With ``provider_revisions`` pages are checked against the
    native provider's own scope revisions; without, the revisions live in the store."""
    clock = ManualClock()
    native = build_native_provider({"backend": "memory"}, clock)
    await native.start()
    rng = random.Random(seed)
    sink = CountingSink()
    inner: Any = Jitter(native, rng)
    if frozen:
        inner = FrozenRevisions(inner)
    if not provider_revisions:
        inner = WithoutScopeRevisions(inner)
    workers = [CachedMemoryProvider(inner, Jitter(store, rng), events=EventBus([sink]),
                                    clock=clock, quarantine_retry_s=None, close_store=False)
               for store in stores]
    try:
        tally = await run_workload(writers=workers, readers=workers, model=Model(seed, SCOPES),
                                   acks=[0] * SCOPES, write_scopes=range(SCOPES), scopes=SCOPES,
                                   searches=searches, reader_tasks=8, rng=rng, now=clock.now)
    finally:
        await native.close()
        for store in {id(store): store for store in stores}.values():
            await store.close()
    return tally, sink


def redis_store(prefix: str) -> CacheStore:
    from governed_memory_redis import RedisCacheStore, RedisStoreConfig

    return RedisCacheStore(RedisStoreConfig(url=REDIS_URL, key_prefix=prefix,
                                            socket_timeout_s=2.0))


def check(label: str, tally: Tally, sink: CountingSink | None = None) -> None:
    report(label, tally, sink)
    assert tally.stale == 0 and tally.incoherent == 0, tally.examples
    assert tally.overlapping > 0, "no search overlapped a write: the run proves nothing"
    if sink is not None:
        assert sink.count("hit") > 0 and sink.count("fill") > 0


async def test_the_checker_catches_a_cache_that_forgets_invalidations() -> None:
    store = NoBumpStore()
    tally, _ = await in_process([store, store], 1500, seed=7, provider_revisions=False)
    report("no-bump control", tally)
    assert tally.stale > 0


async def test_the_checker_catches_a_cache_trusting_revisions_that_never_move() -> None:
    tally, _ = await in_process([InMemoryCacheStore(), InMemoryCacheStore()], 1500, seed=7,
                                frozen=True)
    report("frozen-revisions control", tally)
    assert tally.stale > 0


async def test_process_local_stores_cannot_see_each_other_without_provider_revisions(
        ) -> None:
    """Why the provider keeps the revisions: two processes' in-memory stores, each
    bumped only by its own writes, serve each other stale pages (issue 28, defect 1)."""
    tally, _ = await in_process([InMemoryCacheStore(), InMemoryCacheStore()], 1500, seed=7,
                                provider_revisions=False)
    report("separate stores, store-kept revisions (control)", tally)
    assert tally.stale > 0


@pytest.mark.parametrize("searches", [
    4_000,
    pytest.param(10_000, marks=pytest.mark.slow),
])
async def test_process_local_stores_stay_coherent_with_provider_revisions(
        searches: int) -> None:
    """Two workers, each with its own in-memory store (two processes, in effect): every
    write by one invalidates the other's pages through the provider's revisions."""
    tally, sink = await in_process([InMemoryCacheStore(), InMemoryCacheStore()], searches,
                                   seed=19)
    check(f"separate memory stores, provider revisions, {searches}", tally, sink)
    assert tally.searches >= searches


@pytest.mark.parametrize("searches", [
    2_000,
    pytest.param(10_000, marks=pytest.mark.slow),
])
async def test_store_kept_revisions_with_one_shared_memory_store(searches: int) -> None:
    store = InMemoryCacheStore()
    tally, sink = await in_process([store, store], searches, seed=23, provider_revisions=False)
    check(f"memory store, store-kept revisions, {searches}", tally, sink)


@pytest.mark.parametrize("searches", [
    4_000,
    pytest.param(10_000, marks=pytest.mark.slow),
])
async def test_concurrent_tasks_with_the_memory_store(searches: int) -> None:
    store = InMemoryCacheStore()
    tally, sink = await in_process([store, store], searches, seed=11)
    check(f"memory store, {searches}", tally, sink)
    assert tally.searches >= searches


@pytest.mark.parametrize("searches", [
    2_000,
    pytest.param(10_000, marks=pytest.mark.slow),
])
async def test_concurrent_tasks_with_the_redis_store(searches: int) -> None:
    require_redis()
    prefix = unique_prefix("coherence")
    try:
        tally, sink = await in_process([redis_store(prefix), redis_store(prefix)], searches,
                                       seed=13)
    finally:
        delete_prefix(prefix)
    check(f"redis store, {searches}", tally, sink)


def _spawn(context: Any, child: Callable[..., None], db: Path, prefix: str, seed: int,
           searches_each: int) -> Tally:
    acks = context.Array("q", SCOPES, lock=False)
    barrier = context.Barrier(2)
    results = context.Queue()
    processes = [context.Process(target=child, args=(i, str(db), REDIS_URL, prefix, seed,
                                                     searches_each, acks, barrier, results))
                 for i in range(2)]
    try:
        for process in processes:
            process.start()
        collected = [results.get(timeout=300) for _ in processes]
        for process in processes:
            process.join(timeout=60)
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()
        if prefix:  # an empty prefix means no Redis (never "delete every key")
            delete_prefix(prefix)
    total = Tally()
    outcomes: collections.Counter[str] = collections.Counter()
    for index, stats in sorted(collected):
        assert "error" not in stats, f"process {index}: {stats['error']}"
        outcomes.update(stats.pop("outcomes"))
        outcomes["moved"] += stats.pop("moved")
        total.merge(Tally(**stats))
    print("\n[coherence two processes] cache outcomes: " + " ".join(
        f"{name}={count}" for name, count in sorted(outcomes.items())))
    assert outcomes["hit"] > 0 and outcomes["fill"] > 0
    return total


@pytest.mark.parametrize("searches_each", [
    1_000,
    pytest.param(5_000, marks=pytest.mark.slow),
])
async def test_two_processes_share_one_redis_and_one_sqlite_file(
        tmp_path: Path, searches_each: int) -> None:
    require_redis()
    db = tmp_path / "shared.db"
    native = build_native_provider({"backend": "sqlite", "path": str(db)}, ManualClock())
    await native.start()  # the schema exists before two processes race to create it
    await native.close()
    from cache_two_process import child

    tally = _spawn(multiprocessing.get_context("spawn"), child, db,
                   unique_prefix("two-process"), 17, searches_each)
    check(f"two processes, {2 * searches_each}", tally)
    assert tally.searches == 2 * searches_each


@pytest.mark.parametrize("searches_each", [
    1_000,
    pytest.param(5_000, marks=pytest.mark.slow),
])
async def test_two_processes_each_with_its_own_memory_store_on_one_sqlite_file(
        tmp_path: Path, searches_each: int) -> None:
    """Issue 28, defect 1: two processes, each caching in its own memory, on one SQLite
    file. Only the scope revisions the file keeps can tell each about the other's
    writes; no page either serves may predate a write the other acknowledged."""
    db = tmp_path / "shared.db"
    native = build_native_provider({"backend": "sqlite", "path": str(db)}, ManualClock())
    await native.start()
    await native.close()
    from cache_two_process import child

    tally = _spawn(multiprocessing.get_context("spawn"), child, db, "", 29, searches_each)
    check(f"two processes, own memory stores, {2 * searches_each}", tally)
    assert tally.searches == 2 * searches_each

