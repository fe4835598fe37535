"""Faults the SQLite tests inject from outside the provider, and what they look for after.

A cancellation is only proven harmless if it lands at every statement of a unit in
turn, and a lock only if another connection really holds it; the cancellation, outbox
and replay tests make those claims about different operations, so they share the
injection (:func:`cancel_on_statement`, :func:`hold_write_lock`) and the check for a
connection left inside a transaction (:func:`in_transaction`).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from governed_memory_native import NativeMemoryProvider, SqliteBackend
from governed_memory_native.sqlite.transaction import SqliteTransaction


def sqlite_backend(provider: NativeMemoryProvider) -> SqliteBackend:
    backend = provider.backend
    assert isinstance(backend, SqliteBackend)
    return backend


def in_transaction(provider: NativeMemoryProvider) -> bool:
    """Whether any of the backend's connections is still inside a transaction."""
    backend = sqlite_backend(provider)
    conns = [backend._writer_conn, backend._point_conn, *backend._reader_conns]
    return any(conn is not None and conn.in_transaction for conn in conns)


@contextlib.contextmanager
def cancel_on_statement(victim: asyncio.Task[Any], target: int, *,
                        storm: bool = False) -> Iterator[list[str]]:
    """Cancel ``victim`` when its unit of work reaches its ``target``-th statement
    (1-based); the statement runs only after the caller has flagged the unit, as if
    the cancellation had arrived while it was in flight.

    With ``storm`` it is cancelled again on every later statement, so the backend has
    to hold the cancellation back until its thread is done with the unit.
    """
    loop = asyncio.get_running_loop()
    caller = threading.get_ident()
    fetch, change = SqliteTransaction._fetch, SqliteTransaction._change
    seen: list[str] = []

    def reached(tx: SqliteTransaction, sql: str) -> None:
        seen.append(sql.split(None, 1)[0].upper())
        if len(seen) != target and not (storm and len(seen) > target):
            return
        if threading.get_ident() == caller:  # a point read on the caller's thread
            victim.cancel()
            return
        loop.call_soon_threadsafe(victim.cancel)
        if len(seen) == target and tx._cancel is not None:
            assert tx._cancel.wait(5), "the cancelled caller never flagged its unit"

    def patched_fetch(self: SqliteTransaction, sql: str, params: Any) -> Any:
        reached(self, sql)
        return fetch(self, sql, params)

    def patched_change(self: SqliteTransaction, sql: str, params: Any) -> Any:
        reached(self, sql)
        return change(self, sql, params)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SqliteTransaction, "_fetch", patched_fetch)
        patch.setattr(SqliteTransaction, "_change", patched_change)
        yield seen


def hold_write_lock(path: Path, seconds: float) -> threading.Thread:
    """Another connection (as another process would) holding the write lock a while."""
    locked = threading.Event()

    def hold() -> None:
        blocker = sqlite3.connect(path, isolation_level=None)
        try:
            blocker.execute("BEGIN IMMEDIATE")
            locked.set()
            threading.Event().wait(seconds)
            blocker.execute("COMMIT")
        finally:
            blocker.close()

    thread = threading.Thread(target=hold)
    thread.start()
    assert locked.wait(10)
    return thread
