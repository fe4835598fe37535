"""SQLite-only promises: durability, other processes, schema versioning, locking."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import textwrap
from pathlib import Path

import pytest
from governed_memory import MemoryUnavailableError
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryConfigurationError
from governed_memory.requests import (
    GetRequest,
    HistoryRequest,
    ListRequest,
    SearchRequest,
    UpdateRequest,
)
from governed_memory_native import NativeMemoryProvider, build_native_provider
from governed_memory_native.sqlite.schema import LATEST_VERSION
from native_support import USER_SCOPE, make_ctx, note


def _provider(path: Path, clock: ManualClock, **extra: object) -> NativeMemoryProvider:
    return build_native_provider({"path": str(path), **extra}, clock)


async def test_data_survives_close_and_reopen(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "memory.db"
    first = _provider(path, clock)
    await first.start()
    record = await first.add(note("green tea", key="k", metadata={"a": [1, {"b": None}]}),
                             make_ctx(clock))
    updated = await first.update(UpdateRequest(scope=USER_SCOPE, record_id=record.id,
                                               content="black tea"), make_ctx(clock))
    await first.close()

    second = _provider(path, clock)
    await second.start()
    try:
        ctx = make_ctx(clock)
        assert await second.get(GetRequest(scope=USER_SCOPE, key="k"), ctx) == updated
        history = await second.history(HistoryRequest(scope=USER_SCOPE, record_id=record.id),
                                       ctx)
        assert [v.record for v in history] == [record, updated]
        hits = await second.search(SearchRequest(scopes=(USER_SCOPE,), query="black"), ctx)
        assert [hit.record.id for hit in hits.hits] == [record.id]
    finally:
        await second.close()


async def test_pragmas_and_schema_version(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "memory.db"
    provider = _provider(path, clock)
    await provider.start()
    await provider.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == LATEST_VERSION
        versions = conn.execute("SELECT version FROM schema_migrations").fetchall()
        assert [row[0] for row in versions] == list(range(1, LATEST_VERSION + 1))
    conn.close()


async def test_restart_does_not_reapply_migrations(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "memory.db"
    for _ in range(3):
        provider = _provider(path, clock)
        await provider.start()
        await provider.close()
    with sqlite3.connect(path) as conn:
        count = conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0]
    conn.close()
    assert count == LATEST_VERSION


async def test_newer_schema_is_refused(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "memory.db"
    provider = _provider(path, clock)
    await provider.start()
    await provider.close()
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO schema_migrations VALUES (?, 'from the future', 0)",
                     (LATEST_VERSION + 1,))
    conn.close()
    again = _provider(path, clock)
    with pytest.raises(MemoryConfigurationError, match="newer"):
        await again.start()
    with pytest.raises(MemoryUnavailableError):
        await again.list(ListRequest(scope=USER_SCOPE), make_ctx(clock))


async def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path,
                                                        clock: ManualClock) -> None:
    path = tmp_path / "memory.db"
    path.write_bytes(b"this is definitely not sqlite" * 100)
    provider = _provider(path, clock)
    with pytest.raises(MemoryConfigurationError) as raised:
        await provider.start()
    assert str(tmp_path) not in str(raised.value)


async def test_lock_held_past_busy_timeout_is_unavailable(tmp_path: Path,
                                                          clock: ManualClock) -> None:
    path = tmp_path / "memory.db"
    provider = _provider(path, clock, busy_timeout_ms=50)
    await provider.start()
    blocker = sqlite3.connect(path, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        with pytest.raises(MemoryUnavailableError) as raised:
            await provider.add(note(), make_ctx(clock))
        assert "INSERT" not in str(raised.value) and str(tmp_path) not in str(raised.value)
        blocker.execute("ROLLBACK")
        # reads are not blocked by a writer in WAL mode, and writes resume afterwards
        await provider.add(note(), make_ctx(clock))
    finally:
        blocker.close()
        await provider.close()


_WRITER = textwrap.dedent("""
    import asyncio, sys
    from governed_memory.requests import AddRequest
    from governed_memory.clock import ManualClock
    from governed_memory.operation_context import OperationContext
    from governed_memory import Principal, Scope
    from governed_memory_native import build_native_provider

    async def main() -> None:
        clock = ManualClock()
        provider = build_native_provider({"path": sys.argv[1]}, clock)
        await provider.start()
        ctx = OperationContext(
            operation_id="child", now=clock.now(),
            principal=Principal(principal_id="svc", kind="service", tenant_id="acme",
                                permissions=["memory:admin"]))
        record = await provider.add(AddRequest(
            scope=Scope(tenant_id="acme", user_id="alice"), content="from another process",
            key="child"), ctx)
        await provider.close()
        print(record.id)

    asyncio.run(main())
""")


async def test_another_process_sees_and_makes_writes(tmp_path: Path,
                                                     clock: ManualClock) -> None:
    path = tmp_path / "memory.db"
    provider = _provider(path, clock)
    await provider.start()
    try:
        mine = await provider.add(note("from the parent"), make_ctx(clock))
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _WRITER, str(path),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(child.communicate(), timeout=60)
        assert child.returncode == 0, err.decode()
        child_id = out.decode().strip()
        ctx = make_ctx(clock)
        seen = await provider.get(GetRequest(scope=USER_SCOPE, key="child"), ctx)
        assert seen.id == child_id and seen.content == "from another process"
        page = await provider.list(ListRequest(scope=USER_SCOPE), ctx)
        assert {record.id for record in page.items} == {mine.id, child_id}
    finally:
        await provider.close()
