"""How the native store behaves as it grows and under concurrency: the scaling half of
issue 13's targets, measured through ``GovernedMemoryManager`` on stores seeded in bulk.

Full run (the figures in ``bench/results/scale.md``; roughly 20-30 min on 2 cores, on a quiet
machine; needs PostgreSQL for the ``postgres`` rows and ``pg-writers``)::

    .venv/bin/python bench/scale.py
    .venv/bin/python bench/scale.py --sections lexical --backends sqlite --million  # adds 1M

Quick proof that every section runs (about a minute)::

    .venv/bin/python bench/scale.py --quick --out /tmp/scale

Sections (``--sections``; each merges into the results file under its own key, so a
section can be re-run alone):

- ``lexical``: lexical search p50/p95 over one scope holding all N memories, N = 10k and
  100k (1M with ``--million``); the ratio of the largest to the smallest size is the
  "100k ÷ 10k" target.
- ``crowd``: one user's scope of 1,000 memories searched alone, then again after 100,000
  memories of 100 other users (same tenant, same file) were added; crowded ÷ alone.
- ``hybrid``: hybrid search (BM25 + vectors from the ``hashing`` embedder, 384-d, fused)
  p50/p95 at 10k and 100k in one scope, with a 1 ms ticker task on the event loop: ``lag``
  is how late it woke (max and p99) while the searches ran, i.e. how long the loop was
  blocked.
- ``readers``: one manager on one store of 10k memories; the same number of gets (then
  searches) issued by 1 task, then spread over 8 concurrent tasks; throughput 8 ÷ 1.
- ``pg-writers``: PostgreSQL, one manager; governed adds by 1 writer on one tenant, then
  by 8 concurrent writers each on its own tenant; throughput 8 ÷ 1.

Seeding goes through ``bench/seeding.py`` (port-level bulk insert, records built as a
governed add builds them) with the provider closed afterwards, so the manager opens the
store as an application would (indexes rebuilt or loaded on open). Seeding is not timed
into any figure. The 1-minute load average is recorded around each measured phase:
figures taken under different loads do not compare. Queries are 2 words drawn from the
300 most common words of a Zipf vocabulary (the expensive case for an inverted index).

PostgreSQL comes from ``GOVERNED_MEMORY_POSTGRES_DSN`` (default
``postgresql://postgres@127.0.0.1:5432/test``), a fresh schema per store, dropped after.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import sqlite3
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from corpus import Corpus
from governed_memory import (
    GovernedMemoryManager,
    Permission,
    Principal,
    PrincipalKind,
    Scope,
    SystemClock,
)
from governed_memory_native import build_native_provider
from seeding import seed_texts, storage

RESULTS = Path(__file__).resolve().parent / "results"
SYLLABLES = tuple("kalominuperasitovuwexayozabecodifugahijulamenopuqiresutivowu"[i:i + 2]
                  for i in range(0, 60, 2))
CORPUS = Corpus(SYLLABLES, seed=11, query_pool=300)
TENANT = "bench"
PERMISSIONS = frozenset({Permission.READ, Permission.WRITE, Permission.DELETE})
PRINCIPAL = Principal("svc:bench", PrincipalKind.SERVICE, TENANT, permissions=PERMISSIONS)
SCOPE = Scope(TENANT, project_id="p", user_id="u1")
EMBED_DIMENSION = 384
SEED_CHUNK = 20_000
SECTIONS = ("lexical", "crowd", "hybrid", "readers", "pg-writers")
WARMUP = 5


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def ms(values: list[float], q: float) -> float:
    return round(percentile(values, q) * 1000, 3)


def embedder() -> Any:
    from governed_memory_embedders.config import HashingConfig
    from governed_memory_embedders.hashing import HashingEmbedder

    return HashingEmbedder(HashingConfig(dimension=EMBED_DIMENSION))


def hybrid_profile(config: dict[str, Any], modes: tuple[str, ...] = ("lexical", "vector")
                   ) -> Any:
    """Lexical + vector retrieval with the hashing embedder (384-d, MiniLM's size),
    embedding on write: what an application configures for hybrid search (``modes``
    ``("vector",)`` alone for the recall check)."""
    from governed_memory.profiles import parse_profile

    return parse_profile({
        "id": f"scale-bench-{'-'.join(modes)}", "version": "1.0.0",
        "provider": {"name": "native", "config": config},
        "stores": {"embedder": {"kind": "hashing", "config": {"dimension": EMBED_DIMENSION}}},
        "indexing": {"mode": "sync"},
        "retrieval": {"modes": list(modes), "top_k": 10},
    })


def manager_for(config: dict[str, Any], mode: str = "lexical") -> GovernedMemoryManager:
    if mode == "hybrid":
        return GovernedMemoryManager.from_profile(hybrid_profile(config))
    if mode == "vector":
        return GovernedMemoryManager.from_profile(hybrid_profile(config, ("vector",)))
    return GovernedMemoryManager.from_plugins("native", config)


async def seed(config: dict[str, Any], plan: list[tuple[Scope, int]], rng: random.Random,
               *, vectors: bool = False) -> tuple[float, list[str], list[str]]:
    """Bulk-write ``count`` memories into each scope of ``plan`` through a provider that is
    closed afterwards; returns (seconds, ids and texts of the first scope)."""
    provider = build_native_provider(config, SystemClock())
    await provider.start()
    chosen = embedder() if vectors else None
    first: list[str] = []
    first_texts: list[str] = []
    began = time.perf_counter()
    try:
        for index, (scope, count) in enumerate(plan):
            done = 0
            while done < count:
                step = min(SEED_CHUNK, count - done)
                texts = [CORPUS.sentence(rng) for _ in range(step)]
                ids = await seed_texts(provider.backend, scope, texts, embedder=chosen)
                if index == 0:
                    first.extend(ids)
                    first_texts.extend(texts)
                done += step
            if count >= 50_000:
                print(f"    seeded {count:,} in {time.perf_counter() - began:.0f}s",
                      file=sys.stderr, flush=True)
    finally:
        await provider.close()
    return time.perf_counter() - began, first, first_texts


async def timed_searches(manager: GovernedMemoryManager, scope: Scope, count: int,
                         rng: random.Random) -> tuple[list[float], list[int]]:
    for _ in range(WARMUP):
        await manager.search(PRINCIPAL, scope, CORPUS.query_text(rng), limit=10)
    seconds: list[float] = []
    hits: list[int] = []
    for _ in range(count):
        query = CORPUS.query_text(rng)
        start = time.perf_counter()
        result = await manager.search(PRINCIPAL, scope, query, limit=10)
        seconds.append(time.perf_counter() - start)
        hits.append(len(result.hits))
    return seconds, hits


async def with_ticker(work: Awaitable[Any]) -> tuple[Any, list[float]]:
    """Run ``work`` with a task that sleeps 1 ms in a loop and records how late it wakes:
    the event-loop lag that ``work`` causes."""
    lags: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        while not stop.is_set():
            began = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append(max(0.0, time.perf_counter() - began - 0.001))

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.005)
    try:
        result = await work
    finally:
        stop.set()
        await task
    return result, lags


async def search_row(config: dict[str, Any], scope: Scope, searches: int,
                     rng: random.Random, mode: str = "lexical") -> dict[str, Any]:
    manager = manager_for(config, mode)
    await manager.start()
    load_before = load_average()
    try:
        (seconds, hits), lags = await with_ticker(timed_searches(manager, scope, searches, rng))
    finally:
        await manager.close()
    return {"searches": searches, "p50_ms": ms(seconds, 0.5), "p95_ms": ms(seconds, 0.95),
            "mean_hits": round(statistics.fmean(hits), 2),
            "lag_max_ms": round(max(lags, default=0.0) * 1000, 2),
            "lag_p99_ms": ms(lags, 0.99) if lags else 0.0,
            "load": [load_before, load_average()]}


async def section_lexical(args: argparse.Namespace) -> dict[str, Any]:
    rows = []
    for backend in args.backends:
        for size in args.sizes:
            rng = random.Random(size)
            with storage(backend) as config:
                print(f"  lexical {backend} {size:,}: seeding", file=sys.stderr, flush=True)
                seconds, _, _ = await seed(config, [(SCOPE, size)], rng)
                row = await search_row(config, SCOPE, args.searches, rng)
            rows.append({"backend": backend, "size": size, "seed_s": round(seconds, 1), **row})
    ratios = {}
    for backend in args.backends:
        mine = [row for row in rows if row["backend"] == backend]
        small, large = mine[0], mine[-1]
        ratios[backend] = {"of": f"{large['size']:,} ÷ {small['size']:,}",
                           "p50": round(large["p50_ms"] / small["p50_ms"], 2)}
    return {"rows": rows, "ratios": ratios}


async def section_crowd(args: argparse.Namespace) -> dict[str, Any]:
    rows = []
    users = max(1, args.crowd // args.scope_size)
    for backend in args.backends:
        rng = random.Random(7)
        with storage(backend) as config:
            print(f"  crowd {backend}: seeding {args.scope_size:,} alone", file=sys.stderr,
                  flush=True)
            await seed(config, [(SCOPE, args.scope_size)], rng)
            alone = await search_row(config, SCOPE, args.searches, random.Random(1))
            print(f"  crowd {backend}: seeding {args.crowd:,} of {users} other users",
                  file=sys.stderr, flush=True)
            others = [(Scope(TENANT, project_id="p", user_id=f"other{i}"), args.crowd // users)
                      for i in range(users)]
            await seed(config, others, rng)
            crowded = await search_row(config, SCOPE, args.searches, random.Random(1))
        rows.append({"backend": backend, "scope_size": args.scope_size, "others": args.crowd,
                     "other_users": users, "alone": alone, "crowded": crowded,
                     "ratio_p50": round(crowded["p50_ms"] / alone["p50_ms"], 2)})
    return {"rows": rows}


async def section_hybrid(args: argparse.Namespace) -> dict[str, Any]:
    rows = []
    for backend in args.backends:
        for size in args.hybrid_sizes:
            rng = random.Random(size + 1)
            with storage(backend) as config:
                print(f"  hybrid {backend} {size:,}: seeding", file=sys.stderr, flush=True)
                seconds, ids, texts = await seed(config, [(SCOPE, size)], rng, vectors=True)
                row = await search_row(config, SCOPE, args.hybrid_searches, rng, "hybrid")
                row["vector_recall_at_10"] = await vector_recall(
                    config, ids, texts, args.recall_queries, rng)
            rows.append({"backend": backend, "size": size, "seed_s": round(seconds, 1), **row})
    return {"rows": rows, "dimension": EMBED_DIMENSION}


async def vector_recall(config: dict[str, Any], ids: list[str], texts: list[str],
                        queries: int, rng: random.Random) -> float:
    """Recall@10 of the store's vector search (vector mode alone) against exact cosine
    over every seeded vector, computed here with numpy. A hit counts when its exact score
    is at least the exact 10th best (ties at the boundary are not misses)."""
    import numpy as np

    chosen = embedder()
    matrix = np.asarray(chosen.embed_sync(texts), dtype=np.float32)
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
    row_of = {record_id: row for row, record_id in enumerate(ids)}
    manager = manager_for(config, "vector")
    await manager.start()
    found = 0
    try:
        for _ in range(queries):
            query = CORPUS.query_text(rng)
            hits = (await manager.search(PRINCIPAL, SCOPE, query, limit=10)).hits
            vector = np.asarray(chosen.embed_sync([query])[0], dtype=np.float32)
            scores = matrix @ (vector / max(float(np.linalg.norm(vector)), 1e-12))
            tenth = float(np.partition(-scores, 9)[9]) * -1 if len(scores) >= 10 else -1.0
            found += sum(1 for hit in hits
                         if scores[row_of[hit.record.id]] >= tenth - 1e-5)
    finally:
        await manager.close()
    return round(found / (10 * queries), 3)


async def throughput(calls: Callable[[int], Awaitable[Any]], total: int,
                     workers: int) -> float:
    """Calls per second for ``total`` calls spread over ``workers`` concurrent tasks;
    ``calls(i)`` makes the i-th call."""
    share = [total // workers + (1 if w < total % workers else 0) for w in range(workers)]
    starts = [sum(share[:w]) for w in range(workers)]

    async def run(worker: int) -> None:
        for i in range(starts[worker], starts[worker] + share[worker]):
            await calls(i)

    began = time.perf_counter()
    await asyncio.gather(*(run(w) for w in range(workers)))
    return total / (time.perf_counter() - began)


async def reader_row(manager: GovernedMemoryManager, targets: list[str],
                     queries: list[str]) -> dict[str, Any]:
    """Gets, then searches: the same calls by 1 task, then spread over 8 tasks."""
    async def get(i: int) -> Any:
        return await manager.get(PRINCIPAL, SCOPE, targets[i])

    async def search(i: int) -> Any:
        return await manager.search(PRINCIPAL, SCOPE, queries[i], limit=10)

    await throughput(get, min(50, len(targets)), 1)  # warm up
    await throughput(search, min(10, len(queries)), 1)
    row: dict[str, Any] = {"load": [load_average()]}
    for name, call in (("get", get), ("search", search)):
        one = await throughput(call, len(targets), 1)
        eight = await throughput(call, len(targets), 8)
        row[name] = {"one_per_s": round(one, 1), "eight_per_s": round(eight, 1),
                     "ratio": round(eight / one, 2)}
    row["load"].append(load_average())
    return row


async def section_readers(args: argparse.Namespace) -> dict[str, Any]:
    rows = []
    for backend in args.backends:
        rng = random.Random(3)
        with storage(backend) as config:
            print(f"  readers {backend}: seeding {args.reader_records:,}", file=sys.stderr,
                  flush=True)
            _, ids, _ = await seed(config, [(SCOPE, args.reader_records)], rng)
            targets = [rng.choice(ids) for _ in range(args.reader_ops)]
            queries = [CORPUS.query_text(rng) for _ in range(args.reader_ops)]
            manager = manager_for(config)
            await manager.start()
            try:
                row = await reader_row(manager, targets, queries)
            finally:
                await manager.close()
        rows.append({"backend": backend, "records": args.reader_records,
                     "ops": args.reader_ops, **row})
    return {"rows": rows}


async def section_pg_writers(args: argparse.Namespace) -> dict[str, Any]:
    with storage("postgres") as config:
        config = {**config, "pool_max_size": 10}
        manager = manager_for(config)
        await manager.start()
        rng = random.Random(5)
        principals = [Principal(f"svc:bench{t}", PrincipalKind.SERVICE, f"tenant{t}",
                                permissions=PERMISSIONS) for t in range(8)]
        scopes = [Scope(f"tenant{t}", project_id="p", user_id="u") for t in range(8)]
        texts = [CORPUS.sentence(rng) for _ in range(args.writer_ops)]
        load_before = load_average()
        try:
            for t in range(8):  # warm the pool and each tenant
                await manager.add(principals[t], scopes[t], CORPUS.sentence(rng))

            async def one_tenant(i: int) -> Any:
                return await manager.add(principals[0], scopes[0], texts[i])

            per = max(1, args.writer_ops // 8)

            async def own_tenant(i: int) -> Any:
                tenant = min(7, i // per)
                return await manager.add(principals[tenant], scopes[tenant], texts[i])

            one = await throughput(one_tenant, args.writer_ops, 1)
            eight = await throughput(own_tenant, per * 8, 8)
        finally:
            await manager.close()
    return {"rows": [{"backend": "postgres", "adds": args.writer_ops,
                      "one_per_s": round(one, 1), "eight_per_s": round(eight, 1),
                      "ratio": round(eight / one, 2),
                      "load": [load_before, load_average()]}]}


RUNNERS: dict[str, Callable[[argparse.Namespace], Awaitable[dict[str, Any]]]] = {
    "lexical": section_lexical, "crowd": section_crowd, "hybrid": section_hybrid,
    "readers": section_readers, "pg-writers": section_pg_writers,
}


def markdown(data: dict[str, Any]) -> str:
    meta, sections = data["meta"], data["sections"]
    lines = [
        "# Native store at scale and under concurrency",
        "",
        "Through `GovernedMemoryManager` on stores seeded in bulk (`bench/seeding.py`); "
        "2-word queries, top 10; p50/p95 in ms. `load` is the 1-minute load average before "
        "and after each measured phase (the machine is shared: compare ratios taken in one "
        f"run). Machine: {meta.get('machine')}, Python {meta.get('python')}, SQLite "
        f"{meta.get('sqlite')}. See `bench/scale.py` for what each section does.",
    ]
    if "lexical" in sections:
        sec = sections["lexical"]
        lines += ["", f"## Lexical search, one scope ({sec['when']})", "",
                  "| backend | memories | p50 ms | p95 ms | mean hits | seed s | load |",
                  "|---|---:|---:|---:|---:|---:|---|"]
        lines += [f"| {r['backend']} | {r['size']:,} | {r['p50_ms']} | {r['p95_ms']} | "
                  f"{r['mean_hits']} | {r['seed_s']} | {r['load']} |" for r in sec["rows"]]
        lines += ["", "| backend | sizes | p50 ratio (target ≤ 5 for 100k ÷ 10k) |",
                  "|---|---|---:|"]
        lines += [f"| {b} | {r['of']} | {r['p50']} |" for b, r in sec["ratios"].items()]
    if "crowd" in sections:
        sec = sections["crowd"]
        lines += ["", f"## A small scope among other users' memories ({sec['when']})", "",
                  "| backend | scope | others (users) | alone p50 ms | crowded p50 ms | "
                  "crowded ÷ alone (target ≤ 1.5) | load |", "|---|---:|---:|---:|---:|---:|---|"]
        lines += [f"| {r['backend']} | {r['scope_size']:,} | {r['others']:,} "
                  f"({r['other_users']}) | {r['alone']['p50_ms']} | {r['crowded']['p50_ms']} | "
                  f"{r['ratio_p50']} | {r['alone']['load']} {r['crowded']['load']} |"
                  for r in sec["rows"]]
    if "hybrid" in sections:
        sec = sections["hybrid"]
        lines += ["", f"## Hybrid search and event-loop lag ({sec['when']})", "",
                  f"Hashing embedder, {sec['dimension']}-d, vectors stored at seeding. Lag: how "
                  "late a 1 ms ticker woke while the searches ran (target ≤ 5 ms); hybrid p50 "
                  "targets ≤ 10 ms at 10k, ≤ 40 ms at 100k. Vector recall@10: the store's "
                  "vector-only search against exact cosine over all seeded vectors (target "
                  "≥ 0.95).", "",
                  "| backend | memories | p50 ms | p95 ms | lag max ms | lag p99 ms | "
                  "mean hits | vector recall@10 | seed s | load |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        lines += [f"| {r['backend']} | {r['size']:,} | {r['p50_ms']} | {r['p95_ms']} | "
                  f"{r['lag_max_ms']} | {r['lag_p99_ms']} | {r['mean_hits']} | "
                  f"{r.get('vector_recall_at_10', 'n/a')} | {r['seed_s']} | "
                  f"{r['load']} |" for r in sec["rows"]]
    if "readers" in sections:
        sec = sections["readers"]
        lines += ["", f"## 8 concurrent readers on one manager ÷ 1 reader ({sec['when']})", "",
                  "| backend | memories | calls | get 1 /s | get 8 /s | get ratio | "
                  "search 1 /s | search 8 /s | search ratio | load |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        lines += [f"| {r['backend']} | {r['records']:,} | {r['ops']} | "
                  f"{r['get']['one_per_s']} | {r['get']['eight_per_s']} | {r['get']['ratio']} | "
                  f"{r['search']['one_per_s']} | {r['search']['eight_per_s']} | "
                  f"{r['search']['ratio']} | {r['load']} |" for r in sec["rows"]]
        lines += ["", "Target: ≥ 1.7 for both ratios."]
    if "pg-writers" in sections:
        sec = sections["pg-writers"]
        lines += ["", f"## PostgreSQL: 8 writers on 8 tenants ÷ 1 writer ({sec['when']})", "",
                  "| adds | 1 writer /s | 8 writers /s | ratio (target ≥ 4) | load |",
                  "|---:|---:|---:|---:|---|"]
        lines += [f"| {r['adds']} | {r['one_per_s']} | {r['eight_per_s']} | {r['ratio']} | "
                  f"{r['load']} |" for r in sec["rows"]]
    lines += ["", "Commands that produced these sections:", ""]
    lines += [f"- {name}: `{sec['command']}`" for name, sec in sections.items()]
    return "\n".join(lines) + "\n"


def read_results(out: Path) -> dict[str, Any]:
    """The results file so far: sections not re-run keep their figures."""
    path = Path(f"{out}.json")
    data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    if "sections" not in data:  # a file from the earlier layout of this bench: start over
        data = {"sections": {}}
    return data


def write_results(out: Path, data: dict[str, Any]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{out}.json").write_text(json.dumps(data, indent=2) + "\n")
    Path(f"{out}.md").write_text(markdown(data))


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument("--backends", nargs="+", choices=["sqlite", "postgres"],
                        default=["sqlite", "postgres"],
                        help="for lexical, crowd, hybrid and readers")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--million", action="store_true", help="add 1,000,000 to --sizes")
    parser.add_argument("--searches", type=int, default=100)
    parser.add_argument("--scope-size", type=int, default=1000)
    parser.add_argument("--crowd", type=int, default=100_000)
    parser.add_argument("--hybrid-sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--hybrid-searches", type=int, default=50)
    parser.add_argument("--recall-queries", type=int, default=50,
                        help="vector-only searches checked against exact cosine")
    parser.add_argument("--reader-records", type=int, default=10_000)
    parser.add_argument("--reader-ops", type=int, default=800)
    parser.add_argument("--writer-ops", type=int, default=400)
    parser.add_argument("--quick", action="store_true",
                        help="small sizes everywhere: proves each section runs")
    parser.add_argument("--out", type=Path, default=RESULTS / "scale",
                        help="path stem: merges into <out>.json, rewrites <out>.md")
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.searches, args.crowd = [1000, 10_000], 20, 10_000
        args.hybrid_sizes, args.hybrid_searches, args.recall_queries = [2000], 10, 10
        args.reader_records, args.reader_ops, args.writer_ops = 2000, 200, 160
    if args.million and 1_000_000 not in args.sizes:
        args.sizes.append(1_000_000)
    args.sizes.sort()
    data = read_results(args.out)
    command = "python bench/scale.py " + " ".join(sys.argv[1:])
    for name in args.sections:
        print(f"{name}:", file=sys.stderr, flush=True)
        section = await RUNNERS[name](args)
        section.update(when=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       command=command, quick=args.quick)
        data["sections"][name] = section
        data["meta"] = {"python": sys.version.split()[0], "sqlite": sqlite3.sqlite_version,
                        "machine": f"{platform.machine()}, {os.cpu_count()} cores"}
        write_results(args.out, data)
    print(markdown(data))


if __name__ == "__main__":
    asyncio.run(main())
