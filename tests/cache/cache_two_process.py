"""One of two processes sharing a SQLite file and a cache store: spawned by the
coherence test, it writes its half of the scopes and searches all of them. The store
is one Redis shared by both (``prefix`` set), or an in-memory store of its own in each
process (``prefix`` empty): then only the provider's scope revisions, kept in the
SQLite file, can tell a process about the other's writes."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from cache_coherence import Jitter, Model, run_workload
from cache_support import CountingSink
from governed_memory.cache import OUTCOMES, CachedMemoryProvider, CacheStore, InMemoryCacheStore
from governed_memory.clock import SystemClock
from governed_memory.events import EventBus
from governed_memory_native import build_native_provider
from governed_memory_redis import RedisCacheStore, RedisStoreConfig

SCOPES = 4


async def _main(index: int, db_path: str, redis_url: str, prefix: str, seed: int,
                searches: int, acks: Any, barrier: Any) -> dict[str, Any]:
    clock = SystemClock()
    native = build_native_provider({"backend": "sqlite", "path": db_path}, clock)
    rng = random.Random(seed * 10 + index)
    store: CacheStore = (
        RedisCacheStore(RedisStoreConfig(url=redis_url, key_prefix=prefix,
                                         socket_timeout_s=2.0, connect_timeout_s=2.0))
        if prefix else InMemoryCacheStore())
    sink = CountingSink()
    cached = CachedMemoryProvider(Jitter(native, rng), Jitter(store, rng), clock=clock,
                                  store_timeout_s=2.0, events=EventBus([sink]))
    await cached.start()
    try:
        await asyncio.to_thread(barrier.wait)
        tally = await run_workload(
            writers=[cached], readers=[cached], model=Model(seed, SCOPES), acks=acks,
            write_scopes=[i for i in range(SCOPES) if i % 2 == index], scopes=SCOPES,
            searches=searches, reader_tasks=4, rng=rng, now=clock.now, searches_per_write=10)
    finally:
        await cached.close()
    counts = {outcome: sink.count(outcome) for outcome in OUTCOMES}
    return {**tally.as_dict(), "outcomes": counts, "moved": sink.count("miss", "revision_moved")}


def child(index: int, db_path: str, redis_url: str, prefix: str, seed: int, searches: int,
          acks: Any, barrier: Any, results: Any) -> None:
    try:
        results.put((index, asyncio.run(_main(index, db_path, redis_url, prefix, seed,
                                              searches, acks, barrier))))
    except BaseException as exc:  # reported to the parent, which fails the test
        results.put((index, {"error": f"{type(exc).__name__}: {exc}"}))
        raise
