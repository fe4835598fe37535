"""What the analyzer migration costs an operator: the first start of a store written
before SQLite v13 / PostgreSQL v9, which rebuilds the lexical index from the records.

Why: the migration re-tokenizes every stored record inside the start-up transaction,
so a store cannot serve until it is done, and other processes starting meanwhile wait.
The figure to know before upgrading is seconds per record stored, on each SQL backend.

How: ``--records`` memories (the generated conversation turns of ``recall_data``,
English dialogue, cycled to the size) are seeded through the storage port
(``seeding.seed_texts``) into one scope in ten; the rebuild is then made pending again
by removing its row from the migrations table (the rebuild does not read the old
terms, so this is the same work as an upgrade), and the provider's ``start`` is timed
with the rebuild and, again, without it (a start that finds nothing to migrate).

    python bench/reindex.py [--records 100000] [--backends sqlite,postgres]
                            [--out bench/results/reindex]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import recall_data
import seeding
from governed_memory import Scope
from governed_memory.clock import SystemClock
from governed_memory_native import build_native_provider
from governed_memory_native.postgres.migrating import MIGRATIONS_TABLE
from governed_memory_native.postgres.schema import LATEST_VERSION as POSTGRES_LATEST
from governed_memory_native.retrieval.tokens import ANALYZER
from governed_memory_native.sqlite.schema import LATEST_VERSION as SQLITE_LATEST

REBUILD = {"sqlite": SQLITE_LATEST, "postgres": POSTGRES_LATEST}
"""The migration that rebuilds the index, per backend (the latest, today)."""


def texts(count: int) -> list[str]:
    turns = [turn.memory_text for conversation in
             recall_data.generate(conversations=10, turns=600).conversations
             for turn in conversation.turns]
    return [turns[i % len(turns)] for i in range(count)]


def _unapply(config: dict[str, Any], backend: str) -> None:
    """Make the rebuild pending again: delete its row from the migrations table."""
    version = REBUILD[backend]
    if backend == "sqlite":
        with sqlite3.connect(config["path"]) as conn:
            conn.execute("DELETE FROM schema_migrations WHERE version = ?", (version,))
        return
    import psycopg

    with psycopg.connect(config["dsn"], autocommit=True,
                         options=f"-c search_path={config['schema']}") as conn:
        conn.execute(f"DELETE FROM {MIGRATIONS_TABLE} WHERE version = %s",
                     (version,))


async def _timed_start(config: dict[str, Any]) -> float:
    provider = build_native_provider(config, SystemClock())
    started = time.perf_counter()
    await provider.start()
    elapsed = time.perf_counter() - started
    await provider.close()
    return elapsed


async def measure(backend: str, records: int) -> dict[str, Any]:
    with seeding.storage(backend) as config:
        provider = build_native_provider(config, SystemClock())
        await provider.start()
        try:
            corpus = texts(records)
            scopes = [Scope("bench", user_id=f"u{n}") for n in range(10)]
            per_scope = -(-records // len(scopes))
            for number, scope in enumerate(scopes):
                chunk = corpus[number * per_scope:(number + 1) * per_scope]
                if chunk:
                    await seeding.seed_texts(provider.backend, scope, chunk)
        finally:
            await provider.close()
        plain = await _timed_start(config)
        _unapply(config, backend)
        load = os.getloadavg()[0]
        rebuild = await _timed_start(config)
        words = sum(len(text.split()) for text in corpus)
        return {"backend": backend, "records": records, "words": words,
                "start_s": round(plain, 3), "start_with_rebuild_s": round(rebuild, 3),
                "rebuild_s": round(rebuild - plain, 3),
                "rebuild_us_per_record": round((rebuild - plain) / records * 1e6, 1),
                "load_before": round(load, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "reindex")
    args = parser.parse_args()
    rows = []
    for backend in args.backends.split(","):
        row = asyncio.run(measure(backend, args.records))
        print(json.dumps(row), flush=True)
        rows.append(row)
    report = {"meta": {"analyzer": ANALYZER, "python": platform.python_version(),
                       "cpus": os.cpu_count(), "load_after": os.getloadavg(),
                       "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
              "results": rows}
    args.out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    lines = ["# The analyzer migration's first start", "",
             f"`python bench/reindex.py --records {args.records}`, {report['meta']['date']}, "
             f"{report['meta']['cpus']} CPUs; analyzer `{ANALYZER}`. Records are generated "
             "conversation turns (English, ~14 words) in 10 scopes; a start without the "
             "rebuild is subtracted.", "",
             "| backend | records | start | start with rebuild | rebuild | per record | "
             "load before |", "|---|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['backend']} | {r['records']:,} | {r['start_s']} s | "
              f"{r['start_with_rebuild_s']} s | {r['rebuild_s']} s | "
              f"{r['rebuild_us_per_record']} µs | {r['load_before']} |" for r in rows]
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
