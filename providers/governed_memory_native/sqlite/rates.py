"""Write-rate windows in a SQLite file beside the memory database: shared by every
process that opens the same database, without touching its write lock.

Worker processes on one host share the memory database file, so a window kept beside
it is counted by all of them. It lives in a sidecar file of its own (``<db>-rates``),
never in the memory database: an admit runs on every write, before the write, and would
otherwise queue for the memory writers' lock (and they for it). The sidecar is WAL with
``synchronous = OFF``: windows are recent counts, not records, and losing the last few
events to a power cut only lets a few writes more through in the next minute.

An admit is one ``BEGIN IMMEDIATE`` transaction, so admits from every process run one at
a time and a window never holds more than its limit; the wait for the sidecar's lock is
bounded (the provider's ``busy_timeout_ms``, at least :data:`MIN_BUSY_MS`), and a wait
that runs out raises, which denies the write. Per window a row keeps how many events it
holds (``live``), so an admit costs a few index seeks whatever the limit: expired events
are deleted and subtracted, and the count is compared with the limit.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Final

from governed_memory.rates import SWEEP_EVERY, RateLimit, check_limits, stored_key

from governed_memory_native.sqlite.errors import translated

MIN_BUSY_MS: Final = 100
"""The shortest wait for the sidecar's lock: an admit holds it for microseconds, so even
a provider configured to try its locks once (``busy_timeout_ms = 0``) waits this long
rather than refuse a write because another worker was admitting one."""

SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS rate_windows ("
    " key TEXT PRIMARY KEY, period_s REAL NOT NULL, live INTEGER NOT NULL,"
    " last_at REAL NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS rate_events (key TEXT NOT NULL, at REAL NOT NULL)",
    "CREATE INDEX IF NOT EXISTS rate_events_key_at ON rate_events (key, at)",
)


def sidecar_path(database: Path) -> Path:
    """Where the windows of the database at ``database`` live."""
    return database.with_name(database.name + "-rates")


class SqliteRateWindows:
    """``governed_memory.rates.RateWindows`` in a sidecar SQLite file."""

    shared = True
    """Every process opening the same database file counts into the same windows."""

    def __init__(self, path: Path, *, busy_timeout_ms: int) -> None:
        self.path = path
        self.busy_timeout_ms = max(busy_timeout_ms, MIN_BUSY_MS)
        self._executor: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None
        self._admits = 0

    async def admit(self, limits: Sequence[RateLimit], now: float) -> RateLimit | None:
        check_limits(limits, now)
        if not limits:
            return None
        if self._executor is None:
            # One thread owns the connection; admits in this process queue for it, as
            # they would for the file's lock.
            self._executor = ThreadPoolExecutor(max_workers=1,
                                                thread_name_prefix="gm-rates-sqlite")
        self._admits += 1
        sweep = self._admits % SWEEP_EVERY == 0
        loop = asyncio.get_running_loop()
        index = await loop.run_in_executor(self._executor, self._admit, tuple(limits), now,
                                           sweep)
        return None if index is None else limits[index]

    def _admit(self, limits: tuple[RateLimit, ...], now: float, sweep: bool) -> int | None:
        with translated("rate window"):
            conn = self._connect()
            conn.execute("BEGIN IMMEDIATE")
            try:
                refused = _count(conn, limits, now)
                if sweep:
                    _sweep(conn, now)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return refused

    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, isolation_level=None,
                               timeout=self.busy_timeout_ms / 1000, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {self.busy_timeout_ms:d}")
            self._use_wal(conn)
            conn.execute("PRAGMA synchronous = OFF")
            conn.execute("BEGIN IMMEDIATE")
            for statement in SCHEMA:
                conn.execute(statement)
            conn.execute("COMMIT")
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn

    def _use_wal(self, conn: sqlite3.Connection) -> None:
        """Switch the file to WAL. SQLite answers a journal-mode change that meets
        another connection's lock with "locked" at once, without its busy handler (two
        processes opening a new file together), so it is retried within the wait."""
        deadline = time.monotonic() + self.busy_timeout_ms / 1000
        while True:
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.005)

    async def close(self) -> None:
        executor, self._executor = self._executor, None
        if executor is None:
            return
        try:
            await asyncio.get_running_loop().run_in_executor(executor, self._disconnect)
        finally:
            executor.shutdown(wait=False)

    def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


def _count(conn: sqlite3.Connection, limits: tuple[RateLimit, ...], now: float) -> int | None:
    """Inside the write lock: the index of the first full window, or ``None`` after
    counting one event in every window."""
    keys = [stored_key(limit.key) for limit in limits]
    for index, (key, limit) in enumerate(zip(keys, limits, strict=True)):
        row = conn.execute("SELECT live FROM rate_windows WHERE key = ?", (key,)).fetchone()
        if row is None:
            continue
        removed = conn.execute("DELETE FROM rate_events WHERE key = ? AND at <= ?",
                               (key, now - limit.period_s)).rowcount
        live = int(row[0]) - removed
        if removed:
            conn.execute("UPDATE rate_windows SET live = ? WHERE key = ?", (live, key))
        if live >= limit.limit:
            return index
    for key, limit in zip(keys, limits, strict=True):
        conn.execute("INSERT INTO rate_events (key, at) VALUES (?, ?)", (key, now))
        conn.execute(
            "INSERT INTO rate_windows (key, period_s, live, last_at) VALUES (?, ?, 1, ?)"
            " ON CONFLICT (key) DO UPDATE SET live = live + 1, period_s = excluded.period_s,"
            " last_at = max(last_at, excluded.last_at)", (key, limit.period_s, now))
    return None


def _sweep(conn: sqlite3.Connection, now: float) -> None:
    """Forget windows idle for a whole period (their events have all expired)."""
    conn.execute("DELETE FROM rate_events WHERE key IN (SELECT key FROM rate_windows"
                 " WHERE last_at <= ? - period_s)", (now,))
    conn.execute("DELETE FROM rate_windows WHERE last_at <= ? - period_s", (now,))
