"""The conversation tier on SQLite: turns per session in an embedded, durable file.

Same settings as the native provider's SQLite backend and for the same reasons (WAL,
``synchronous=FULL``, ``BEGIN IMMEDIATE`` for writes, a busy timeout): an appended
turn survives a crash once ``append`` returns, and two processes appending to one
session get distinct, gap-free sequence numbers. A session's last sequence number is
kept in its own row, so numbers keep counting after ``clear`` and a summary frontier
from before the clear can never cover a later turn.

Config: ``path`` (the database file; required), ``busy_timeout_ms`` (default 5000).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from governed_memory.clock import Clock
from governed_memory.scope import Scope
from governed_memory.tiers.turns import Turn, TurnDraft, new_turn, replayed

from governed_memory_native.sqlite.errors import translated
from governed_memory_native.sqlite.store_file import SqliteStoreFile, file_config, row_mapping
from governed_memory_native.turns.rows import COLUMNS, decode, encode

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS conversation_sessions (
        scope_hash TEXT PRIMARY KEY,
        tenant_id TEXT NOT NULL,
        user_id TEXT,
        last_seq INTEGER NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS conversation_turns (
        scope_hash TEXT NOT NULL,
        seq INTEGER NOT NULL,
        turn_id TEXT NOT NULL,
        tenant_id TEXT NOT NULL,
        user_id TEXT,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        name TEXT,
        tool_call_id TEXT,
        tool_calls TEXT NOT NULL,
        metadata TEXT NOT NULL,
        created_at REAL NOT NULL,
        PRIMARY KEY (scope_hash, seq)
    ) WITHOUT ROWID""",
    "CREATE UNIQUE INDEX IF NOT EXISTS conversation_turns_id "
    "ON conversation_turns (scope_hash, turn_id)",
    "CREATE INDEX IF NOT EXISTS conversation_turns_user "
    "ON conversation_turns (tenant_id, user_id)",
    "CREATE INDEX IF NOT EXISTS conversation_sessions_user "
    "ON conversation_sessions (tenant_id, user_id)",
)
_SELECT = "SELECT " + ", ".join(COLUMNS) + " FROM conversation_turns"


class SqliteTurnStore:
    name = "sqlite"
    durable = True
    revision = "1"

    def __init__(self, path: Path, *, busy_timeout_ms: int = 5000) -> None:
        self.path = path
        self._file = SqliteStoreFile(path, SCHEMA, what="turn",
                                     busy_timeout_ms=busy_timeout_ms)

    async def start(self) -> None:
        await self._file.start()

    async def close(self) -> None:
        await self._file.close()


    async def append(self, scope: Scope, draft: TurnDraft, now: float) -> Turn:
        draft.validate()
        async with self._file.tx("append", write=True) as conn:
            with translated("append"):
                if draft.turn_id is not None:
                    rows = await conn.execute_fetchall(
                        _SELECT + " WHERE scope_hash = ? AND turn_id = ?",
                        (scope.scope_hash, draft.turn_id))
                    if rows:
                        return replayed(decode(row_mapping(next(iter(rows)))), draft)
                rows = await conn.execute_fetchall(
                    "SELECT last_seq FROM conversation_sessions WHERE scope_hash = ?",
                    (scope.scope_hash,))
                seq = (int(next(iter(rows))[0]) if rows else 0) + 1
                turn = new_turn(scope, draft, seq, now)
                await conn.execute(
                    "INSERT INTO conversation_sessions (scope_hash, tenant_id, user_id, "
                    "last_seq) VALUES (?, ?, ?, ?) ON CONFLICT (scope_hash) DO UPDATE "
                    "SET last_seq = excluded.last_seq",
                    (scope.scope_hash, scope.tenant_id, scope.user_id, seq))
                row = encode(scope, turn)
                await conn.execute(
                    f"INSERT INTO conversation_turns ({', '.join(row)}) "
                    f"VALUES ({', '.join('?' for _ in row)})", tuple(row.values()))
        return turn

    async def recent(self, scope: Scope, limit: int) -> tuple[Turn, ...]:
        async with self._file.tx("recent", write=False) as conn:
            with translated("recent"):
                rows = await conn.execute_fetchall(
                    _SELECT + " WHERE scope_hash = ? ORDER BY seq DESC LIMIT ?",
                    (scope.scope_hash, limit))
        return tuple(decode(row_mapping(r)) for r in reversed(list(rows)))

    async def after(self, scope: Scope, after_seq: int, limit: int) -> tuple[Turn, ...]:
        async with self._file.tx("after", write=False) as conn:
            with translated("after"):
                rows = await conn.execute_fetchall(
                    _SELECT + " WHERE scope_hash = ? AND seq > ? ORDER BY seq LIMIT ?",
                    (scope.scope_hash, after_seq, limit))
        return tuple(decode(row_mapping(r)) for r in rows)

    async def clear(self, scope: Scope) -> int:
        async with self._file.tx("clear", write=True) as conn:
            with translated("clear"):
                cursor = await conn.execute("DELETE FROM conversation_turns WHERE scope_hash = ?",
                                            (scope.scope_hash,))
                return int(cursor.rowcount)

    async def delete_user(self, tenant_id: str, user_id: str) -> int:
        async with self._file.tx("delete_user", write=True) as conn:
            with translated("delete_user"):
                cursor = await conn.execute(
                    "DELETE FROM conversation_turns WHERE tenant_id = ? AND user_id = ?",
                    (tenant_id, user_id))
                await conn.execute(
                    "DELETE FROM conversation_sessions WHERE tenant_id = ? AND user_id = ?",
                    (tenant_id, user_id))
                return int(cursor.rowcount)




def build_sqlite_turn_store(config: Mapping[str, Any], clock: Clock) -> SqliteTurnStore:
    path, timeout = file_config(config, "turn")
    return SqliteTurnStore(path, busy_timeout_ms=timeout)
