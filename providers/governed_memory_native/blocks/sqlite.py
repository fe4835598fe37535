"""The memory-blocks tier on SQLite: block versions in an embedded, durable file.

Same settings as the turn store and for the same reasons (WAL, ``synchronous=FULL``,
``BEGIN IMMEDIATE`` for writes, a busy timeout): a written version survives a crash once
``write`` returns, and ``BEGIN IMMEDIATE`` takes the file's write lock before the
newest version is read, so two processes writing one block compare against the same
truth and exactly one of them gets each version number.

Config: ``path`` (the database file; required), ``busy_timeout_ms`` (default 5000).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import aiosqlite
from governed_memory.clock import Clock
from governed_memory.scope import Scope
from governed_memory.tiers.blocks import BlockVersion, stale

from governed_memory_native.blocks.rows import COLUMNS, INSERTED, TABLE, decode, distinct, encode
from governed_memory_native.sqlite.errors import translated
from governed_memory_native.sqlite.store_file import SqliteStoreFile, file_config, row_mapping

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
        self._file = SqliteStoreFile(path, SCHEMA, what="block",
                                     busy_timeout_ms=busy_timeout_ms)

    async def start(self) -> None:
        await self._file.start()

    async def close(self) -> None:
        await self._file.close()


    async def current(self, scope: Scope, names: Sequence[str]) -> Mapping[str, BlockVersion]:
        wanted = distinct(names)
        if not wanted:
            return {}
        async with self._file.tx("current", write=False) as conn:
            with translated("current"):
                rows = await conn.execute_fetchall(
                    f"{_SELECT} AS v WHERE scope_hash = ? "
                    f"AND name IN ({', '.join('?' for _ in wanted)}) "
                    f"AND version = (SELECT max(version) FROM {TABLE} AS n "
                    "WHERE n.scope_hash = v.scope_hash AND n.name = v.name)",
                    (scope.scope_hash, *wanted))
        found = {row["name"]: decode(row_mapping(row)) for row in rows}
        return {name: found[name] for name in wanted if name in found}

    async def write(self, scope: Scope, name: str, value: str, *, expected_version: int,
                    edit: str, now: float) -> BlockVersion:
        async with self._file.tx("write", write=True) as conn:
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
        async with self._file.tx("history", write=False) as conn:
            with translated("history"):
                rows = await conn.execute_fetchall(
                    f"{_SELECT} WHERE scope_hash = ? AND name = ?{older} "
                    "ORDER BY version DESC LIMIT ?",
                    (scope.scope_hash, name, *bounds, limit))
        return tuple(decode(row_mapping(row)) for row in rows)

    async def delete_user(self, tenant_id: str, user_id: str) -> int:
        async with self._file.tx("delete_user", write=True) as conn:
            with translated("delete_user"):
                cursor = await conn.execute(
                    f"DELETE FROM {TABLE} WHERE tenant_id = ? AND user_id = ?",
                    (tenant_id, user_id))
                return int(cursor.rowcount)


async def _newest(conn: aiosqlite.Connection, scope: Scope, name: str) -> int:
    rows = await conn.execute_fetchall(_NEWEST, (scope.scope_hash, name))
    return int(next(iter(rows))[0])




def build_sqlite_block_store(config: Mapping[str, Any], clock: Clock) -> SqliteBlockStore:
    path, timeout = file_config(config, "block")
    return SqliteBlockStore(path, busy_timeout_ms=timeout)
