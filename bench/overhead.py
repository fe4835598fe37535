"""What governance costs: the governed manager against the native SQLite provider
called directly, for add, get and search, in one run on the same database shape.

Each variant gets its own fresh SQLite file seeded with the same corpus. Timings are
per operation (perf_counter_ns around each awaited call), reported as medians in µs,
with the ratio governed / direct. Writes ``bench/results/overhead.json`` and
``bench/results/overhead.md``.

    python bench/overhead.py [--ops 2000] [--seed-records 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from governed_memory import (
    AddRequest,
    GetRequest,
    GovernedMemoryManager,
    OperationContext,
    Permission,
    Principal,
    PrincipalKind,
    Scope,
    SearchRequest,
    SystemClock,
)
from governed_memory.events import JsonLinesEventSink
from governed_memory_native import build_native_provider

RESULTS = Path(__file__).parent / "results"
SYLLABLES = ("ka lo mi nu pe ra si to vu we xa yo za be co di fu ga hi ju "
             "la me no pu qi re su ti vo wu").split()


def vocabulary(size: int = 3000, seed: int = 11) -> list[str]:
    """Pseudo-words, so the corpus has a realistic spread of rare and common terms."""
    rng = random.Random(seed)
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


WORDS = vocabulary()
# Zipf-like weights: a few words are everywhere, most are rare (as in real text).
WEIGHTS = [1.0 / (rank + 1) for rank in range(len(WORDS))]
PRINCIPAL = Principal("svc:bench", PrincipalKind.SERVICE, "bench", permissions=frozenset(
    {Permission.READ, Permission.WRITE}))
SCOPE = Scope("bench", project_id="p", user_id="u1")


def sentence(rng: random.Random, n: int = 12) -> str:
    return " ".join(rng.choices(WORDS, WEIGHTS, k=n))


def query_text(rng: random.Random) -> str:
    return " ".join(rng.choices(WORDS, WEIGHTS, k=2))


async def timed(samples: list[int], call: Callable[[], Awaitable[Any]]) -> Any:
    start = time.perf_counter_ns()
    result = await call()
    samples.append(time.perf_counter_ns() - start)
    return result


async def run_direct(path: Path, ops: int, seed: int, rng_seed: int) -> dict[str, list[int]]:
    clock = SystemClock()
    provider = build_native_provider({"backend": "sqlite", "path": str(path)}, clock)
    await provider.start()
    rng = random.Random(rng_seed)

    def ctx() -> OperationContext:
        return OperationContext("op_bench", PRINCIPAL, clock.now())

    samples: dict[str, list[int]] = {"add": [], "get": [], "search": []}
    ids = []
    for _ in range(seed):
        ids.append((await provider.add(AddRequest(SCOPE, sentence(rng)), ctx())).id)
    for _ in range(ops):
        record = await timed(samples["add"],
                             lambda: provider.add(AddRequest(SCOPE, sentence(rng)), ctx()))
        ids.append(record.id)
    for _ in range(ops):
        rid = rng.choice(ids)
        await timed(samples["get"], lambda: provider.get(GetRequest(SCOPE, rid), ctx()))
    for _ in range(ops):
        query = query_text(rng)
        await timed(samples["search"],
                    lambda: provider.search(SearchRequest((SCOPE,), query, 10), ctx()))
    await provider.close()
    return samples


async def run_governed(path: Path, ops: int, seed: int, rng_seed: int,
                       trail: Path | None) -> dict[str, list[int]]:
    sinks = [JsonLinesEventSink(trail)] if trail else []
    manager = GovernedMemoryManager.from_plugins("native", {"backend": "sqlite",
                                                            "path": str(path)}, sinks=sinks)
    rng = random.Random(rng_seed)
    samples: dict[str, list[int]] = {"add": [], "get": [], "search": []}
    ids = []
    async with manager:
        for _ in range(seed):
            ids.append((await manager.add(PRINCIPAL, SCOPE, sentence(rng))).id)
        for _ in range(ops):
            record = await timed(samples["add"],
                                 lambda: manager.add(PRINCIPAL, SCOPE, sentence(rng)))
            ids.append(record.id)
        for _ in range(ops):
            rid = rng.choice(ids)
            await timed(samples["get"], lambda: manager.get(PRINCIPAL, SCOPE, rid))
        for _ in range(ops):
            query = query_text(rng)
            await timed(samples["search"],
                        lambda: manager.search(PRINCIPAL, SCOPE, query, limit=10))
    return samples


def median_us(values: list[int]) -> float:
    return statistics.median(values) / 1000


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--seed-records", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3,
                        help="variants run interleaved this many times; samples are pooled")
    args = parser.parse_args()

    pooled: dict[str, dict[str, list[int]]] = {"direct": {}, "governed": {},
                                               "governed+jsonl": {}}
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        for round_ in range(args.rounds):
            runs = {
                "direct": run_direct(base / f"direct{round_}.db", args.ops, args.seed_records, 7),
                "governed": run_governed(base / f"gov{round_}.db", args.ops, args.seed_records,
                                         7, None),
                "governed+jsonl": run_governed(base / f"govj{round_}.db", args.ops,
                                               args.seed_records, 7,
                                               base / f"trail{round_}.jsonl"),
            }
            for name, coro in runs.items():
                samples = await coro
                for op, values in samples.items():
                    pooled[name].setdefault(op, []).extend(values)

    table = []
    for op in ("add", "get", "search"):
        direct = median_us(pooled["direct"][op])
        governed = median_us(pooled["governed"][op])
        jsonl = median_us(pooled["governed+jsonl"][op])
        table.append({"operation": op, "direct_us": round(direct, 1),
                      "governed_us": round(governed, 1),
                      "governed_jsonl_us": round(jsonl, 1),
                      "ratio": round(governed / direct, 3),
                      "ratio_jsonl": round(jsonl / direct, 3),
                      "samples": len(pooled["direct"][op])})
    meta = {"python": sys.version.split()[0], "machine": platform.machine(),
            "ops": args.ops, "seed_records": args.seed_records, "rounds": args.rounds,
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "overhead.json").write_text(json.dumps({"meta": meta, "results": table},
                                                      indent=2) + "\n")
    lines = [
        "# Governance overhead: governed manager vs native SQLite provider called directly",
        "",
        f"Median µs per operation; {args.ops} ops × {args.rounds} rounds per variant over "
        f"{args.seed_records} seeded records; Python {meta['python']}, {meta['when']}.",
        "`governed` has no event sink and no tracer provider installed (spans are no-ops);",
        "`governed+jsonl` also appends every event to a JSON lines file (no fsync).",
        "",
        "| operation | direct µs | governed µs | ratio | governed+jsonl µs | ratio |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in table:
        lines.append(f"| {row['operation']} | {row['direct_us']} | {row['governed_us']} | "
                     f"{row['ratio']} | {row['governed_jsonl_us']} | {row['ratio_jsonl']} |")
    lines += ["", "Reproduce: `python bench/overhead.py`"]
    (RESULTS / "overhead.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    asyncio.run(main())
