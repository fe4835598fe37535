"""Mem0 three ways, side by side in one run: raw ``mem0ai``, the governed Mem0
provider, and the governed native provider, for add, get and search.

Raw Mem0 and the governed Mem0 provider share everything but governance: the same
embedder (the deterministic hashing embedder, 256 dimensions, so the model costs
nothing and the stores are what is measured), the same faiss vector store kind and a
history database each, the same corpus. The native provider (SQLite, BM25; it does not
embed) is the reference for what the governed contract costs on a store built for it.
Every operation goes to all three in turn, the order rotating, as in
``bench/overhead.py``; timings are per call (``perf_counter_ns``), tables give medians
and 95th percentiles in µs. Writes ``bench/results/mem0.json`` and ``.md``.

    python bench/mem0.py [--ops 300] [--seed-records 1000]
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
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from corpus import Corpus

# This file is named after the package it measures: keep its folder from shadowing mem0.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
os.environ["MEM0_TELEMETRY"] = "False"

# After the path fix above, on purpose.
from governed_memory import (  # noqa: E402
    GovernedMemoryManager,
    Permission,
    Principal,
    PrincipalKind,
    Scope,
)
from governed_memory.clock import SystemClock  # noqa: E402
from governed_memory_mem0 import HashingEmbedder, build_mem0_provider  # noqa: E402
from governed_memory_mem0.embedding import Mem0EmbedderBridge  # noqa: E402
from governed_memory_native import build_native_provider  # noqa: E402

RESULTS = HERE / "results"
SYLLABLES = tuple("kalominuperasitovuwexayozabecodifugahijulamenopuqiresutivowu"[i:i + 2]
                  for i in range(0, 60, 2))
PRINCIPAL = Principal("svc:bench", PrincipalKind.SERVICE, "bench", permissions=frozenset(
    {Permission.READ, Permission.WRITE}))
SCOPE = Scope("bench", project_id="p", user_id="u1")
VARIANTS = ("raw mem0", "governed mem0", "governed native")
OPERATIONS = ("add", "get", "search")
DIMENSION = 256

CORPUS = Corpus(SYLLABLES, seed=11)


class Target:
    def __init__(self, name: str, add: Callable[[str], Awaitable[str]],
                 get: Callable[[str], Awaitable[Any]],
                 search: Callable[[str], Awaitable[int]]) -> None:
        self.name = name
        self.add, self.get, self.search = add, get, search
        self.ids: list[str] = []
        self.samples: dict[str, list[int]] = {op: [] for op in OPERATIONS}
        self.hits: list[int] = []

    async def timed(self, operation: str, call: Awaitable[Any]) -> Any:
        start = time.perf_counter_ns()
        result = await call
        self.samples[operation].append(time.perf_counter_ns() - start)
        return result


def mem0_local(base: Path, name: str) -> dict[str, Any]:
    return {"client": "local", "ledger_path": str(base / f"{name}-ledger.db"),
            "vector_store": {"provider": "faiss", "path": str(base / f"{name}-faiss")},
            "history_db_path": str(base / f"{name}-history.db"),
            "mem0_dir": str(base / "mem0-home"),
            "embedder": {"name": "deterministic", "dimension": DIMENSION}}


async def open_targets(base: Path) -> tuple[list[Target], list[Any]]:
    clock = SystemClock()
    embedder = HashingEmbedder(DIMENSION)

    # Raw mem0ai, built exactly as the adapter builds it, then called directly (in a
    # worker thread, as the adapter calls it, so both pay the same thread hop).
    raw_provider = build_mem0_provider(mem0_local(base, "raw"), clock, embedder=embedder)
    await raw_provider.start()
    memory = raw_provider.client.memory  # type: ignore[attr-defined]
    bridge = Mem0EmbedderBridge(embedder)
    memory.embedding_model = bridge

    async def raw_add(text: str) -> str:
        result = await asyncio.to_thread(
            memory.add, [{"role": "user", "content": text}], user_id="bench-u1", infer=False)
        return str(result["results"][0]["id"])

    async def raw_get(memory_id: str) -> Any:
        return await asyncio.to_thread(memory.get, memory_id)

    async def raw_search(query: str) -> int:
        found = await asyncio.to_thread(memory.search, query, filters={"user_id": "bench-u1"},
                                        top_k=10)
        return len(found["results"])

    targets = [Target("raw mem0", raw_add, raw_get, raw_search)]
    closers: list[Any] = [raw_provider]
    governed = GovernedMemoryManager(
        build_mem0_provider(mem0_local(base, "governed"), clock, embedder=embedder),
        clock=clock)
    native = GovernedMemoryManager(
        build_native_provider({"backend": "sqlite", "path": str(base / "native.db")}, clock),
        clock=clock)
    for name, manager in (("governed mem0", governed), ("governed native", native)):
        await manager.start()

        async def add(text: str, m: GovernedMemoryManager = manager) -> str:
            return (await m.add(PRINCIPAL, SCOPE, text)).id

        async def search(query: str, m: GovernedMemoryManager = manager) -> int:
            return len((await m.search(PRINCIPAL, SCOPE, query, limit=10)).hits)

        targets.append(Target(name, add,
                              lambda rid, m=manager: m.get(PRINCIPAL, SCOPE, rid), search))
        closers.append(manager)
    return targets, closers


async def run(ops: int, seed_records: int) -> list[Target]:
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        os.environ.setdefault("MEM0_DIR", str(base / "mem0-home"))
        targets, closers = await open_targets(base)
        try:
            for _ in range(seed_records):
                text = CORPUS.sentence(rng)
                for target in targets:
                    target.ids.append(await target.add(text))
            for i in range(ops * len(OPERATIONS)):
                operation = OPERATIONS[i // ops]
                shift = i % len(targets)
                order = targets[shift:] + targets[:shift]
                text, pick = CORPUS.sentence(rng), rng.randrange(len(targets[0].ids))
                query = CORPUS.query_text(rng)
                for target in order:
                    if operation == "add":
                        target.ids.append(await target.timed("add", target.add(text)))
                    elif operation == "get":
                        await target.timed("get", target.get(target.ids[pick]))
                    else:
                        target.hits.append(await target.timed("search", target.search(query)))
        finally:
            for closer in closers:
                await closer.close()
    return targets


def us(values: list[int], quantile: float | None = None) -> float:
    if quantile is None:
        return round(statistics.median(values) / 1000, 1)
    return round(statistics.quantiles(values, n=100)[int(quantile * 100) - 1] / 1000, 1)


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--ops", type=int, default=300)
    parser.add_argument("--seed-records", type=int, default=1000)
    args = parser.parse_args()

    targets = await run(args.ops, args.seed_records)
    by_name = {target.name: target for target in targets}
    table = []
    for op in OPERATIONS:
        row: dict[str, Any] = {"operation": op, "samples": len(by_name["raw mem0"].samples[op])}
        for name in VARIANTS:
            row[name] = {"median_us": us(by_name[name].samples[op]),
                         "p95_us": us(by_name[name].samples[op], 0.95)}
        row["governed_mem0_vs_raw"] = round(
            row["governed mem0"]["median_us"] / row["raw mem0"]["median_us"], 2)
        row["governed_mem0_vs_native"] = round(
            row["governed mem0"]["median_us"] / row["governed native"]["median_us"], 2)
        table.append(row)
    meta = {"python": sys.version.split()[0], "machine": platform.machine(),
            "ops": args.ops, "seed_records": args.seed_records, "embedder": "hashing-bow/256",
            "vector_store": "faiss (cosine)",
            "mean_search_hits": {t.name: round(statistics.fmean(t.hits), 2) for t in targets},
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "mem0.json").write_text(json.dumps({"meta": meta, "results": table},
                                                  indent=2) + "\n")
    lines = [
        "# Mem0: raw mem0ai vs the governed Mem0 provider vs the governed native provider",
        "",
        f"Median (p95) µs per call; {args.ops} calls per operation and variant, interleaved, "
        f"over {args.seed_records} seeded records (12 words each, Zipf-distributed "
        f"vocabulary of {len(CORPUS.words)} words; 2-word queries, top 10); Python "
        f"{meta['python']}, {meta['when']}. Raw and governed Mem0: mem0ai 2.2.1 in process, "
        "faiss (cosine) on disk, the same deterministic 256-d hashing embedder, `infer=False`, "
        "each called from a worker thread. Native: SQLite (`synchronous=FULL`) with BM25; it "
        "does not embed. The governed variants run through `GovernedMemoryManager` (no event "
        "sink, no tracer).",
        "",
        "| operation | raw mem0 µs | governed mem0 µs | governed native µs "
        "| governed mem0 / raw | governed mem0 / native |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in table:
        cells = [f"{row[name]['median_us']} ({row[name]['p95_us']})" for name in VARIANTS]
        lines.append(f"| {row['operation']} | {' | '.join(cells)} | "
                     f"{row['governed_mem0_vs_raw']} | {row['governed_mem0_vs_native']} |")
    lines += ["", "Mean hits per search: " + ", ".join(
        f"{name} {value}" for name, value in meta["mean_search_hits"].items()) + ".",
        "", "Reproduce: `python bench/mem0.py`"]
    (RESULTS / "mem0.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    asyncio.run(main())
