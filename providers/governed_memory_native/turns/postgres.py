"""The conversation tier on PostgreSQL: turns per session, shared by every process.

Sequence numbers: an append locks its session's row (``INSERT ... ON CONFLICT DO
UPDATE ... RETURNING last_seq`` takes the row lock), so concurrent appends to one
session from any number of processes get distinct, gap-free numbers, while appends to
different sessions never wait for each other. The session row keeps counting after a
``clear``. Durability is the server's (a COMMIT returns after the WAL is flushed).

Config: ``dsn`` (else ``GOVERNED_MEMORY_POSTGRES_DSN``), ``schema`` (default
``governed_memory``), ``pool_min_size`` (1), ``pool_max_size`` (4), ``timeout_s`` (5).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from governed_memory.clock import Clock
from governed_memory.scope import Scope
from governed_memory.tiers.turns import Turn, TurnDraft, new_turn, replayed
from psycopg import sql

from governed_memory_native.postgres.store_pool import (
    PoolSettings,
    PostgresStorePool,
    pool_settings,
)
from governed_memory_native.turns.rows import COLUMNS, decode, encode


def _schema_statements(schema: str) -> list[sql.Composed]:
    s = sql.Identifier(schema)
    return [
        sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(s),
        sql.SQL("""CREATE TABLE IF NOT EXISTS {}.conversation_sessions (
            scope_hash TEXT PRIMARY KEY,
            tenant_id TEXT NOT NULL,
            user_id TEXT,
            last_seq BIGINT NOT NULL)""").format(s),
        sql.SQL("""CREATE TABLE IF NOT EXISTS {}.conversation_turns (
            scope_hash TEXT NOT NULL,
            seq BIGINT NOT NULL,
            turn_id TEXT NOT NULL,
            tenant_id TEXT NOT NULL,
            user_id TEXT,
            role TEXT NOT NULL,
            content TEXT NOT NULL,
            name TEXT,
            tool_call_id TEXT,
            tool_calls TEXT NOT NULL,
            metadata TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (scope_hash, seq),
            UNIQUE (scope_hash, turn_id))""").format(s),
        sql.SQL("CREATE INDEX IF NOT EXISTS conversation_turns_user "
                "ON {}.conversation_turns (tenant_id, user_id)").format(s),
    ]


class PostgresTurnStore:
    name = "postgres"
    durable = True
    revision = "1"

    def __init__(self, dsn: str, *, schema: str = "governed_memory", pool_min_size: int = 1,
                 pool_max_size: int = 4, timeout_s: float = 5.0) -> None:
        self.schema = schema
        self._store = PostgresStorePool(
            PoolSettings(dsn, schema, pool_min_size, pool_max_size, timeout_s), what="turn",
            schema_statements=_schema_statements)
        s = sql.Identifier(schema)
        self._turns = sql.SQL("{}.conversation_turns").format(s)
        self._sessions = sql.SQL("{}.conversation_sessions").format(s)
        self._select = sql.SQL("SELECT {} FROM {}").format(
            sql.SQL(", ").join(map(sql.Identifier, COLUMNS)), self._turns)

    async def start(self) -> None:
        await self._store.start()

    async def close(self) -> None:
        await self._store.close()

    async def append(self, scope: Scope, draft: TurnDraft, now: float) -> Turn:
        draft.validate()
        async with self._store.tx("append") as conn:
            # Take the session row lock first: it orders every append to the session.
            cur = await conn.execute(
                sql.SQL("INSERT INTO {} AS s (scope_hash, tenant_id, user_id, last_seq) "
                        "VALUES (%s, %s, %s, 0) ON CONFLICT (scope_hash) DO UPDATE "
                        "SET last_seq = s.last_seq RETURNING last_seq").format(
                    self._sessions),
                (scope.scope_hash, scope.tenant_id, scope.user_id))
            locked = await cur.fetchone()
            assert locked is not None
            if draft.turn_id is not None:
                cur = await conn.execute(
                    self._select + sql.SQL(" WHERE scope_hash = %s AND turn_id = %s"),
                    (scope.scope_hash, draft.turn_id))
                existing = await cur.fetchone()
                if existing is not None:
                    return replayed(decode(existing), draft)
            seq = int(locked["last_seq"]) + 1
            turn = new_turn(scope, draft, seq, now)
            await conn.execute(
                sql.SQL("UPDATE {} SET last_seq = %s WHERE scope_hash = %s").format(
                    self._sessions), (seq, scope.scope_hash))
            row = encode(scope, turn)
            await conn.execute(
                sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
                    self._turns, sql.SQL(", ").join(map(sql.Identifier, row)),
                    sql.SQL(", ").join(sql.Placeholder() * len(row))),
                tuple(row.values()))
        return turn

    async def recent(self, scope: Scope, limit: int) -> tuple[Turn, ...]:
        async with self._store.tx("recent") as conn:
            cur = await conn.execute(
                self._select + sql.SQL(" WHERE scope_hash = %s ORDER BY seq DESC LIMIT %s"),
                (scope.scope_hash, limit))
            rows = await cur.fetchall()
        return tuple(decode(r) for r in reversed(rows))

    async def after(self, scope: Scope, after_seq: int, limit: int) -> tuple[Turn, ...]:
        async with self._store.tx("after") as conn:
            cur = await conn.execute(
                self._select + sql.SQL(" WHERE scope_hash = %s AND seq > %s "
                                       "ORDER BY seq LIMIT %s"),
                (scope.scope_hash, after_seq, limit))
            rows = await cur.fetchall()
        return tuple(decode(r) for r in rows)

    async def clear(self, scope: Scope) -> int:
        async with self._store.tx("clear") as conn:
            cur = await conn.execute(
                sql.SQL("DELETE FROM {} WHERE scope_hash = %s").format(self._turns),
                (scope.scope_hash,))
            return int(cur.rowcount)

    async def delete_user(self, tenant_id: str, user_id: str) -> int:
        async with self._store.tx("delete_user") as conn:
            cur = await conn.execute(
                sql.SQL("DELETE FROM {} WHERE tenant_id = %s AND user_id = %s").format(
                    self._turns), (tenant_id, user_id))
            removed = int(cur.rowcount)
            await conn.execute(
                sql.SQL("DELETE FROM {} WHERE tenant_id = %s AND user_id = %s").format(
                    self._sessions), (tenant_id, user_id))
            return removed


def build_postgres_turn_store(config: Mapping[str, Any], clock: Clock) -> PostgresTurnStore:
    settings = pool_settings(config, "turn")
    return PostgresTurnStore(settings.dsn, schema=settings.schema,
                 pool_min_size=settings.pool_min_size,
                 pool_max_size=settings.pool_max_size, timeout_s=settings.timeout_s)
