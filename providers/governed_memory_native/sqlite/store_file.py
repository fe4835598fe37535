"""One embedded SQLite file behind a tier store (the conversation turns, the memory
blocks): opened once, with the native backend's settings, and used one transaction at
a time.

The settings are the provider's and for the same reasons: WAL, ``synchronous=FULL``
(what ``write`` returned survives a crash), ``secure_delete`` (an erased row leaves no
copy in free pages), ``BEGIN IMMEDIATE`` for writes (the file's write lock is taken
before anything is read, so two processes writing compare against the same truth) and
a busy timeout. A store reads its config through :func:`file_config`, so every tier
store on SQLite is configured the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite
from governed_memory.errors import MemoryConfigurationError, MemoryUnavailableError

from governed_memory_native.sqlite.errors import translated

__all__ = ["SqliteStoreFile", "file_config", "row_mapping"]


class SqliteStoreFile:
    """The connection of one store, its schema created on start."""

    def __init__(self, path: Path, schema: Sequence[str], *, what: str,
                 busy_timeout_ms: int = 5000) -> None:
        self.path = path
        self._schema = tuple(schema)
        self._what = what
        self._busy_timeout_ms = busy_timeout_ms
        self._conn: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()

    async def start(self) -> None:
        async with self._lock:
            if self._conn is not None:
                return
            try:
                await asyncio.to_thread(self.path.parent.mkdir, parents=True, exist_ok=True)
            except OSError:
                raise MemoryConfigurationError(
                    f"path: the {self._what} database directory cannot be created") from None
            with translated("open"):
                conn = await aiosqlite.connect(self.path, isolation_level=None,
                                               timeout=self._busy_timeout_ms / 1000)
            try:
                with translated("open"):
                    conn.row_factory = sqlite3.Row
                    await conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms:d}")
                    await conn.execute("PRAGMA journal_mode = WAL")
                    await conn.execute("PRAGMA synchronous = FULL")
                    await conn.execute("PRAGMA secure_delete = ON")
                    await conn.execute("BEGIN IMMEDIATE")
                    for statement in self._schema:
                        await conn.execute(statement)
                    await conn.execute("COMMIT")
            except BaseException:
                await conn.close()
                raise
            self._conn = conn

    async def close(self) -> None:
        async with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    await conn.close()

    @asynccontextmanager
    async def tx(self, action: str, *, write: bool) -> AsyncIterator[aiosqlite.Connection]:
        """One transaction (``BEGIN IMMEDIATE`` to write), rolled back on any error."""
        async with self._lock:
            conn = self._conn
            if conn is None:
                raise MemoryUnavailableError(f"the {self._what} store is not started")
            with translated(action):
                await conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield conn
            except BaseException:
                # Queued behind anything in flight, and awaited even when cancelled.
                await asyncio.shield(_rollback(conn))
                raise
            with translated(action):
                await asyncio.shield(conn.execute("COMMIT"))


async def _rollback(conn: aiosqlite.Connection) -> None:
    with contextlib.suppress(sqlite3.Error):
        await conn.execute("ROLLBACK")


def row_mapping(row: Any) -> Mapping[str, Any]:
    return {key: row[key] for key in row.keys()}  # noqa: SIM118 - sqlite3.Row


def file_config(config: Mapping[str, Any], kind: str) -> tuple[Path, int]:
    """``path`` (required) and ``busy_timeout_ms`` (default 5000); any other key is
    refused, naming the store (``kind``: ``turn``, ``block``)."""
    unknown = sorted(set(config) - {"path", "busy_timeout_ms"})
    if unknown:
        raise MemoryConfigurationError(f"{kind} store 'sqlite': unknown key(s) {unknown}")
    path = config.get("path")
    if not isinstance(path, str | Path) or not str(path).strip():
        raise MemoryConfigurationError(f"path: the sqlite {kind} store needs a database path")
    timeout = config.get("busy_timeout_ms", 5000)
    if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 0:
        raise MemoryConfigurationError("busy_timeout_ms: must be a non-negative integer")
    return Path(path), timeout
