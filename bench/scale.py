"""How the native provider's cost grows with the number of memories in one tenant:
governed add throughput and search latency (p50, p95) at 10k, 100k and 1M memories,
SQLite and PostgreSQL, lexical search.

Seeding (the one fast path, used only here): 1M adds through the governed API would
take hours on a small machine, so each store is seeded through the storage backend,
many records per write transaction: the port's ``insert_record`` + ``append_version``
(SQLite), or the PostgreSQL transaction's ``insert_new_records``, which writes the same
rows with COPY. Records are built exactly as the provider's ``add`` builds them (id,
revision, content hash, version 1, ``index_state=indexed``), so rows and index entries
are the ones a governed add writes; what seeding skips is the per-write policy decision,
idempotency lookup, key check, event and fsync, which is what the measured phase times.

Measured on top of the seeded store, through ``GovernedMemoryManager`` (policy engine,
events, spans as no-ops, no cache):

- ``add/s``: sequential governed adds (one client), each its own committed transaction;
- ``search (scope of N)``: a 2-word query over the scope holding all N seeded memories
  (the worst case for scope-local BM25: its statistics cover the whole scope);
- ``search (user scope)``: the same kind of query over one user's scope of 1,000
  memories inside the same tenant, which shows what isolation buys.

Queries are drawn from the 300 most common words of a Zipf-distributed vocabulary, so
some terms occur in most documents (the expensive case for any inverted index).

Results merge into ``bench/results/scale.json`` keyed by backend and size (so 1M can run
separately) and ``scale.md`` is rewritten from all of them.

    python bench/scale.py --sizes 10000 100000 --backends sqlite postgres
    python bench/scale.py --sizes 1000000 --backends postgres --searches 40

PostgreSQL comes from ``GOVERNED_MEMORY_POSTGRES_DSN`` (default
``postgresql://postgres@127.0.0.1:5432/test``); the bench uses a fresh schema per run and
drops it afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
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
from governed_memory.ids import new_id, new_revision
from governed_memory.records import (
    IndexState,
    MemoryRecord,
    MemoryType,
    MemoryVersion,
    RecordStatus,
    VersionOperation,
    content_hash,
)
from governed_memory_native import build_native_provider

RESULTS = Path(__file__).parent / "results"
POSTGRES_DSN = os.environ.get("GOVERNED_MEMORY_POSTGRES_DSN",
                              "postgresql://postgres@127.0.0.1:5432/test")
SYLLABLES = tuple("kalominuperasitovuwexayozabecodifugahijulamenopuqiresutivowu"[i:i + 2]
                  for i in range(0, 60, 2))
TENANT = "bench"
PRINCIPAL = Principal("svc:bench", PrincipalKind.SERVICE, TENANT, permissions=frozenset(
    {Permission.READ, Permission.WRITE}))
SHARED = Scope(TENANT, project_id="p")
USER = Scope(TENANT, project_id="p", user_id="u1")
USER_RECORDS = 1000
EMBED_DIMENSION = 384
BATCH = 2000
CORPUS = Corpus(SYLLABLES, seed=11, query_pool=300)


def seed_record(scope: Scope, content: str, now: float) -> MemoryVersion:
    record = MemoryRecord(
        id=new_id(), scope=scope, scope_hash=scope.scope_hash, content=content,
        memory_type=MemoryType.NOTE, version=1, revision=new_revision(),
        content_hash=content_hash(content), status=RecordStatus.ACTIVE,
        created_at=now, updated_at=now, index_state=IndexState.INDEXED,
    )
    return MemoryVersion(record, VersionOperation.ADD, now, "op_bench_seed")


@contextmanager
def storage(backend: str) -> Iterator[dict[str, Any]]:
    """A fresh, empty store for one run: a SQLite file or a PostgreSQL schema."""
    if backend == "sqlite":
        with tempfile.TemporaryDirectory(prefix="gm-scale-") as tmp:
            yield {"backend": "sqlite", "path": str(Path(tmp) / "memory.db")}
        return
    import psycopg

    schema = f"gm_scale_{secrets.token_hex(4)}"
    try:
        yield {"backend": "postgres", "dsn": POSTGRES_DSN, "schema": schema}
    finally:
        with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
            conn.execute(psycopg.sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                psycopg.sql.Identifier(schema)))


def hybrid_profile(config: dict[str, Any]) -> Any:
    """Lexical + vector retrieval with the hashing embedder (384 dimensions, MiniLM's
    size), embedding on write: what an application configures for hybrid search."""
    from governed_memory.profiles import parse_profile

    return parse_profile({
        "id": "scale-bench-hybrid", "version": "1.0.0",
        "provider": {"name": "native", "config": config},
        "stores": {"embedder": {"kind": "hashing", "config": {"dimension": EMBED_DIMENSION}}},
        "indexing": {"mode": "sync"},
        "retrieval": {"modes": ["lexical", "vector"], "top_k": 10},
    })


async def seed(config: dict[str, Any], size: int, rng: random.Random, mode: str) -> float:
    """Seed ``size`` memories into SHARED and USER_RECORDS into USER (with their vectors
    in hybrid mode); returns seconds."""
    embedder = None
    if mode == "hybrid":
        from governed_memory_embedders.config import HashingConfig
        from governed_memory_embedders.hashing import HashingEmbedder

        embedder = HashingEmbedder(HashingConfig(dimension=EMBED_DIMENSION))
    provider = build_native_provider(config, SystemClock())
    await provider.start()
    began = time.perf_counter()
    try:
        plan = [(SHARED, size), (USER, USER_RECORDS)]
        for scope, count in plan:
            done = 0
            while done < count:
                batch = min(BATCH, count - done)
                now = time.time()
                versions = [seed_record(scope, CORPUS.sentence(rng), now) for _ in range(batch)]
                vectors = [] if embedder is None else await embed(embedder, versions, now)
                async with provider.backend.writing() as tx:
                    bulk = getattr(tx, "insert_new_records", None)
                    if bulk is not None:  # PostgreSQL: the same rows by COPY
                        await bulk(versions)
                    else:
                        for version in versions:
                            await tx.insert_record(version.record)
                            await tx.append_version(version)
                    for vector in vectors:
                        await tx.put_vector(vector)
                done += batch
                if done % 50_000 < BATCH:
                    print(f"  seeded {done}/{count} ({time.perf_counter() - began:.0f}s)",
                          file=sys.stderr, flush=True)
    finally:
        await provider.close()
    return time.perf_counter() - began


async def embed(embedder: Any, versions: list[MemoryVersion], now: float) -> list[Any]:
    """The vectors a sync-indexing add stores for these records."""
    from governed_memory_native.port import StoredVector
    from governed_memory_native.vectors import encode

    records = [version.record for version in versions]
    raw = await embedder.embed([record.content for record in records])
    return [StoredVector(record_id=record.id, scope_hash=record.scope_hash,
                         version=record.version, content_hash=record.content_hash,
                         identity=embedder.identity, vector=encode(values, embedder.identity),
                         created_at=now)
            for record, values in zip(records, raw, strict=True)]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


async def measure(config: dict[str, Any], adds: int, searches: int,
                  rng: random.Random, mode: str) -> dict[str, Any]:
    manager = (GovernedMemoryManager.from_profile(hybrid_profile(config)) if mode == "hybrid"
               else GovernedMemoryManager.from_plugins("native", config))
    await manager.start()
    try:
        for _ in range(5):  # warm the pool, caches and prepared statements
            await manager.search(PRINCIPAL, SHARED, CORPUS.query_text(rng), limit=10)
        began = time.perf_counter()
        for _ in range(adds):
            await manager.add(PRINCIPAL, SHARED, CORPUS.sentence(rng))
        add_seconds = time.perf_counter() - began
        timings: dict[str, list[float]] = {"shared": [], "user": []}
        hits: list[int] = []
        for _ in range(searches):
            for name, scope in (("shared", SHARED), ("user", USER)):
                query = CORPUS.query_text(rng)
                start = time.perf_counter()
                result = await manager.search(PRINCIPAL, scope, query, limit=10)
                timings[name].append((time.perf_counter() - start) * 1000)
                if name == "shared":
                    hits.append(result.candidates)
    finally:
        await manager.close()
    return {
        "adds": adds, "add_per_s": round(adds / add_seconds, 1),
        "add_ms_mean": round(add_seconds / adds * 1000, 2),
        "searches": searches,
        "search_shared_p50_ms": round(percentile(timings["shared"], 0.5), 2),
        "search_shared_p95_ms": round(percentile(timings["shared"], 0.95), 2),
        "search_user_p50_ms": round(percentile(timings["user"], 0.5), 2),
        "search_user_p95_ms": round(percentile(timings["user"], 0.95), 2),
        "candidates_median": statistics.median(hits) if hits else 0,
    }


async def run_one(backend: str, size: int, adds: int, searches: int,
                  mode: str) -> dict[str, Any]:
    rng = random.Random(size)
    with storage(backend) as config:
        print(f"{backend} {size} {mode}: seeding", file=sys.stderr, flush=True)
        seed_seconds = await seed(config, size, rng, mode)
        print(f"{backend} {size} {mode}: measuring", file=sys.stderr, flush=True)
        load_before = os.getloadavg()[0]
        figures = await measure(config, adds, searches, rng, mode)
        load = round((load_before + os.getloadavg()[0]) / 2, 1)
    return {"backend": backend, "size": size, "mode": mode, "load": load,
            "seed_seconds": round(seed_seconds, 1),
            "seed_per_s": round((size + USER_RECORDS) / seed_seconds, 1), **figures,
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def load() -> dict[str, Any]:
    path = RESULTS / "scale.json"
    if path.exists():
        loaded: dict[str, Any] = json.loads(path.read_text())
        return loaded
    return {"meta": {}, "results": []}


def write(data: dict[str, Any]) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    data["results"].sort(key=lambda row: (row.get("mode", "lexical"), row["backend"],
                                          row["size"]))
    (RESULTS / "scale.json").write_text(json.dumps(data, indent=2) + "\n")
    rows = data["results"]
    modes = sorted({row.get("mode", "lexical") for row in rows},
                   key=lambda mode: mode != "lexical")
    lines = [
        "# Native provider at scale: one tenant, 10k to 1M memories",
        "",
        "Governed add throughput (sequential, one client, each add its own transaction) and "
        "governed search latency (2-word query, top 10) on stores seeded through the "
        "backend in batches (see `bench/scale.py`). `shared` searches the scope holding all "
        "N memories (scope-local BM25 over N documents: the worst case); `user` searches "
        f"one user's scope of {USER_RECORDS:,} memories in the same tenant. `hybrid` adds "
        f"exact vector search (hashing embedder, {EMBED_DIMENSION} dimensions, embedded on "
        "write) fused with the lexical ranking; there is no approximate vector index on "
        "either backend here, so vector candidates are every vector of the searched scopes. "
        f"Machine: {data['meta'].get('machine', '?')}, Python {data['meta'].get('python', '?')},"
        " shared with other jobs: `load` is the 1-minute load average around the measured "
        "phase, and figures taken under different loads do not compare (add/s above all, "
        "which is mostly round trips and fsyncs competing for the CPU). SQLite "
        "`synchronous=FULL` (fsync per commit); PostgreSQL 15 on the same host, default "
        "settings (`synchronous_commit=on`).",
    ]
    for mode in modes:
        mine = [row for row in rows if row.get("mode", "lexical") == mode]
        lines += [
            "", f"## {mode}", "",
            "| backend | memories | add/s | search shared p50 ms | p95 ms | "
            "search user p50 ms | p95 ms | seed/s | adds, searches | load |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|",
        ]
        for row in mine:
            lines.append(
                f"| {row['backend']} | {row['size']:,} | {row['add_per_s']} | "
                f"{row['search_shared_p50_ms']} | {row['search_shared_p95_ms']} | "
                f"{row['search_user_p50_ms']} | {row['search_user_p95_ms']} | "
                f"{row['seed_per_s']} | {row['adds']}, {row['searches']} | "
                f"{row.get('load', '?')} |")
        lines += ["", f"How {mode} cost grows (relative to the smallest size per backend):",
                  "", "| backend | memories | add cost (x) | shared search p50 (x) "
                  "| user search p50 (x) |", "|---|---:|---:|---:|---:|"]
        for backend in sorted({row["backend"] for row in mine}):
            series = [row for row in mine if row["backend"] == backend]
            base = series[0]
            for row in series:
                lines.append(
                    f"| {backend} | {row['size']:,} | "
                    f"{row['add_ms_mean'] / base['add_ms_mean']:.2f} | "
                    f"{row['search_shared_p50_ms'] / base['search_shared_p50_ms']:.2f} | "
                    f"{row['search_user_p50_ms'] / base['search_user_p50_ms']:.2f} |")
    lines += ["", "Reproduce: `python bench/scale.py --sizes 10000 100000`, "
              "`python bench/scale.py --sizes 1000000 --searches 40` and "
              "`python bench/scale.py --mode hybrid --sizes 10000 100000 --searches 20`"]
    (RESULTS / "scale.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--backends", nargs="+", default=["sqlite", "postgres"],
                        choices=["sqlite", "postgres"])
    parser.add_argument("--adds", type=int, default=300)
    parser.add_argument("--searches", type=int, default=100)
    parser.add_argument("--mode", choices=["lexical", "hybrid"], default="lexical")
    args = parser.parse_args()
    for size in args.sizes:
        for backend in args.backends:
            row = await run_one(backend, size, args.adds, args.searches, args.mode)
            data = load()  # re-read: another run may have written meanwhile
            data["meta"] = {"python": sys.version.split()[0], "machine":
                            f"{platform.machine()}, {os.cpu_count()} cores"}
            data["results"] = [
                r for r in data["results"]
                if (r.get("mode", "lexical"), r["backend"], r["size"]) != (args.mode, backend, size)
            ] + [row]
            write(data)


if __name__ == "__main__":
    asyncio.run(main())
