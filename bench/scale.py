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
- ``questions``: natural-language questions (issue 29): a held-out conversation set
  (``recall_data.generate`` with a seed no tuning used), 10,000 turns stored as one
  user's memories on SQLite and on PostgreSQL, its questions of 6 to 14 words searched
  (lexical, top 10); then gets, updates and adds. Both stores are open at once and every
  call alternates between them (SQLite first on even calls, PostgreSQL first on odd
  ones), so both see the same machine; PostgreSQL ÷ SQLite of each p50, and the
  round trips (PostgreSQL) and hops (SQLite) per call from the backends' counters.
- ``readers``: one manager on one store of 10k memories; the same number of gets (then
  searches) issued by 1 task, then spread over 8 concurrent tasks, alternately for
  ``--reader-rounds`` rounds; throughput 8 ÷ 1 per round, the median reported. Two
  workloads: the Zipf corpus with 2-word queries, and the held-out conversations with
  their questions. The ranking workers' counters say how many searches they ranked.
- ``pg-writers``: PostgreSQL, one manager; governed adds by 1 writer on one tenant, then
  by 8 concurrent writers each on its own tenant; throughput 8 ÷ 1.
- ``vector-threshold`` (not in the default run): vector-only search p50 on SQLite at
  small scope sizes, exact in storage (``vector_index_min_vectors`` above the size)
  against the in-process index (``0``): where the index starts to pay, i.e. the
  default threshold.
- ``ann-libraries`` (not in the default run): usearch, hnswlib and faiss HNSW graphs and
  faiss's fp16 scan over the hybrid section's vectors (the corpus through the 384-d
  hashing embedder), outside the store: build time, memory, query p50/p95 on one core,
  recall@10 against exact cosine after exact rescoring of each index's top 200, and
  how much a pure-Python thread gets done meanwhile (≈ 1: the search releases the
  GIL). A library that is not installed is reported as such.

Rows of ``hybrid`` (and of the two sections above) merge by backend and size, so one
backend or one size can be re-run alone.

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
from governed_memory import GovernedMemoryManager, Permission, Principal, PrincipalKind, Scope
from governed_memory.clock import SystemClock
from governed_memory_native import build_native_provider
from seeding import seed_texts, settle, storage

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
SECTIONS = ("lexical", "crowd", "hybrid", "questions", "readers", "pg-writers")
HELD_OUT_SEED = 20261203
"""``recall_data``'s seed for the questions: not the one (``20261130``) the lexical
search's constants were measured on."""
EXTRA_SECTIONS = ("vector-threshold", "ann-libraries")
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
    settle(config)
    return time.perf_counter() - began, first, first_texts


async def warm_up(manager: GovernedMemoryManager, scope: Scope, rng: random.Random) -> None:
    for _ in range(WARMUP):
        await manager.search(PRINCIPAL, scope, CORPUS.query_text(rng), limit=10)


async def timed_searches(manager: GovernedMemoryManager, scope: Scope, count: int,
                         rng: random.Random) -> tuple[list[float], list[int]]:
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
        # The first searches open the store's indexes (a vector index is built from
        # storage): their lag is reported apart from the steady state's.
        _, warm_lags = await with_ticker(warm_up(manager, scope, rng))
        (seconds, hits), lags = await with_ticker(timed_searches(manager, scope, searches, rng))
        index = vector_index_status(manager)
        ranked = ranking_status(manager)
    finally:
        await manager.close()
    row = {"searches": searches, "p50_ms": ms(seconds, 0.5), "p95_ms": ms(seconds, 0.95),
           "mean_hits": round(statistics.fmean(hits), 2),
           "lag_max_ms": round(max(lags, default=0.0) * 1000, 2),
           "lag_p99_ms": ms(lags, 0.99) if lags else 0.0,
           "warmup_lag_max_ms": round(max(warm_lags, default=0.0) * 1000, 2),
           "load": [load_before, load_average()]}
    if index is not None:
        row["vector_index"] = index
    if ranked is not None:
        row["ranking"] = ranked
    return row


def vector_index_status(manager: GovernedMemoryManager) -> dict[str, Any] | None:
    """The native provider's vector-index counters (builds, catch-ups, fallbacks, rows
    verified), when the provider has them."""
    provider = getattr(manager, "provider", None)
    indexes = getattr(provider, "vector_indexes", None)
    if indexes is None:
        return None
    import attrs

    return {"engine": indexes.describe(), **attrs.asdict(indexes.stats)}


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
    """Hybrid p50 and lag at each size, then vector-only recall@10; the first search of
    each run builds the scope's vector index (inside the warm-up searches)."""
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


async def section_vector_threshold(args: argparse.Namespace) -> dict[str, Any]:
    """Vector-only search at small sizes: exact in storage against the index."""
    rows = []
    for size in args.threshold_sizes:
        rng = random.Random(size + 3)
        with storage("sqlite") as config:
            print(f"  vector-threshold sqlite {size:,}: seeding", file=sys.stderr, flush=True)
            await seed(config, [(SCOPE, size)], rng, vectors=True)
            row: dict[str, Any] = {"backend": "sqlite", "size": size}
            for label, minimum in (("exact", 10**9), ("index", 0)):
                row[label] = await search_row({**config, "vector_index_min_vectors": minimum},
                                              SCOPE, args.threshold_searches,
                                              random.Random(size), "vector")
            row["index_over_exact_p50"] = round(row["index"]["p50_ms"]
                                                / row["exact"]["p50_ms"], 2)
        rows.append(row)
    return {"rows": rows, "dimension": EMBED_DIMENSION}


def ann_vectors(size: int, queries: int) -> tuple[Any, Any]:
    """The hybrid section's data as float32 matrices: ``size`` corpus sentences and
    ``queries`` 2-word queries through the 384-d hashing embedder (unit length)."""
    import numpy as np

    rng = random.Random(size + 1)
    chosen = embedder()
    texts = [CORPUS.sentence(rng) for _ in range(size)]
    base = np.asarray(chosen.embed_sync(texts), dtype=np.float32)
    asked = np.asarray(chosen.embed_sync([CORPUS.query_text(rng) for _ in range(queries)]),
                       dtype=np.float32)
    return base, asked


def ann_libraries() -> dict[str, tuple[Callable[[Any, Any], Any],
                                       Callable[[Any, Any, int, int], Any]]]:
    """(build, search) per index, for the libraries that are installed. Graphs use the
    same parameters everywhere: 16 links per node, 128 candidates while building."""
    import numpy as np

    found: dict[str, Any] = {}
    try:
        import faiss

        faiss.omp_set_num_threads(1)

        def faiss_fp16(base: Any, _: Any) -> Any:
            index = faiss.IndexScalarQuantizer(base.shape[1], faiss.ScalarQuantizer.QT_fp16,
                                               faiss.METRIC_INNER_PRODUCT)
            index.add(base)
            return index

        def faiss_hnsw(base: Any, _: Any) -> Any:
            index = faiss.IndexHNSWFlat(base.shape[1], 16, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = 128
            index.add(base)
            return index

        def faiss_search(index: Any, query: Any, k: int, ef: int) -> Any:
            params = (faiss.SearchParametersHNSW(efSearch=ef)
                      if isinstance(index, faiss.IndexHNSW) else None)
            return index.search(query[None, :], k, params=params)[1][0]

        found["faiss-fp16-scan"] = (faiss_fp16, faiss_search)
        found["faiss-hnsw"] = (faiss_hnsw, faiss_search)
    except ImportError:
        pass
    try:
        import hnswlib

        def hnsw_build(base: Any, _: Any) -> Any:
            index = hnswlib.Index(space="ip", dim=base.shape[1])
            index.init_index(max_elements=len(base), M=16, ef_construction=128,
                             allow_replace_deleted=True)
            index.set_num_threads(1)
            index.add_items(base, np.arange(len(base)))
            return index

        def hnsw_search(index: Any, query: Any, k: int, ef: int) -> Any:
            index.set_ef(max(ef, k))
            return index.knn_query(query, k=k, num_threads=1)[0][0]

        found["hnswlib"] = (hnsw_build, hnsw_search)
    except ImportError:
        pass
    try:
        from usearch.index import Index as UsearchIndex

        def usearch_build(base: Any, _: Any) -> Any:
            index = UsearchIndex(ndim=base.shape[1], metric="ip", dtype="f32",
                                 connectivity=16, expansion_add=128)
            index.add(np.arange(len(base), dtype=np.uint64), base, threads=1)
            return index

        def usearch_search(index: Any, query: Any, k: int, ef: int) -> Any:
            index.expansion_search = ef
            return index.search(query, k, threads=1).keys.astype(np.int64)

        found["usearch"] = (usearch_build, usearch_search)
    except ImportError:
        pass
    return found


def rss_mb() -> float:
    with open("/proc/self/statm") as stat:
        return int(stat.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def python_share(work: Callable[[], Any]) -> float:
    """How much a pure-Python counting thread gets done while ``work`` runs, over what it
    gets done alone: about 1 when ``work`` releases the GIL (2 cores), far less if not."""
    import threading

    def rate(during: Callable[[], Any]) -> float:
        """Counts per second of the thread while ``during`` runs (repeated for 0.5 s)."""
        stop, counts = threading.Event(), []

        def count() -> None:
            n = 0
            while not stop.is_set():
                n += 1
            counts.append(n)

        thread = threading.Thread(target=count)
        thread.start()
        began = time.perf_counter()
        while time.perf_counter() - began < 0.5:
            during()
        elapsed = time.perf_counter() - began
        stop.set()
        thread.join()
        return counts[0] / elapsed

    return round(rate(work) / rate(lambda: time.sleep(0.05)), 2)


async def section_ann_libraries(args: argparse.Namespace) -> dict[str, Any]:
    import gc

    import numpy as np

    rows: list[dict[str, Any]] = []
    libraries = ann_libraries()
    for size in args.ann_sizes:
        print(f"  ann-libraries {size:,}: embedding", file=sys.stderr, flush=True)
        base, queries = ann_vectors(size, args.ann_queries)
        exact = base.astype(np.float64) @ queries.astype(np.float64).T
        for name, (build, search) in libraries.items():
            print(f"  ann-libraries {size:,}: {name}", file=sys.stderr, flush=True)
            gc.collect()
            before, load_before = rss_mb(), load_average()
            began = time.perf_counter()
            index = build(base, queries)
            built = time.perf_counter() - began
            memory = rss_mb() - before
            for ef in (args.ann_ef if "hnsw" in name or name == "usearch" else [0]):
                times, hit = [], 0
                for column, query in enumerate(queries):
                    start = time.perf_counter()
                    labels = np.asarray(search(index, query, 200, max(ef, 200)),
                                        dtype=np.int64)
                    times.append(time.perf_counter() - start)
                    scores = exact[:, column]
                    labels = labels[labels >= 0]
                    top = labels[np.argsort(-scores[labels], kind="stable")][:10]
                    tenth = -np.partition(-scores, 9)[9]
                    hit += int(np.sum(scores[top] >= tenth - 1e-5))

                def burst(index: Any = index, search: Any = search, ef: int = ef,
                          queries: Any = queries) -> None:
                    for query in queries:
                        search(index, query, 200, max(ef, 200))

                rows.append({"library": name, "size": size, "ef": ef or None,
                             "build_s": round(built, 2), "rss_mb": round(memory, 1),
                             "p50_ms": ms(times, 0.5), "p95_ms": ms(times, 0.95),
                             "recall_at_10": round(hit / (10 * len(queries)), 3),
                             "python_share": python_share(burst),
                             "load": [load_before, load_average()]})
            del index
    missing = sorted({"faiss-fp16-scan", "faiss-hnsw", "hnswlib", "usearch"} - set(libraries))
    return {"rows": rows, "dimension": EMBED_DIMENSION, "missing": missing,
            "shortlist": 200}


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


def ranking_status(manager: GovernedMemoryManager) -> dict[str, Any] | None:
    """The native provider's ranking workers (how many, their counters), if any."""
    pool = getattr(getattr(manager, "_provider", None), "ranking_pool", None)
    if pool is None:
        return None
    return {"processes": pool.processes, **pool.stats.as_dict()}


async def ranking_ready(manager: GovernedMemoryManager) -> None:
    """Let the ranking workers a warm-up woke finish starting: figures are of the
    steady state, not of a process start."""
    pool = getattr(getattr(manager, "_provider", None), "ranking_pool", None)
    if pool is not None:
        await pool.started()


async def reader_row(manager: GovernedMemoryManager, scope: Scope, targets: list[str],
                     queries: list[str], rounds: int) -> dict[str, Any]:
    """Gets, then searches: the same calls by 1 task, then spread over 8 tasks, in
    ``rounds`` alternating rounds; each round's ratio, the median reported."""
    async def get(i: int) -> Any:
        return await manager.get(PRINCIPAL, scope, targets[i])

    async def search(i: int) -> Any:
        return await manager.search(PRINCIPAL, scope, queries[i], limit=10)

    await throughput(get, min(50, len(targets)), 1)  # warm up
    await throughput(search, min(20, len(queries)), 1)
    await ranking_ready(manager)
    row: dict[str, Any] = {"load": [load_average()]}
    for name, call, total in (("get", get, len(targets)), ("search", search, len(queries))):
        ones, eights, ratios = [], [], []
        for _ in range(rounds):
            one = await throughput(call, total, 1)
            eight = await throughput(call, total, 8)
            ones.append(one)
            eights.append(eight)
            ratios.append(eight / one)
        row[name] = {"one_per_s": round(statistics.median(ones), 1),
                     "eight_per_s": round(statistics.median(eights), 1),
                     "ratio": round(statistics.median(ratios), 2),
                     "ratios": [round(r, 2) for r in ratios]}
    row["load"].append(load_average())
    status = ranking_status(manager)
    if status is not None:
        row["ranking"] = status
    return row


def held_out(size: int) -> tuple[list[str], list[str]]:
    """``size`` turns of the held-out conversations (``<speaker>: <text>``), and their
    questions of 6 to 14 words."""
    import recall_data

    turns_each = 600
    data = recall_data.generate(HELD_OUT_SEED, conversations=max(1, -(-size // turns_each)),
                                turns=turns_each)
    texts = [turn.memory_text for c in data.conversations for turn in c.turns][:size]
    questions = [q.text for c in data.conversations for q in c.questions
                 if 6 <= len(q.text.split()) <= 14]
    return texts, questions


async def section_readers(args: argparse.Namespace) -> dict[str, Any]:
    rows = []
    for workload in ("zipf", "questions"):
        for backend in args.backends:
            rng = random.Random(3)
            with storage(backend) as config:
                print(f"  readers {backend} {workload}: seeding {args.reader_records:,}",
                      file=sys.stderr, flush=True)
                if workload == "zipf":
                    _, ids, _ = await seed(config, [(SCOPE, args.reader_records)], rng)
                    queries = [CORPUS.query_text(rng) for _ in range(args.reader_ops)]
                else:
                    texts, questions = held_out(args.reader_records)
                    ids = await seed_memories(config, texts)
                    queries = [questions[i % len(questions)]
                               for i in range(min(args.reader_ops, len(questions)))]
                targets = [rng.choice(ids) for _ in range(args.reader_ops)]
                manager = manager_for(config)
                await manager.start()
                try:
                    row = await reader_row(manager, SCOPE, targets, queries,
                                           args.reader_rounds)
                finally:
                    await manager.close()
            rows.append({"backend": backend, "workload": workload,
                         "records": args.reader_records, "gets": len(targets),
                         "searches": len(queries), "rounds": args.reader_rounds, **row})
    return {"rows": rows}


async def seed_memories(config: dict[str, Any], texts: list[str]) -> list[str]:
    """``texts`` as one user's memories (``SCOPE``), in bulk, then settled; their ids."""
    provider = build_native_provider(config, SystemClock())
    await provider.start()
    try:
        ids: list[str] = []
        for start in range(0, len(texts), SEED_CHUNK):
            ids += await seed_texts(provider.backend, SCOPE, texts[start:start + SEED_CHUNK])
    finally:
        await provider.close()
    settle(config)
    return ids


def timing(seconds: list[float]) -> dict[str, float]:
    return {"p50_ms": ms(seconds, 0.5), "p95_ms": ms(seconds, 0.95)}


def counters(manager: GovernedMemoryManager) -> dict[str, int]:
    backend = manager._provider.backend  # type: ignore[attr-defined]
    stats = getattr(backend, "stats", None)
    return dict(stats.as_dict()) if stats is not None else {}


async def section_questions(args: argparse.Namespace) -> dict[str, Any]:
    """Natural-language questions and point operations, SQLite and PostgreSQL paired."""
    texts, questions = held_out(args.question_records)
    rng = random.Random(29)
    ranking = args.ranking_processes
    with storage("sqlite") as lite, storage("postgres") as pg:
        managers: dict[str, GovernedMemoryManager] = {}
        ids: dict[str, list[str]] = {}
        for name, config in (("sqlite", lite), ("postgres", pg)):
            print(f"  questions {name}: seeding {len(texts):,}", file=sys.stderr, flush=True)
            ids[name] = await seed_memories(config, texts)
            chosen = {} if ranking == "auto" else {"ranking_processes": ranking}
            managers[name] = GovernedMemoryManager.from_plugins("native", {**config, **chosen})
        for manager in managers.values():
            await manager.start()
        load_before = load_average()
        try:
            for question in questions[:WARMUP * 4]:
                for manager in managers.values():
                    await manager.search(PRINCIPAL, SCOPE, question, limit=10)
            for manager in managers.values():
                await ranking_ready(manager)
            ops = min(args.question_ops, len(texts))
            picks = {name: [rng.randrange(len(texts)) for _ in range(ops)] for name in ids}
            new_texts = [texts[rng.randrange(len(texts))] + f" ({n})" for n in range(ops)]
            added: dict[str, list[Any]] = {name: [] for name in managers}

            async def search(name: str, i: int) -> Any:
                return await managers[name].search(PRINCIPAL, SCOPE, questions[i], limit=10)

            async def get(name: str, i: int) -> Any:
                return await managers[name].get(PRINCIPAL, SCOPE, ids[name][picks[name][i]])

            async def add(name: str, i: int) -> Any:
                added[name].append(await managers[name].add(PRINCIPAL, SCOPE, new_texts[i]))

            async def update(name: str, i: int) -> Any:
                record = added[name][i]
                return await managers[name].update(PRINCIPAL, SCOPE, record.id,
                                                   content=new_texts[-1 - i],
                                                   expected_revision=record.revision)

            results: dict[str, Any] = {}
            hits: dict[str, list[int]] = {name: [] for name in managers}
            for op, call, count in (("search", search, len(questions)), ("get", get, ops),
                                    ("add", add, ops), ("update", update, ops)):
                seconds: dict[str, list[float]] = {name: [] for name in managers}
                before = {name: counters(m) for name, m in managers.items()}
                for i in range(count):
                    order = ("sqlite", "postgres") if i % 2 == 0 else ("postgres", "sqlite")
                    for name in order:
                        began = time.perf_counter()
                        found = await call(name, i)
                        seconds[name].append(time.perf_counter() - began)
                        if op == "search":
                            hits[name].append(len(found.hits))
                after = {name: counters(m) for name, m in managers.items()}
                results[op] = {name: {**timing(seconds[name]), "calls": count, "per_call": {
                    key: round((after[name][key] - before[name].get(key, 0)) / count, 2)
                    for key in after[name] if after[name][key] != before[name].get(key, 0)}}
                    for name in managers}
                results[op]["postgres_over_sqlite_p50"] = round(
                    results[op]["postgres"]["p50_ms"] / results[op]["sqlite"]["p50_ms"], 2)
            same = [a == b for a, b in zip(hits["sqlite"], hits["postgres"], strict=True)]
            ranking_rows = {name: ranking_status(m) for name, m in managers.items()}
        finally:
            for manager in managers.values():
                await manager.close()
    words = [len(q.split()) for q in questions]
    return {"rows": [], "records": len(texts), "questions": len(questions),
            "question_words": [min(words), round(statistics.fmean(words), 1), max(words)],
            "seed": HELD_OUT_SEED, "ranking_processes": ranking, "results": results,
            "same_hit_counts": all(same), "ranking": ranking_rows,
            "load": [load_before, load_average()]}


async def section_pg_writers(args: argparse.Namespace) -> dict[str, Any]:
    with storage("postgres") as config:
        # Eight connections open before the timed phases: pool growth is not the writes'.
        config = {**config, "pool_min_size": 8, "pool_max_size": 10}
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
    "questions": section_questions, "readers": section_readers,
    "pg-writers": section_pg_writers,
    "vector-threshold": section_vector_threshold, "ann-libraries": section_ann_libraries,
}
ROW_KEYS: dict[str, tuple[str, ...]] = {
    "hybrid": ("backend", "size"), "vector-threshold": ("backend", "size"),
    "ann-libraries": ("library", "size", "ef"),
}


def merged(name: str, old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """A section's new figures; for sections with ``ROW_KEYS``, rows of the old run that
    this run did not measure (another backend or size) are kept."""
    keys = ROW_KEYS.get(name)
    if keys is None or old is None:
        return new
    fresh = {tuple(row.get(key) for key in keys) for row in new["rows"]}
    kept = [row for row in old.get("rows", [])
            if tuple(row.get(key) for key in keys) not in fresh]
    return {**new, "rows": sorted([*kept, *new["rows"]],
                                  key=lambda row: tuple(str(row.get(key)).zfill(12)
                                                        for key in keys))}


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
                  "late a 1 ms ticker woke while the searches ran (target ≤ 5 ms); the first "
                  "searches (which build the scope's vector index) are timed apart, as "
                  "warm-up lag (rows before issue 29 counted them in); hybrid p50 "
                  "targets ≤ 10 ms at 10k, ≤ 40 ms at 100k. Vector recall@10: the store's "
                  "vector-only search against exact cosine over all seeded vectors (target "
                  "≥ 0.95).", "",
                  "| backend | memories | p50 ms | p95 ms | lag max ms | lag p99 ms | "
                  "warm-up lag max ms | mean hits | vector recall@10 | seed s | load | run |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
        lines += [f"| {r['backend']} | {r['size']:,} | {r['p50_ms']} | {r['p95_ms']} | "
                  f"{r['lag_max_ms']} | {r['lag_p99_ms']} | "
                  f"{r.get('warmup_lag_max_ms', 'n/a')} | {r['mean_hits']} | "
                  f"{r.get('vector_recall_at_10', 'n/a')} | {r['seed_s']} | "
                  f"{r['load']} | {_run_of(r, sec)} |" for r in sec["rows"]]
        engines = sorted({r["vector_index"]["engine"] for r in sec["rows"]
                          if "vector_index" in r})
        if engines:
            lines += ["", "Engine: " + "; ".join(engines) + ". Counters per row "
                      "(builds, catch-ups, fallbacks to exact, candidates verified) are in "
                      "`scale.json`."]
    if "questions" in sections:
        sec = sections["questions"]
        res = sec["results"]
        low, mean, high = sec["question_words"]
        lines += ["", f"## Natural-language questions: PostgreSQL ÷ SQLite ({sec['when']})", "",
                  f"{sec['records']:,} turns of held-out conversations (`recall_data` seed "
                  f"{sec['seed']}) as one user's memories; its {sec['questions']} questions "
                  f"of {low} to {high} words (mean {mean}) searched lexically, top 10; then "
                  f"gets, adds and updates. Both stores open at once, calls alternating "
                  f"between them; `ranking_processes` {sec['ranking_processes']}. Same hit "
                  f"counts on both: {sec['same_hit_counts']}. Load {sec['load']}.", "",
                  "| call | SQLite p50 ms | SQLite p95 ms | PostgreSQL p50 ms | "
                  "PostgreSQL p95 ms | PostgreSQL ÷ SQLite (p50) | PostgreSQL round trips | "
                  "target |", "|---|---:|---:|---:|---:|---:|---:|---|"]
        targets = {"search": "PostgreSQL ≤ 1.5 x SQLite", "get": "PostgreSQL ≤ 0.5 ms",
                   "update": "PostgreSQL ≤ 3 ms", "add": "PostgreSQL ≤ 2 ms"}
        for op in ("search", "get", "update", "add"):
            lite, pg = res[op]["sqlite"], res[op]["postgres"]
            trips = pg["per_call"].get("round_trips", 0)
            lines.append(f"| {op} | {lite['p50_ms']} | {lite['p95_ms']} | {pg['p50_ms']} | "
                         f"{pg['p95_ms']} | {res[op]['postgres_over_sqlite_p50']} | {trips} | "
                         f"{targets[op]} |")
        ranked = {name: (status or {}).get("searches", 0)
                  for name, status in sec["ranking"].items()}
        lines += ["", "Searches ranked by the ranking workers: "
                  + ", ".join(f"{name} {count}" for name, count in ranked.items())
                  + ". Counters per call (round trips, statements, hops, commits) are in "
                  "`scale.json`."]
    if "readers" in sections:
        sec = sections["readers"]
        lines += ["", f"## 8 concurrent readers on one manager ÷ 1 reader ({sec['when']})", "",
                  "Alternating rounds of 1 task then 8 tasks making the same calls; the "
                  "median of the rounds (each round's ratio in `scale.json`). `ranked` is "
                  "how many searches the ranking workers ranked.", "",
                  "| backend | workload | memories | get 1 /s | get 8 /s | get ratio | "
                  "search 1 /s | search 8 /s | search ratio | ranked | load |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        lines += [f"| {r['backend']} | {r.get('workload', 'zipf')} | {r['records']:,} | "
                  f"{r['get']['one_per_s']} | {r['get']['eight_per_s']} | {r['get']['ratio']} | "
                  f"{r['search']['one_per_s']} | {r['search']['eight_per_s']} | "
                  f"{r['search']['ratio']} | {r.get('ranking', {}).get('searches', 'n/a')} | "
                  f"{r['load']} |" for r in sec["rows"]]
        lines += ["", "Target: ≥ 1.7 for both ratios."]
    if "pg-writers" in sections:
        sec = sections["pg-writers"]
        lines += ["", f"## PostgreSQL: 8 writers on 8 tenants ÷ 1 writer ({sec['when']})", "",
                  "| adds | 1 writer /s | 8 writers /s | ratio (target ≥ 4) | load |",
                  "|---:|---:|---:|---:|---|"]
        lines += [f"| {r['adds']} | {r['one_per_s']} | {r['eight_per_s']} | {r['ratio']} | "
                  f"{r['load']} |" for r in sec["rows"]]
    if "vector-threshold" in sections:
        sec = sections["vector-threshold"]
        lines += ["", f"## Vector search: exact in storage or the index? ({sec['when']})", "",
                  "Vector-only search (top 10), SQLite, one scope, hashing 384-d: exact "
                  "(`vector_index_min_vectors` above the size) against the in-process index "
                  "(`0`).", "",
                  "| memories | exact p50 ms | index p50 ms | index ÷ exact | load |",
                  "|---:|---:|---:|---:|---|"]
        lines += [f"| {r['size']:,} | {r['exact']['p50_ms']} | {r['index']['p50_ms']} | "
                  f"{r['index_over_exact_p50']} | {r['exact']['load']} {r['index']['load']} |"
                  for r in sec["rows"]]
    if "ann-libraries" in sections:
        sec = sections["ann-libraries"]
        lines += ["", f"## Vector index libraries on the hybrid vectors ({sec['when']})", "",
                  f"{sec['dimension']}-d hashing vectors of the corpus, one core, each index's "
                  f"top {sec['shortlist']} rescored exactly; recall@10 against exact cosine. "
                  "Python share: a pure-Python thread's progress during the searches over its "
                  "progress alone (≈ 1: the GIL is released)."
                  + (f" Not installed: {', '.join(sec['missing'])}." if sec["missing"] else ""),
                  "", "| library | vectors | ef | build s | RSS MB | p50 ms | p95 ms | "
                  "recall@10 | Python share | load |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        lines += [f"| {r['library']} | {r['size']:,} | {r['ef'] or '-'} | {r['build_s']} | "
                  f"{r['rss_mb']} | {r['p50_ms']} | {r['p95_ms']} | {r['recall_at_10']} | "
                  f"{r['python_share']} | {r['load']} |" for r in sec["rows"]]
    lines += ["", "Commands that produced these sections:", ""]
    lines += [f"- {name}: `{sec['command']}`" for name, sec in sections.items()]
    return "\n".join(lines) + "\n"


def _run_of(row: dict[str, Any], section: dict[str, Any]) -> str:
    """When a row was measured (rows merge across runs), and whether by a quick run."""
    if "when" not in row:
        return "unstamped"
    return f"{str(row['when'])[:10]}{' (quick)' if row.get('quick') else ''}"


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
    parser.add_argument("--sections", nargs="+", choices=SECTIONS + EXTRA_SECTIONS,
                        default=list(SECTIONS))
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
    parser.add_argument("--threshold-sizes", type=int, nargs="+",
                        default=[250, 500, 1000, 2000, 4000, 8000])
    parser.add_argument("--threshold-searches", type=int, default=50)
    parser.add_argument("--ann-sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--ann-queries", type=int, default=100)
    parser.add_argument("--ann-ef", type=int, nargs="+", default=[200, 800],
                        help="search breadth of the graph indexes")
    parser.add_argument("--reader-records", type=int, default=10_000)
    parser.add_argument("--reader-ops", type=int, default=800)
    parser.add_argument("--reader-rounds", type=int, default=3)
    parser.add_argument("--question-records", type=int, default=10_000)
    parser.add_argument("--question-ops", type=int, default=400,
                        help="gets, adds and updates each (every question is searched)")
    parser.add_argument("--ranking-processes", default="auto",
                        type=lambda v: v if v == "auto" else int(v),
                        help="the providers' ranking_processes for questions")
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
        args.reader_rounds, args.question_records, args.question_ops = 1, 2000, 50
        args.threshold_sizes, args.threshold_searches = [500, 2000], 10
        args.ann_sizes, args.ann_queries, args.ann_ef = [2000], 20, [200]
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
        if name in ROW_KEYS:  # rows outlive the run that measured them: stamp each
            for row in section["rows"]:
                row.update(when=section["when"], quick=args.quick)
        data["sections"][name] = merged(name, data["sections"].get(name), section)
        data["meta"] = {"python": sys.version.split()[0], "sqlite": sqlite3.sqlite_version,
                        "machine": f"{platform.machine()}, {os.cpu_count()} cores"}
        write_results(args.out, data)
    print(markdown(data))


if __name__ == "__main__":
    asyncio.run(main())
