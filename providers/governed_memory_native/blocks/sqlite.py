"""The memory-blocks tier on SQLite: block versions in an embedded, durable file.

Same settings as the turn store and for the same reasons (WAL, ``synchronous=FULL``,
``BEGIN IMMEDIATE`` for writes, a busy timeout): a written version survives a crash once
``write`` returns, and ``BEGIN IMMEDIATE`` takes the file's write lock before the
newest version is read, so two processes writing one block compare against the same
truth and exactly one of them gets each version number.

Config: ``path`` (the database file; required), ``busy_timeout_ms`` (default 5000).
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
from governed_memory.clock import Clock
from governed_memory.errors import MemoryConfigurationError, MemoryUnavailableError
from governed_memory.scope import Scope
from governed_memory.tiers.blocks import BlockVersion, stale

from governed_memory_native.blocks.rows import COLUMNS, INSERTED, TABLE, decode, distinct, encode
from governed_memory_native.sqlite.errors import translated

SCHEMA = (
    f"""CREATE TABLE IF NOT EXISTS {TABLE} (
        scope_hash TEXT NOT NULL,
        name TEXT NOT NULL,
        version INTEGER NOT NULL,
        tenant_id TEXT NOT NULL,
        user_id TEXT,
        value TEXT NOT NULL,
        edit TEXT NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (scope_hash, name, version)
    )""",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_user ON {TABLE} (tenant_id, user_id)",
)
_SELECT = f"SELECT {', '.join(COLUMNS)} FROM {TABLE}"
_NEWEST = f"SELECT coalesce(max(version), 0) FROM {TABLE} WHERE scope_hash = ? AND name = ?"
_INSERT = (f"INSERT INTO {TABLE} ({', '.join(INSERTED)}) "
           f"VALUES ({', '.join('?' for _ in INSERTED)})")


class SqliteBlockStore:
    name = "sqlite"
    durable = True
    revision = "1"

    def __init__(self, path: Path, *, busy_timeout_ms: int = 5000) -> None:
        self.path = path
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
                    "path: the block database directory cannot be created") from None
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
                    for statement in SCHEMA:
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
    async def _tx(self, action: str, *, write: bool) -> AsyncIterator[aiosqlite.Connection]:
        async with self._lock:
            conn = self._conn
            if conn is None:
                raise MemoryUnavailableError("the block store is not started")
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

    async def current(self, scope: Scope, names: Sequence[str]) -> Mapping[str, BlockVersion]:
        wanted = distinct(names)
        if not wanted:
            return {}
        async with self._tx("current", write=False) as conn:
            with translated("current"):
                rows = await conn.execute_fetchall(
                    f"{_SELECT} AS v WHERE scope_hash = ? "
                    f"AND name IN ({', '.join('?' for _ in wanted)}) "
                    f"AND version = (SELECT max(version) FROM {TABLE} AS n "
                    "WHERE n.scope_hash = v.scope_hash AND n.name = v.name)",
                    (scope.scope_hash, *wanted))
        found = {row["name"]: decode(_mapping(row)) for row in rows}
        return {name: found[name] for name in wanted if name in found}

    async def write(self, scope: Scope, name: str, value: str, *, expected_version: int,
                    edit: str, now: float) -> BlockVersion:
        async with self._tx("write", write=True) as conn:
            with translated("write"):
                current = await _newest(conn, scope, name)
                if current != expected_version:
                    raise stale(name, expected_version, current)
                written = BlockVersion(scope.scope_hash, name, current + 1, value, edit, now)
                try:
                    await conn.execute(_INSERT, encode(scope, written))
                except sqlite3.IntegrityError:
                    # Unreachable while every writer takes BEGIN IMMEDIATE; a writer that
                    # does not still meets the primary key, and loses the same way.
                    raise stale(name, expected_version,
                                await _newest(conn, scope, name)) from None
        return written

    async def history(self, scope: Scope, name: str, *, before_version: int | None,
                      limit: int) -> tuple[BlockVersion, ...]:
        if limit <= 0:
            return ()
        older = "" if before_version is None else " AND version < ?"
        bounds = () if before_version is None else (before_version,)
        async with self._tx("history", write=False) as conn:
            with translated("history"):
                rows = await conn.execute_fetchall(
                    f"{_SELECT} WHERE scope_hash = ? AND name = ?{older} "
                    "ORDER BY version DESC LIMIT ?",
                    (scope.scope_hash, name, *bounds, limit))
        return tuple(decode(_mapping(row)) for row in rows)

    async def delete_user(self, tenant_id: str, user_id: str) -> int:
        async with self._tx("delete_user", write=True) as conn:
            with translated("delete_user"):
                cursor = await conn.execute(
                    f"DELETE FROM {TABLE} WHERE tenant_id = ? AND user_id = ?",
                    (tenant_id, user_id))
                return int(cursor.rowcount)


async def _newest(conn: aiosqlite.Connection, scope: Scope, name: str) -> int:
    rows = await conn.execute_fetchall(_NEWEST, (scope.scope_hash, name))
    return int(next(iter(rows))[0])


async def _rollback(conn: aiosqlite.Connection) -> None:
    with contextlib.suppress(sqlite3.Error):
        await conn.execute("ROLLBACK")


def _mapping(row: Any) -> Mapping[str, Any]:
    return {key: row[key] for key in row.keys()}  # noqa: SIM118 - sqlite3.Row


def build_sqlite_block_store(config: Mapping[str, Any], clock: Clock) -> SqliteBlockStore:
    unknown = sorted(set(config) - {"path", "busy_timeout_ms"})
    if unknown:
        raise MemoryConfigurationError(f"block store 'sqlite': unknown key(s) {unknown}")
    path = config.get("path")
    if not isinstance(path, str | Path) or not str(path).strip():
        raise MemoryConfigurationError("path: the sqlite block store needs a database path")
    timeout = config.get("busy_timeout_ms", 5000)
    if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 0:
        raise MemoryConfigurationError("busy_timeout_ms: must be a non-negative integer")
    return SqliteBlockStore(Path(path), busy_timeout_ms=timeout)
