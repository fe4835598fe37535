"""The SQLite backend: the embedded, durable default.

Settings and why:

- ``journal_mode=WAL``: readers never block the writer and other processes can read
  while one writes, which is what ``multi_process=True`` promises;
- ``synchronous=FULL``: in WAL mode ``NORMAL`` may lose the last commits on power loss.
  Memory writes arrive at human or agent pace, so an fsync per commit is cheap, and
  ``durable=True`` should mean a committed write survives the machine going down;
- ``busy_timeout``: a writer waits for another process's lock instead of failing at once;
  past the timeout the operation fails as unavailable (safe to retry later);
- ``BEGIN IMMEDIATE`` for writes: the write lock is taken before the first read, so a
  read-check-write (compare-and-set, key ownership) cannot be raced by another process;
- ``foreign_keys=ON``: versions cannot outlive their record by accident;
- ``secure_delete=ON``: erased rows and freed pages are overwritten with zeros, so a
  hard delete or a user erasure leaves nothing in the file's free space. Some builds
  (Debian's) default to it; this makes it true on every build.

One connection serves the provider, guarded by an asyncio lock: aiosqlite would
otherwise interleave statements of concurrent tasks inside one transaction.

Cancellation: aiosqlite runs every statement on its own worker thread, so cancelling
the awaiting task does not stop a statement that was already queued (a ``BEGIN`` still
opens its transaction after the caller is gone). A transaction is therefore always
ended by queueing ``ROLLBACK`` (or the read's ``COMMIT``) behind whatever is in flight
and waiting for it under ``asyncio.shield``, even while the task is being cancelled;
the lock is released only once the connection is back in autocommit mode. A cancelled
operation thus takes as long as its in-flight statement (a ``BEGIN IMMEDIATE`` waiting
for another process's lock waits at most ``busy_timeout``). A connection that still
holds a transaction after that is closed and replaced by the next operation, rather
than left to wedge every later call and lock out other processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiosqlite
from governed_memory.errors import MemoryConfigurationError, MemoryUnavailableError
from governed_memory.records import Capabilities

from governed_memory_native.port import ReadTransaction, WriteTransaction
from governed_memory_native.sqlite_errors import logger, translated
from governed_memory_native.sqlite_schema import (
    LATEST_VERSION,
    current_version,
    migrate,
    register_functions,
)
from governed_memory_native.sqlite_transaction import SqliteTransaction


class SqliteBackend:
    name = "sqlite"

    def __init__(self, path: Path, *, busy_timeout_ms: int) -> None:
        self._path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._conn: aiosqlite.Connection | None = None
        self._started = False
        """Between ``open()`` and ``close()``: a discarded connection is replaced lazily."""
        self._lock = asyncio.Lock()

    @property
    def path(self) -> Path:
        return self._path

    def capabilities(self) -> Capabilities:
        return Capabilities(durable=True, transactional=True, multi_process=True, usage=True,
                            event_outbox=True)

    async def open(self) -> None:
        async with self._lock:
            if self._conn is None:
                self._conn = await self._connect()
            self._started = True

    async def _connect(self) -> aiosqlite.Connection:
        try:
            await asyncio.to_thread(self._path.parent.mkdir, parents=True, exist_ok=True)
        except OSError:
            raise MemoryConfigurationError(
                "path: the database directory cannot be created"
            ) from None
        with translated("open"):
            conn = await aiosqlite.connect(
                self._path, isolation_level=None, timeout=self._busy_timeout_ms / 1000
            )
        try:
            with translated("open"):
                await self._configure(conn)
                await migrate(conn, applied_at=time.time())
        except BaseException:
            await conn.close()
            raise
        return conn

    async def _configure(self, conn: aiosqlite.Connection) -> None:
        conn.row_factory = sqlite3.Row
        await conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms:d}")
        async with conn.execute("PRAGMA journal_mode = WAL") as cursor:
            row = await cursor.fetchone()
        if row is None or str(row[0]).lower() != "wal":
            raise MemoryConfigurationError("path: the database cannot use WAL journaling")
        await conn.execute("PRAGMA synchronous = FULL")
        await conn.execute("PRAGMA foreign_keys = ON")
        await conn.execute("PRAGMA secure_delete = ON")
        await register_functions(conn)

    async def close(self) -> None:
        async with self._lock:
            self._started = False
            conn, self._conn = self._conn, None
            if conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    await conn.close()

    async def check(self) -> str:
        async with self._lock:
            conn = await self._connection()
            with translated("health check"):
                async with conn.execute("SELECT 1") as cursor:
                    await cursor.fetchone()
                version = await current_version(conn)
        if version != LATEST_VERSION:
            return f"sqlite schema v{version}, expected v{LATEST_VERSION}"
        return f"sqlite schema v{version}, wal"

    @asynccontextmanager
    async def reading(self) -> AsyncIterator[ReadTransaction]:
        async with self._lock:
            conn = await self._connection()
            try:
                with translated("read"):
                    await conn.execute("BEGIN")
                yield SqliteTransaction(conn)
            except BaseException:
                await self._finish(conn, "ROLLBACK")
                raise
            # Nothing was written: a failed COMMIT is rolled back, never reported.
            await self._finish(conn, "COMMIT")

    @asynccontextmanager
    async def writing(self) -> AsyncIterator[WriteTransaction]:
        async with self._lock:
            conn = await self._connection()
            try:
                with translated("write"):
                    await conn.execute("BEGIN IMMEDIATE")
                transaction = SqliteTransaction(conn)
                yield transaction
                await transaction.seal()
                with translated("commit"):
                    await conn.execute("COMMIT")
            except BaseException:
                # Also after a failed or interrupted COMMIT: if the COMMIT did run, the
                # ROLLBACK queued behind it finds no transaction and changes nothing.
                await self._finish(conn, "ROLLBACK")
                raise

    async def _finish(self, conn: aiosqlite.Connection, statement: str) -> None:
        """End the transaction and wait until it has ended, even while being cancelled.

        The ending runs as its own task behind ``asyncio.shield``: a cancellation that
        arrives meanwhile is held back until the connection is settled (so the lock is
        never released over an open transaction), then re-raised.
        """
        settling = asyncio.ensure_future(self._settle(conn, statement))
        interrupted = False
        while not settling.done():
            try:
                await asyncio.shield(settling)
            except asyncio.CancelledError:
                interrupted = True
        if interrupted or settling.cancelled():
            raise asyncio.CancelledError
        settling.result()

    async def _settle(self, conn: aiosqlite.Connection, statement: str) -> None:
        """Run ``statement``, fall back to ROLLBACK, and insist on autocommit afterwards."""
        if not await self._end(conn, statement) and statement != "ROLLBACK":
            await self._end(conn, "ROLLBACK")
        if not _in_autocommit(conn):
            logger.warning("sqlite connection still in a transaction after %s; replacing it",
                           statement.lower())
            await self._discard(conn)

    async def _end(self, conn: aiosqlite.Connection, statement: str) -> bool:
        """Run COMMIT or ROLLBACK on a path that must not raise; ``False`` if it failed.

        ROLLBACK after a BEGIN that never ran fails harmlessly ("no transaction").
        """
        try:
            await conn.execute(statement)
        except Exception:
            logger.debug("sqlite %s failed", statement.lower(), exc_info=True)
            return False
        return True

    async def _discard(self, conn: aiosqlite.Connection) -> None:
        """Close a connection that cannot be trusted; closing releases its locks."""
        if self._conn is conn:
            self._conn = None
        try:
            await conn.close()
        except Exception:
            logger.debug("closing a discarded sqlite connection failed", exc_info=True)

    async def _connection(self) -> aiosqlite.Connection:
        """The open connection; reconnects if the last one had to be discarded."""
        if self._conn is None:
            if not self._started:
                raise MemoryUnavailableError("the sqlite backend is not open")
            self._conn = await self._connect()
        return self._conn


def _in_autocommit(conn: aiosqlite.Connection) -> bool:
    try:
        return not conn.in_transaction
    except Exception:  # the connection is closed or broken: not usable either way
        return False
