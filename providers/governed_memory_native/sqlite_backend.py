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
- ``foreign_keys=ON``: versions cannot outlive their record by accident.

One connection serves the provider, guarded by an asyncio lock: aiosqlite would
otherwise interleave statements of concurrent tasks inside one transaction.
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
from governed_memory_native.sqlite_schema import LATEST_VERSION, current_version, migrate
from governed_memory_native.sqlite_transaction import SqliteTransaction


class SqliteBackend:
    name = "sqlite"

    def __init__(self, path: Path, *, busy_timeout_ms: int) -> None:
        self._path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._conn: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()

    @property
    def path(self) -> Path:
        return self._path

    def capabilities(self) -> Capabilities:
        return Capabilities(durable=True, transactional=True, multi_process=True)

    async def open(self) -> None:
        async with self._lock:
            if self._conn is not None:
                return
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
            self._conn = conn

    async def _configure(self, conn: aiosqlite.Connection) -> None:
        conn.row_factory = sqlite3.Row
        await conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms:d}")
        async with conn.execute("PRAGMA journal_mode = WAL") as cursor:
            row = await cursor.fetchone()
        if row is None or str(row[0]).lower() != "wal":
            raise MemoryConfigurationError("path: the database cannot use WAL journaling")
        await conn.execute("PRAGMA synchronous = FULL")
        await conn.execute("PRAGMA foreign_keys = ON")

    async def close(self) -> None:
        async with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    await conn.close()

    async def check(self) -> str:
        async with self._lock:
            conn = self._require_conn()
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
            conn = self._require_conn()
            with translated("read"):
                await conn.execute("BEGIN")
            try:
                yield SqliteTransaction(conn)
            finally:
                await self._end(conn, "COMMIT")

    @asynccontextmanager
    async def writing(self) -> AsyncIterator[WriteTransaction]:
        async with self._lock:
            conn = self._require_conn()
            with translated("write"):
                await conn.execute("BEGIN IMMEDIATE")
            try:
                yield SqliteTransaction(conn)
            except BaseException:
                await self._end(conn, "ROLLBACK")
                raise
            try:
                with translated("commit"):
                    await conn.execute("COMMIT")
            except BaseException:
                await self._end(conn, "ROLLBACK")
                raise

    async def _end(self, conn: aiosqlite.Connection, statement: str) -> None:
        """Finish a transaction on a path that is already failing or read-only."""
        try:
            await conn.execute(statement)
        except sqlite3.Error:
            logger.debug("sqlite %s failed", statement.lower(), exc_info=True)

    def _require_conn(self) -> aiosqlite.Connection:
        if self._conn is None:
            raise MemoryUnavailableError("the sqlite backend is not open")
        return self._conn
