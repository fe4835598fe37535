"""What the search cache buys: hit and miss latency against the native SQLite provider
called directly, a hit against a raw Redis ``GET`` of the same payload, and the hit
rate of a 95 % read / 5 % write workload — in one run.

One SQLite file is seeded with records spread over several user scopes. Three targets
read it: the provider called directly, the provider behind the cache with the
in-memory store, and behind the cache with the Redis store. In the latency part every
sample issues the same search to each target in turn (order rotating): the direct
call, then for each cached target a *miss* (the tenant's entries are erased first,
untimed, so the entry is gone) and a *hit* (the same search again; the native provider
keeps scope revisions, so a hit includes the point read that checks the page), then a raw
``GET`` of the Redis entry just written. The workload part replays one seeded
sequence of operations per target: 95 % searches drawn Zipf-like from a pool of
(scope, query) pairs, 5 % updates of a random record (each invalidating its scope).
Writes ``bench/results/cache.json`` and ``cache.md``.

    python bench/cache.py [--samples 600] [--seed-records 2000] [--workload-ops 6000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from corpus import Corpus
from governed_memory import Permission, Principal, PrincipalKind, Scope, SearchResult
from governed_memory.cache import (
    CachedMemoryProvider,
    CacheStore,
    InMemoryCacheStore,
    revision_names,
    search_digest,
    tenant_tag,
)
from governed_memory.clock import SystemClock
from governed_memory.events import EventBus, MemoryEvent
from governed_memory.operation_context import OperationContext
from governed_memory.requests import AddRequest, SearchRequest, UpdateRequest
from governed_memory_native import build_native_provider

RESULTS = Path(__file__).parent / "results"
PRINCIPAL = Principal("svc:bench", PrincipalKind.SERVICE, "bench",
                      permissions=frozenset({Permission.READ, Permission.WRITE}))
SCOPES = tuple(Scope("bench", project_id="p", user_id=f"u{i}") for i in range(8))
SYLLABLES = ("ka", "lo", "mi", "nu", "pe", "ra", "si", "to", "vu", "we", "xa", "yo", "za",
             "be", "co", "di", "fu", "ga", "hi", "ju")


CORPUS = Corpus(SYLLABLES, seed=5, query_pool=400)
WORDS = CORPUS.words
sentence, query_text = CORPUS.sentence, CORPUS.query_text


class Counting:
    """An event sink that only counts cache outcomes."""

    name = "counting"

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    async def emit(self, event: MemoryEvent) -> None:
        self.counts[event.type.removeprefix("memory.cache.")] += 1

    async def close(self) -> None:
        return None


def ctx(clock: SystemClock) -> OperationContext:
    return OperationContext(operation_id="op_bench_" + uuid.uuid4().hex[:12], principal=PRINCIPAL,
                            now=clock.now())


async def timed(samples: list[int], call: Awaitable[Any]) -> Any:
    start = time.perf_counter_ns()
    result = await call
    samples.append(time.perf_counter_ns() - start)
    return result


def summary(values: list[int]) -> dict[str, float]:
    ordered = sorted(values)
    return {"median_us": round(statistics.median(ordered) / 1000, 1),
            "p95_us": round(ordered[int(0.95 * (len(ordered) - 1))] / 1000, 1),
            "n": len(ordered)}


async def latency(direct: Any, cached: dict[str, CachedMemoryProvider], redis_store: Any,
                  clock: SystemClock, samples: int, rng: random.Random) -> dict[str, Any]:
    times: dict[str, list[int]] = {"direct": [], "redis GET (raw)": []}
    payload_bytes: list[int] = []
    for name in cached:
        times[f"{name} miss"] = []
        times[f"{name} hit"] = []
    names = list(cached)
    for i in range(samples):
        scope = rng.choice(SCOPES)
        request = SearchRequest(scopes=(scope,), query=query_text(rng), limit=10)
        reference: SearchResult = await timed(times["direct"], direct.search(request, ctx(clock)))
        order = names[i % len(names):] + names[:i % len(names)]
        for name in order:
            provider = cached[name]
            tag = tenant_tag(scope.tenant_id)
            await provider.store.erase_tenant(tag)  # untimed: the entry is gone
            await timed(times[f"{name} miss"], provider.search(request, ctx(clock)))
            hit = await timed(times[f"{name} hit"], provider.search(request, ctx(clock)))
            if hit != reference:
                raise AssertionError("a cached answer differs from the provider's")
        if redis_store is not None:
            provider = cached["cache+redis"]
            digest = search_digest(request, ctx(clock), provider.provider_revision)
            if provider.checks_provider_revisions:
                # Pages are keyed by the provider's own scope revisions (one point read).
                state = await direct.revisions.read(
                    "bench", [h for h in revision_names(request.scopes)[:-1]], clock.now())
                suffix = digest + ":s" + ".".join(str(r) for r in state.revisions)
                key = redis_store.entry_key(tenant_tag("bench"), suffix, ())
            else:
                found = await redis_store.lookup(tenant_tag("bench"),
                                                 revision_names(request.scopes), digest,
                                                 clock.now())
                key = redis_store.entry_key(tenant_tag("bench"), digest, found.revisions)
            value = await timed(times["redis GET (raw)"], redis_store.client.get(key))
            if value is None:
                raise AssertionError("the entry the hit read is not in Redis")
            payload_bytes.append(len(value))
    rows = {name: summary(values) for name, values in times.items() if values}
    return {"rows": rows,
            "payload_bytes_median": statistics.median(payload_bytes) if payload_bytes else None}


async def workload(run: Callable[[str, Any], Awaitable[Any]], ops: list[tuple[str, Any]],
                   ) -> dict[str, float]:
    samples: list[int] = []
    for kind, argument in ops:
        await timed(samples, run(kind, argument))
    return {"mean_us": round(statistics.fmean(samples) / 1000, 1),
            "median_us": round(statistics.median(samples) / 1000, 1),
            "total_s": round(sum(samples) / 1e9, 2)}


def cold(ops: list[tuple[str, Any]]) -> int:
    """Searches asked for the first time: no cache can answer those."""
    return len({argument for kind, argument in ops if kind == "search"})


def workload_ops(count: int, ids: dict[str, list[str]], seed: int = 99) -> list[tuple[str, Any]]:
    rng = random.Random(seed)
    pool = [(rng.choice(SCOPES), query_text(rng)) for _ in range(400)]
    weights = [1.0 / (rank + 1) ** 0.9 for rank in range(len(pool))]
    ops: list[tuple[str, Any]] = []
    for _ in range(count):
        if rng.random() < 0.05:
            scope = rng.choice(SCOPES)
            ops.append(("update", (scope, rng.choice(ids[scope.scope_hash]), sentence(rng))))
        else:
            ops.append(("search", rng.choices(pool, weights)[0]))
    return ops


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--samples", type=int, default=600)
    parser.add_argument("--seed-records", type=int, default=2000)
    parser.add_argument("--workload-ops", type=int, default=6000)
    parser.add_argument("--redis-url", default=os.environ.get("GOVERNED_MEMORY_REDIS_URL",
                                                              "redis://127.0.0.1:6379/0"))
    args = parser.parse_args()
    clock = SystemClock()
    rng = random.Random(7)
    prefix = f"gmbench:{uuid.uuid4().hex[:8]}:"
    with tempfile.TemporaryDirectory() as tmp:
        direct = build_native_provider({"backend": "sqlite", "path": str(Path(tmp) / "b.db")},
                                       clock)
        await direct.start()
        ids: dict[str, list[str]] = {scope.scope_hash: [] for scope in SCOPES}
        for i in range(args.seed_records):
            scope = SCOPES[i % len(SCOPES)]
            record = await direct.add(AddRequest(scope=scope, content=sentence(rng)), ctx(clock))
            ids[scope.scope_hash].append(record.id)

        sinks: dict[str, Counting] = {}
        stores: dict[str, CacheStore] = {"cache+memory": InMemoryCacheStore()}
        redis_store: Any = None
        try:
            from governed_memory_redis import RedisCacheStore, RedisStoreConfig

            redis_store = RedisCacheStore(RedisStoreConfig(url=args.redis_url, key_prefix=prefix))
            if await redis_store.ping():
                stores["cache+redis"] = redis_store
            else:
                print(f"Redis not reachable at {args.redis_url}; skipping the Redis rows")
                redis_store = None
        except ImportError:
            print("redis is not installed; skipping the Redis rows")
        cached: dict[str, CachedMemoryProvider] = {}
        for name, store in stores.items():
            sinks[name] = Counting()
            cached[name] = CachedMemoryProvider(direct, store, events=EventBus([sinks[name]]),
                                                clock=clock, close_store=False,
                                                quarantine_retry_s=None)
        try:
            measured = await latency(direct, cached, redis_store, clock, args.samples, rng)
            ops = workload_ops(args.workload_ops, ids)

            def runner(target: Any) -> Callable[[str, Any], Awaitable[Any]]:
                async def run(kind: str, argument: Any) -> Any:
                    if kind == "search":
                        scope, query = argument
                        return await target.search(SearchRequest(scopes=(scope,), query=query,
                                                                 limit=10), ctx(clock))
                    scope, record_id, text = argument
                    return await target.update(UpdateRequest(scope=scope, record_id=record_id,
                                                             content=text),
                                               ctx(clock))
                return run

            mix: dict[str, Any] = {"direct": await workload(runner(direct), ops)}
            for name, provider in cached.items():
                before = Counter(sinks[name].counts)
                mix[name] = await workload(runner(provider), ops)
                counts = sinks[name].counts - before
                searches = sum(1 for kind, _ in ops if kind == "search")
                mix[name]["hit_rate"] = round(counts["hit"] / searches, 4)
                mix[name]["hit_rate_warm"] = round(counts["hit"] / (searches - cold(ops)), 4)
                mix[name]["outcomes"] = dict(sorted(counts.items()))
        finally:
            await direct.close()
            if redis_store is not None:
                keys = [key async for key in redis_store.client.scan_iter(match=prefix + "*")]
                if keys:
                    await redis_store.client.delete(*keys)
                await redis_store.close()
    write_results(args, measured, mix, ops)


def write_results(args: argparse.Namespace, measured: dict[str, Any], mix: dict[str, Any],
                  ops: list[tuple[str, Any]]) -> None:
    meta = {"python": sys.version.split()[0], "machine": platform.machine(),
            "samples": args.samples, "seed_records": args.seed_records,
            "workload_ops": args.workload_ops,
            "workload_writes": sum(1 for kind, _ in ops if kind == "update"),
            "workload_distinct_searches": cold(ops),
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "cache.json").write_text(json.dumps(
        {"meta": meta, "latency": measured, "workload": mix}, indent=2) + "\n")
    rows = measured["rows"]
    direct = rows["direct"]["median_us"]
    lines = [
        "# Search cache: hits and misses against the native SQLite provider called directly",
        "",
        f"{args.samples} samples per row, interleaved; {args.seed_records} records over "
        f"{len(SCOPES)} user scopes (12 words each, Zipf-distributed vocabulary of "
        f"{len(WORDS)} words; 2-word queries, top 10); Python {meta['python']}, "
        f"{meta['when']}. A miss includes the lookup, the provider search and the guarded "
        "fill; a hit includes the lookup, decoding and checking the stored result, and the "
        "cache events (one counting sink). `redis GET (raw)` fetches the same entry with a "
        "plain `GET` and decodes nothing"
        + (f" (median payload {measured['payload_bytes_median']:.0f} bytes)."
           if measured.get("payload_bytes_median") else "."),
        "",
        "| call | median µs | p95 µs | vs direct |",
        "|---|---:|---:|---:|",
    ]
    for name, row in rows.items():
        lines.append(f"| {name} | {row['median_us']} | {row['p95_us']} | "
                     f"{row['median_us'] / direct:.3f} |")
    lines += [
        "",
        f"## 95 % read / 5 % write workload ({args.workload_ops} operations, "
        f"{meta['workload_writes']} updates)",
        "",
        "Searches drawn Zipf-like (s = 0.9) from 400 (scope, query) pairs; each update "
        "rewrites a random record and invalidates its scope. The same sequence is replayed "
        f"on each target. {meta['workload_distinct_searches']} searches are asked for the "
        "first time (no cache can answer them); *warm hit rate* leaves them out.",
        "",
        "| target | hit rate | warm hit rate | mean µs per operation | median µs | total s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, row in mix.items():
        rate = f"{row['hit_rate']:.1%}" if "hit_rate" in row else "—"
        warm = f"{row['hit_rate_warm']:.1%}" if "hit_rate_warm" in row else "—"
        lines.append(f"| {name} | {rate} | {warm} | {row['mean_us']} | {row['median_us']} | "
                     f"{row['total_s']} |")
    lines += ["", "Reproduce: `python bench/cache.py`"]
    (RESULTS / "cache.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    asyncio.run(main())
