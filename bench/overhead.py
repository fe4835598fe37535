"""What governance costs: the governed manager against the native SQLite provider
called directly, for add, get and search, side by side in one run.

Three targets are open at once, each on its own fresh SQLite file seeded with the same
corpus: the provider called directly, the governed manager, and the governed manager
with a JSON lines event sink. Every operation is issued to all three in turn, the
order rotating from one operation to the next, so drift in the machine (other load,
disk flushes, WAL checkpoints) lands on every variant alike. Timings are per call
(``perf_counter_ns`` around each awaited call); the tables give medians in µs and the
ratio governed / direct. Writes ``bench/results/overhead.json`` and ``.md``.

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

from corpus import Corpus
from governed_memory import GovernedMemoryManager, Permission, Principal, PrincipalKind, Scope
from governed_memory.clock import SystemClock
from governed_memory.events import JsonLinesEventSink
from governed_memory.operation_context import OperationContext
from governed_memory.requests import AddRequest, GetRequest, SearchRequest
from governed_memory_native import build_native_provider

RESULTS = Path(__file__).parent / "results"
SYLLABLES = tuple("kalominuperasitovuwexayozabecodifugahijulamenopuqiresutivowu"[i:i + 2]
                  for i in range(0, 60, 2))
PRINCIPAL = Principal("svc:bench", PrincipalKind.SERVICE, "bench", permissions=frozenset(
    {Permission.READ, Permission.WRITE}))
SCOPE = Scope("bench", project_id="p", user_id="u1")
VARIANTS = ("direct", "governed", "governed+jsonl")
OPERATIONS = ("add", "get", "search")


CORPUS = Corpus(SYLLABLES, seed=11)
WORDS = CORPUS.words
sentence, query_text = CORPUS.sentence, CORPUS.query_text


class Target:
    """One variant: how to add, get and search, with the ids it has written."""

    def __init__(self, name: str, add: Callable[[str], Awaitable[Any]],
                 get: Callable[[str], Awaitable[Any]],
                 search: Callable[[str], Awaitable[Any]]) -> None:
        self.name = name
        self.add, self.get, self.search = add, get, search
        self.ids: list[str] = []
        self.samples: dict[str, list[int]] = {op: [] for op in OPERATIONS}

    async def timed(self, operation: str, call: Awaitable[Any]) -> Any:
        start = time.perf_counter_ns()
        result = await call
        self.samples[operation].append(time.perf_counter_ns() - start)
        return result


async def open_targets(base: Path) -> tuple[list[Target], list[Any]]:
    clock = SystemClock()
    provider = build_native_provider({"backend": "sqlite", "path": str(base / "direct.db")},
                                     clock)
    await provider.start()

    def ctx() -> OperationContext:
        return OperationContext(operation_id="op_bench", principal=PRINCIPAL, now=clock.now())

    direct = Target(
        "direct",
        lambda text: provider.add(AddRequest(scope=SCOPE, content=text), ctx()),
        lambda rid: provider.get(GetRequest(scope=SCOPE, record_id=rid), ctx()),
        lambda q: provider.search(SearchRequest(scopes=(SCOPE,), query=q, limit=10), ctx()),
    )
    targets, closers = [direct], [provider]
    for name, sinks in (("governed", []),
                        ("governed+jsonl", [JsonLinesEventSink(base / "trail.jsonl")])):
        manager = GovernedMemoryManager.from_plugins(
            "native", {"backend": "sqlite", "path": str(base / f"{len(targets)}.db")},
            sinks=sinks)
        await manager.start()
        targets.append(Target(
            name,
            lambda text, m=manager: m.add(PRINCIPAL, SCOPE, text),
            lambda rid, m=manager: m.get(PRINCIPAL, SCOPE, rid),
            lambda q, m=manager: m.search(PRINCIPAL, SCOPE, q, limit=10),
        ))
        closers.append(manager)
    return targets, closers


async def run(ops: int, seed_records: int) -> dict[str, dict[str, list[int]]]:
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        targets, closers = await open_targets(Path(tmp))
        try:
            for _ in range(seed_records):
                text = sentence(rng)
                for target in targets:
                    target.ids.append((await target.add(text)).id)
            for i in range(ops * len(OPERATIONS)):
                operation = OPERATIONS[i // ops]
                order = targets[i % 3:] + targets[:i % 3]
                text, pick, query = sentence(rng), rng.randrange(len(targets[0].ids)), \
                    query_text(rng)
                for target in order:
                    if operation == "add":
                        record = await target.timed("add", target.add(text))
                        target.ids.append(record.id)
                    elif operation == "get":
                        await target.timed("get", target.get(target.ids[pick]))
                    else:
                        await target.timed("search", target.search(query))
        finally:
            for closer in closers:
                await closer.close()
    return {target.name: target.samples for target in targets}


def median_us(values: list[int]) -> float:
    return statistics.median(values) / 1000


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--seed-records", type=int, default=2000)
    args = parser.parse_args()

    samples = await run(args.ops, args.seed_records)
    table = []
    for op in OPERATIONS:
        direct = median_us(samples["direct"][op])
        governed = median_us(samples["governed"][op])
        jsonl = median_us(samples["governed+jsonl"][op])
        table.append({"operation": op, "direct_us": round(direct, 1),
                      "governed_us": round(governed, 1),
                      "governed_jsonl_us": round(jsonl, 1),
                      "ratio": round(governed / direct, 3),
                      "ratio_jsonl": round(jsonl / direct, 3),
                      "samples": len(samples["direct"][op])})
    meta = {"python": sys.version.split()[0], "machine": platform.machine(),
            "ops": args.ops, "seed_records": args.seed_records,
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "overhead.json").write_text(json.dumps({"meta": meta, "results": table},
                                                      indent=2) + "\n")
    lines = [
        "# Governance overhead: governed manager vs native SQLite provider called directly",
        "",
        f"Median µs per call; {args.ops} calls per operation and variant, interleaved, over "
        f"{args.seed_records} seeded records (12 words each, Zipf-distributed vocabulary of "
        f"{len(WORDS)} words; 2-word queries, top 10); Python {meta['python']}, "
        f"{meta['when']}. `governed` has no event sink and no tracer provider installed "
        "(spans are no-ops); `governed+jsonl` also appends every event to a JSON lines file "
        "(no fsync). SQLite runs with `synchronous=FULL`, so add includes an fsync.",
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
