"""The native provider's write-rate windows: one limit for every process on one SQLite
file and every provider on one PostgreSQL schema (real processes, real servers), kept
apart from the memory writers' locks.

Before the windows moved to the provider, the quotas policy counted in each process, so
two processes each admitted the whole limit: the control cases (``rate_store =
"process"``) show that count, and the shared cases must not.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from actors import ALICE
from governed_memory import GovernedMemoryManager, MemoryPolicyDeniedError, Scope
from governed_memory.clock import ManualClock
from governed_memory.profiles import MemoryProfileSpec, parse_profile
from governed_memory.rates import ProcessRateWindows, RateLimit
from governed_memory_native import build_native_provider
from postgres_support import POSTGRES_DSN, postgres_config

NOW = 1_800_000_000.0
LIMIT = 5
TRIES = 8  # per process: more than the limit, so each alone would hit it
SCOPE = Scope("acme", user_id="alice")
TESTS = Path(__file__).resolve().parents[1]


def rate_profile(config: dict[str, Any], *, rate_store: str | None = None) -> MemoryProfileSpec:
    quotas: dict[str, Any] = {"writes_per_minute_per_scope": LIMIT,
                              "writes_per_minute_per_tenant": 1_000}
    if rate_store is not None:
        quotas["rate_store"] = rate_store
    return parse_profile({"id": "rates", "version": "1.0.0",
                          "provider": {"name": "native", "config": config},
                          "quotas": quotas, "policies": {"enabled": ["quotas"]}})


_WORKER = textwrap.dedent("""
    import asyncio, json, sys
    sys.path.insert(0, {tests!r})
    from actors import ALICE
    from governed_memory import GovernedMemoryManager, MemoryPolicyDeniedError, Scope
    from governed_memory.clock import ManualClock
    from governed_memory.profiles import parse_profile

    async def main():
        spec = parse_profile(json.loads(sys.argv[1]))
        # The time stands still: every write falls in one window, however slow the run.
        manager = GovernedMemoryManager.from_profile(spec, clock=ManualClock({now!r}),
                                                     sinks=())
        admitted, refused = 0, []
        async with manager:
            sys.stdout.write("ready\\n"); sys.stdout.flush()
            sys.stdin.readline()  # both processes start writing together
            for n in range({tries}):
                try:
                    await manager.add(ALICE, Scope("acme", user_id="alice"), f"note {{n}}")
                    admitted += 1
                except MemoryPolicyDeniedError as exc:
                    refused.append(str(exc))
        print(json.dumps({{"admitted": admitted, "refused": refused}}), flush=True)

    asyncio.run(main())
""").format(tests=str(TESTS), now=NOW, tries=TRIES)


def run_two_processes(spec: MemoryProfileSpec) -> list[dict[str, Any]]:
    """Two OS processes, each with its own manager over ``spec``, writing at once."""
    data = json.dumps(spec.canonical())
    workers = [subprocess.Popen([sys.executable, "-c", _WORKER, data], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        for worker in workers:
            assert worker.stdout is not None and worker.stdout.readline() == "ready\n"
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
        outputs = [worker.communicate(timeout=120)[0] for worker in workers]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
    assert [worker.returncode for worker in workers] == [0, 0]
    return [json.loads(output.strip().splitlines()[-1]) for output in outputs]


async def stored(config: dict[str, Any]) -> int:
    async with GovernedMemoryManager.from_plugins("native", config) as manager:
        return len((await manager.list(ALICE, SCOPE)).items)


async def test_one_limit_across_two_processes_on_one_sqlite_file(tmp_path: Path) -> None:
    config = {"backend": "sqlite", "path": str(tmp_path / "memory.db")}
    results = run_two_processes(rate_profile(config))
    assert sum(result["admitted"] for result in results) == LIMIT
    refusals = [reason for result in results for reason in result["refused"]]
    assert len(refusals) == 2 * TRIES - LIMIT
    assert all("scope write rate above 5 per minute" in reason for reason in refusals)
    assert await stored(config) == LIMIT
    assert (tmp_path / "memory.db-rates").is_file()


async def test_windows_in_each_process_admit_the_limit_in_each(tmp_path: Path) -> None:
    """The control: what every deployment of N workers got before (N times the limit)."""
    config = {"backend": "sqlite", "path": str(tmp_path / "memory.db")}
    results = run_two_processes(rate_profile(config, rate_store="process"))
    assert [result["admitted"] for result in results] == [LIMIT, LIMIT]
    assert await stored(config) == 2 * LIMIT


async def test_one_limit_across_two_providers_on_one_postgres_schema(tmp_path: Path) -> None:
    config = postgres_config(tmp_path)
    spec = rate_profile(config)
    nodes = [GovernedMemoryManager.from_profile(spec, clock=ManualClock(NOW), sinks=())
             for _ in range(2)]
    admitted = 0
    try:
        for manager in nodes:
            await manager.start()
        assert nodes[0].activity.rate_windows is not nodes[1].activity.rate_windows
        assert all(manager.activity.rate_windows.shared for manager in nodes)

        async def write(manager: GovernedMemoryManager, n: int) -> bool:
            try:
                await manager.add(ALICE, SCOPE, f"note {n}")
                return True
            except MemoryPolicyDeniedError as exc:
                assert "scope write rate above 5 per minute" in str(exc)
                return False

        answers = await asyncio.gather(*(write(nodes[n % 2], n) for n in range(2 * TRIES)))
        admitted = sum(answers)
    finally:
        for manager in nodes:
            await manager.close()
    assert admitted == LIMIT
    assert await stored(config) == LIMIT


async def test_an_admit_never_waits_for_the_memory_databases_write_lock(
        tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    provider = build_native_provider({"backend": "sqlite", "path": str(path),
                                      "busy_timeout_ms": 100}, ManualClock(NOW))
    await provider.start()
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        windows = provider.rate_windows
        assert windows is not None and windows.shared
        writer.execute("BEGIN IMMEDIATE")  # a memory writer holds the database's lock
        window = RateLimit("scope:locked", 2, 60.0, "scope")
        assert await windows.admit((window,), NOW) is None
        assert await windows.admit((window,), NOW) is None
        assert await windows.admit((window,), NOW) == window
        writer.execute("ROLLBACK")
    finally:
        writer.close()
        await provider.close()


async def test_an_admit_never_waits_for_the_memory_writers_advisory_locks(
        tmp_path: Path) -> None:
    import psycopg
    from governed_memory_native.postgres.locks import tenant_lock_key, writer_lock_key

    config = postgres_config(tmp_path, busy_timeout_ms=100)
    provider = build_native_provider(config, ManualClock(NOW))
    await provider.start()
    try:
        windows = provider.rate_windows
        assert windows is not None and windows.shared
        holder = await psycopg.AsyncConnection.connect(POSTGRES_DSN)
        async with holder, holder.transaction():
            # A global writer (every tenant's writers wait for it) and acme's writer.
            await holder.execute("SELECT pg_advisory_xact_lock(%s)",
                                 (writer_lock_key(config["schema"]),))
            await holder.execute("SELECT pg_advisory_xact_lock(%s)",
                                 (tenant_lock_key(config["schema"], "acme"),))
            window = RateLimit("scope:locked", 1, 60.0, "scope", "acme")
            assert await windows.admit((window,), NOW) is None
            assert await windows.admit((window,), NOW) == window
    finally:
        await provider.close()


async def test_the_memory_backend_keeps_its_windows_in_process() -> None:
    provider = build_native_provider({"backend": "memory"}, ManualClock(NOW))
    assert isinstance(provider.rate_windows, ProcessRateWindows)
    assert provider.rate_windows.shared is False


async def test_a_closed_provider_closes_its_windows_and_reopens_them(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    provider = build_native_provider({"backend": "sqlite", "path": str(path)}, ManualClock(NOW))
    window = RateLimit("scope:reopen", 2, 60.0, "scope")
    await provider.start()
    windows = provider.rate_windows
    assert windows is not None
    assert await windows.admit((window,), NOW) is None
    await provider.close()
    wal = path.with_name(path.name + "-rates-wal")
    assert not await asyncio.to_thread(wal.exists)  # the sidecar's connection is closed
    await provider.start()
    try:
        assert await windows.admit((window,), NOW) is None
        assert await windows.admit((window,), NOW) == window  # the count survived
    finally:
        await provider.close()


@pytest.mark.parametrize("busy_timeout_ms", [0, 2_500])
def test_the_sidecar_waits_at_least_a_moment(busy_timeout_ms: int, tmp_path: Path) -> None:
    from governed_memory_native.sqlite.rates import MIN_BUSY_MS, SqliteRateWindows

    windows = SqliteRateWindows(tmp_path / "x-rates", busy_timeout_ms=busy_timeout_ms)
    assert windows.busy_timeout_ms == max(busy_timeout_ms, MIN_BUSY_MS)


async def test_a_session_the_server_dropped_is_replaced_not_refused(tmp_path: Path) -> None:
    """After a PostgreSQL restart the pooled sessions are gone; the next admit takes a
    fresh one instead of denying a write for a connection nobody can use."""
    import psycopg

    config = postgres_config(tmp_path)
    provider = build_native_provider(config, ManualClock(NOW))
    await provider.start()
    try:
        windows = provider.rate_windows
        assert windows is not None
        window = RateLimit("scope:dropped", 3, 60.0, "scope", "acme")
        assert await windows.admit((window,), NOW) is None
        async with await psycopg.AsyncConnection.connect(POSTGRES_DSN, autocommit=True) as dba:
            cursor = await dba.execute(
                "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = %s) AS ended",
                (f"governed-memory/{config['schema']}/rates",))
            row = await cursor.fetchone()
            assert row is not None and row[0] >= 1
        assert await windows.admit((window,), NOW) is None
        assert await windows.admit((window,), NOW) is None
        assert await windows.admit((window,), NOW) == window  # the count survived
    finally:
        await provider.close()
