"""Cancellation never leaves storage in a transaction, locked, or half-written.

A unit of work runs on a storage thread, which a cancelled caller cannot stop: the
caller flags the unit and waits for the thread. These tests cancel operations at each
statement of their unit in turn and then check that every connection is back in
autocommit, that another connection can take the write lock, and that the next
operation works.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from governed_memory import MemoryRecord
from governed_memory.clock import ManualClock
from governed_memory.requests import (
    DeleteRequest,
    GetRequest,
    HistoryRequest,
    ListRequest,
    PurgeExpiredRequest,
    SearchRequest,
    UpdateRequest,
)
from governed_memory_native import NativeMemoryProvider, SqliteBackend, build_native_provider
from native_support import USER_SCOPE, make_ctx, note
from sqlite_support import cancel_on_statement, hold_write_lock, in_transaction, sqlite_backend

Operation = Callable[[], Awaitable[Any]]


def _operations(provider: NativeMemoryProvider, clock: ManualClock,
                seed: MemoryRecord) -> dict[str, Operation]:
    counter = itertools.count()

    def ctx() -> Any:
        return make_ctx(clock)

    async def add_then_hard_delete() -> None:
        record = await provider.add(note(f"doomed {next(counter)}"), ctx())
        await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=record.id, hard=True),
                              ctx())

    return {
        "list": lambda: provider.list(ListRequest(scope=USER_SCOPE), ctx()),
        "get": lambda: provider.get(GetRequest(scope=USER_SCOPE, record_id=seed.id), ctx()),
        "search": lambda: provider.search(
            SearchRequest(scopes=(USER_SCOPE,), query="green tea"), ctx()),
        "history": lambda: provider.history(
            HistoryRequest(scope=USER_SCOPE, record_id=seed.id), ctx()),
        "add": lambda: provider.add(note(f"green tea {next(counter)}", key=f"k{next(counter)}",
                                         idempotency_key=f"i{next(counter)}"), ctx()),
        "update": lambda: provider.update(
            UpdateRequest(scope=USER_SCOPE, record_id=seed.id,
                          content=f"green tea v{next(counter)}"), ctx()),
        "hard delete": add_then_hard_delete,
        "purge": lambda: provider.purge_expired(PurgeExpiredRequest(scope=USER_SCOPE), ctx()),
    }


def _write_lock_is_free(path: Path) -> bool:
    other = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:
        return False
    finally:
        other.close()


async def _assert_consistent(provider: NativeMemoryProvider, clock: ManualClock) -> None:
    """Every record has exactly the history its version says: no write half-applied."""
    ctx = make_ctx(clock)
    cursor = None
    while True:
        page = await provider.list(ListRequest(scope=USER_SCOPE, limit=100, cursor=cursor), ctx)
        for record in page.items:
            history = await provider.history(
                HistoryRequest(scope=USER_SCOPE, record_id=record.id), ctx)
            assert [v.record.version for v in history] == list(range(1, record.version + 1))
            assert history[-1].record == record
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


@pytest.mark.parametrize("storm", [False, True], ids=["once", "storm"])
@pytest.mark.parametrize("name", ["list", "get", "search", "history", "add", "update",
                                  "hard delete", "purge"])
async def test_cancel_while_awaiting_each_statement(tmp_path: Path, clock: ManualClock,
                                                    name: str, storm: bool) -> None:
    path = tmp_path / "memory.db"
    provider = build_native_provider({"path": str(path)}, clock)
    await provider.start()
    try:
        seed = await provider.add(note("green tea"), make_ctx(clock))
        operation = _operations(provider, clock, seed)[name]
        interrupted = 0
        for target in itertools.count(1):
            task = asyncio.create_task(operation())
            with (cancel_on_statement(task, target, storm=storm) as seen,
                  contextlib.suppress(asyncio.CancelledError)):
                await task
            assert not in_transaction(provider), (name, target, seen)
            assert _write_lock_is_free(path), (name, target, seen)
            await _assert_consistent(provider, clock)
            await provider.add(note("still writable"), make_ctx(clock))
            if not task.cancelled():
                break  # the operation ran past its last statement: every point was hit
            interrupted += 1
            assert target < 100, "the operation never finished"
        assert interrupted >= 1  # at least one statement inside the unit
    finally:
        await provider.close()


@pytest.mark.parametrize("kind", ["read", "write"])
async def test_cancel_after_random_steps_leaves_storage_usable(
        provider: NativeMemoryProvider, clock: ManualClock, backend: str, kind: str) -> None:
    seed = await provider.add(note("green tea"), make_ctx(clock))
    operations = _operations(provider, clock, seed)
    names = (["list", "get", "search", "history"] if kind == "read"
             else ["add", "update", "hard delete", "purge"])
    rng = random.Random(5)
    outcomes = {"cancelled": 0, "finished": 0}
    for step in range(120):
        task = asyncio.create_task(operations[names[step % len(names)]]())
        for _ in range(rng.randrange(0, 12)):
            await asyncio.sleep(0)
        if rng.random() < 0.3:
            await asyncio.sleep(rng.random() / 1000)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        outcomes["cancelled" if task.cancelled() else "finished"] += 1
        if backend == "sqlite":
            # Background writes (a search's batched snapshot, a lexical merge) may hold
            # the writer's transaction right now by design: let them finish first.
            await provider.flush_snapshots()
            if provider.lexical_merger is not None:
                await provider.lexical_merger.flush()
            assert not in_transaction(provider)
        await provider.list(ListRequest(scope=USER_SCOPE, limit=1), make_ctx(clock))
    assert outcomes["cancelled"] > 0
    await _assert_consistent(provider, clock)
    await provider.add(note("still writable"), make_ctx(clock))


@pytest.mark.parametrize("busy_timeout_ms", [5_000, 100], ids=["lock-freed-in-time",
                                                               "busy-timeout-first"])
async def test_lock_held_past_the_callers_timeout(tmp_path: Path, clock: ManualClock,
                                                  busy_timeout_ms: int) -> None:
    path = tmp_path / "memory.db"
    provider = build_native_provider({"path": str(path), "busy_timeout_ms": busy_timeout_ms},
                                     clock)
    await provider.start()
    try:
        await provider.add(note("first"), make_ctx(clock))
        holder = hold_write_lock(path, 0.4)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await provider.add(note("while locked"), make_ctx(clock))
        await asyncio.to_thread(holder.join)
        assert not in_transaction(provider)
        assert _write_lock_is_free(path)
        added = await provider.add(note("after the lock"), make_ctx(clock))
        page = await provider.list(ListRequest(scope=USER_SCOPE), make_ctx(clock))
        assert added.id in {record.id for record in page.items}
        await _assert_consistent(provider, clock)
    finally:
        await provider.close()


async def test_a_connection_stuck_in_a_transaction_is_replaced(
        tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "memory.db"
    provider = build_native_provider({"path": str(path)}, clock)
    await provider.start()
    try:
        backend = sqlite_backend(provider)
        first = backend._writer_conn

        def rollback_fails(self: SqliteBackend, conn: object) -> None:
            return None  # as if ROLLBACK itself had failed

        monkeypatch.setattr(SqliteBackend, "_roll_back", rollback_fails)
        task = asyncio.create_task(provider.add(note("cancelled"), make_ctx(clock)))
        with (cancel_on_statement(task, 2),  # inside the transaction
              contextlib.suppress(asyncio.CancelledError)):
            await task
        monkeypatch.undo()
        assert backend._writer_conn is None  # discarded, and closing it released its lock
        assert _write_lock_is_free(path)
        added = await provider.add(note("on a fresh connection"), make_ctx(clock))
        assert backend._writer_conn is not None and backend._writer_conn is not first
        page = await provider.list(ListRequest(scope=USER_SCOPE), make_ctx(clock))
        assert [record.id for record in page.items] == [added.id]
    finally:
        await provider.close()
