"""What one write-rate admit costs on each store: process memory, the native provider's
SQLite sidecar and PostgreSQL tables, and Redis (real servers).

An admit is what the quotas policy does before every add, update, appended turn and
working-state update when a writes-per-minute limit is set: one event counted against a
tenant window and a scope window, atomically. Two measurements per store:

- **latency**: one client, admits one after another over 64 scopes of one tenant (the
  tenant window is hot, as it is in a real deployment), limits high enough that every
  admit is counted; p50, p99 and mean in microseconds;
- **throughput**: ``--clients`` clients of the store at once (two store objects, each
  with its own connections, as two worker processes would have), admits per second over
  the whole run, all on the same tenant window (the worst case: they all wait for one
  row, lock or key).

Writes ``bench/results/rate_windows.json`` and ``rate_windows.md`` with the 1-minute load
before and after. Skips a store whose server is unreachable (and says so).

    python bench/rate_windows.py [--admits 3000] [--clients 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from governed_memory.rates import ProcessRateWindows, RateLimit, RateWindows
from seeding import POSTGRES_DSN, REDIS_URL, delete_prefix, drop_schema

RESULTS = Path(__file__).parent / "results"
NOW = 1_800_000_000.0
STORES = ("process", "sqlite", "postgres", "redis")


def load() -> float:
    return round(os.getloadavg()[0], 2)


def limits(run: str, scope: int) -> tuple[RateLimit, RateLimit]:
    return (RateLimit(f"{run}:tenant", 10_000_000, 60.0, "tenant", run),
            RateLimit(f"{run}:scope:{scope}", 10_000_000, 60.0, "scope", run))


def open_store(store: str, directory: Path, schema: str, prefix: str) -> RateWindows:
    if store == "process":
        return ProcessRateWindows()
    if store == "sqlite":
        from governed_memory_native.sqlite.rates import SqliteRateWindows

        return SqliteRateWindows(directory / "memory.db-rates", busy_timeout_ms=5_000)
    if store == "postgres":
        from governed_memory_native.postgres.rates import PostgresRateWindows

        return PostgresRateWindows(POSTGRES_DSN, schema=schema, busy_timeout_ms=5_000)
    from governed_memory_redis.rates import RedisRatesConfig, RedisRateWindows

    return RedisRateWindows(RedisRatesConfig(url=REDIS_URL, key_prefix=prefix))


async def measure(store: str, admits: int, clients: int, directory: Path, schema: str,
                  prefix: str) -> dict[str, Any]:
    first = open_store(store, directory, schema, prefix)
    second = first if store == "process" else open_store(store, directory, schema, prefix)
    run = uuid.uuid4().hex
    try:
        for n in range(50):  # connections open, tables and scripts in place
            await first.admit(limits(run + "w", n), NOW)
            await second.admit(limits(run + "w", n), NOW)
        samples = []
        for n in range(admits):
            began = time.perf_counter()
            refused = await first.admit(limits(run, n % 64), NOW + n * 1e-3)
            samples.append((time.perf_counter() - began) * 1e6)
            assert refused is None
        samples.sort()
        together = run + "c"
        per_client = max(1, admits // clients)

        async def client(index: int) -> None:
            windows = (first, second)[index % 2]
            for n in range(per_client):
                await windows.admit(limits(together, (index * per_client + n) % 64), NOW)

        began = time.perf_counter()
        await asyncio.gather(*(client(i) for i in range(clients)))
        elapsed = time.perf_counter() - began
        return {"p50_us": round(samples[len(samples) // 2], 1),
                "p99_us": round(samples[int(len(samples) * 0.99) - 1], 1),
                "mean_us": round(statistics.fmean(samples), 1),
                "concurrent_admits_per_s": round(per_client * clients / elapsed),
                "clients": clients}
    finally:
        await first.close()
        if second is not first:
            await second.close()


def available(store: str) -> str | None:
    """None when the store's server answers, else why not."""
    try:
        if store == "postgres":
            import psycopg

            with psycopg.connect(POSTGRES_DSN, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
        elif store == "redis":
            import redis

            client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1)
            try:
                client.ping()
            finally:
                client.close()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--admits", type=int, default=3000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--stores", nargs="+", default=list(STORES), choices=STORES)
    parser.add_argument("--out", default=str(RESULTS / "rate_windows"),
                        help="write OUT.json and OUT.md")
    args = parser.parse_args()
    schema = f"gm_bench_rates_{uuid.uuid4().hex[:8]}"
    prefix = f"gmbench:rates:{uuid.uuid4().hex[:8]}:"
    before = load()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for store in args.stores:
            missing = available(store)
            if missing is not None:
                results[store] = {"skipped": missing}
                print(f"{store}: skipped ({missing})", file=sys.stderr)
                continue
            try:
                results[store] = asyncio.run(measure(store, args.admits, args.clients,
                                                     Path(tmp), schema, prefix))
            finally:
                if store == "postgres":
                    drop_schema(schema)
                elif store == "redis":
                    delete_prefix(prefix)
            print(store, results[store], file=sys.stderr)
    meta = {"python": sys.version.split()[0], "machine": platform.machine(),
            "cpus": os.cpu_count(), "admits": args.admits, "clients": args.clients,
            "load_before": before, "load_after": load(),
            "command": " ".join(["python bench/rate_windows.py", *sys.argv[1:]])}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{out}.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2)
                                   + "\n", encoding="utf-8")
    lines = ["# Write-rate admits: cost per store", "",
             f"`{meta['command']}` on {meta['cpus']} CPUs, Python {meta['python']}; "
             f"1-minute load {before} before, {meta['load_after']} after.", "",
             "One admit counts one event in a tenant window and a scope window, atomically.",
             "Latency: one client, one admit after another. Throughput: "
             f"{args.clients} clients at once on one tenant window.", "",
             "| store | p50 µs | p99 µs | mean µs | admits/s, "
             f"{args.clients} clients |", "|---|---|---|---|---|"]
    for store in args.stores:
        row = results[store]
        if "skipped" in row:
            lines.append(f"| {store} | skipped: {row['skipped']} | | | |")
        else:
            lines.append(f"| {store} | {row['p50_us']} | {row['p99_us']} | {row['mean_us']} "
                         f"| {row['concurrent_admits_per_s']} |")
    Path(f"{out}.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
