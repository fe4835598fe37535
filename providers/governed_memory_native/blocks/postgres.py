"""The memory-blocks tier on PostgreSQL: block versions shared by every process and node.

A write is one statement: insert version ``expected + 1`` only where the newest stored
version is ``expected``, and do nothing where that version already exists. Two writers
that both read version ``n`` (each statement's snapshot) both try to insert ``n + 1``;
the primary key makes the second wait for the first and then insert nothing, and a
write that inserted nothing re-reads the newest version (a fresh snapshot under READ
COMMITTED, so it sees the winner) and raises the same conflict as a stale read. The
loser never sees a unique violation, so a lost race is a 409, never a storage error.

Config: ``dsn`` (else ``GOVERNED_MEMORY_POSTGRES_DSN``), ``schema`` (default
``governed_memory``), ``pool_min_size`` (1), ``pool_max_size`` (4), ``timeout_s`` (5).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from governed_memory.clock import Clock
from governed_memory.scope import Scope
from governed_memory.tiers.blocks import BlockVersion, stale
from psycopg import sql

from governed_memory_native.blocks.rows import COLUMNS, INSERTED, TABLE, decode, distinct, encode
from governed_memory_native.postgres.store_pool import (
    PoolSettings,
    PostgresStorePool,
    pool_settings,
)


def _schema_statements(schema: str) -> list[sql.Composed]:
    s, t = sql.Identifier(schema), sql.Identifier(TABLE)
    return [
        sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(s),
        sql.SQL("""CREATE TABLE IF NOT EXISTS {}.{} (
            scope_hash TEXT NOT NULL,
            name TEXT NOT NULL,
            version BIGINT NOT NULL,
            tenant_id TEXT NOT NULL,
            user_id TEXT,
            value TEXT NOT NULL,
            edit TEXT NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (scope_hash, name, version))""").format(s, t),
        sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {}.{} (tenant_id, user_id)").format(
            sql.Identifier(f"{TABLE}_user"), s, t),
    ]


class PostgresBlockStore:
    name = "postgres"
    durable = True
    revision = "1"

    def __init__(self, dsn: str, *, schema: str = "governed_memory", pool_min_size: int = 1,
                 pool_max_size: int = 4, timeout_s: float = 5.0) -> None:
        self.schema = schema
        self._store = PostgresStorePool(
            PoolSettings(dsn, schema, pool_min_size, pool_max_size, timeout_s), what="block",
            schema_statements=_schema_statements)
        table = sql.SQL("{}.{}").format(sql.Identifier(schema), sql.Identifier(TABLE))
        self._table = table
        self._select = sql.SQL("SELECT {} FROM {}").format(
            sql.SQL(", ").join(map(sql.Identifier, COLUMNS)), table)
        self._newest = sql.SQL("SELECT coalesce(max(version), 0) AS version FROM {} "
                               "WHERE scope_hash = %s AND name = %s").format(table)
        self._insert = sql.SQL(
            "INSERT INTO {table} ({columns}) SELECT {values} "
            "WHERE (SELECT coalesce(max(version), 0) FROM {table} "
            "WHERE scope_hash = %s AND name = %s) = %s "
            "ON CONFLICT (scope_hash, name, version) DO NOTHING RETURNING version").format(
            table=table, columns=sql.SQL(", ").join(map(sql.Identifier, INSERTED)),
            values=sql.SQL(", ").join(_typed(column) for column in INSERTED))

    async def start(self) -> None:
        await self._store.start()

    async def close(self) -> None:
        await self._store.close()

    async def current(self, scope: Scope, names: Sequence[str]) -> Mapping[str, BlockVersion]:
        wanted = distinct(names)
        if not wanted:
            return {}
        async with self._store.tx("current") as conn:
            cur = await conn.execute(
                sql.SQL("SELECT DISTINCT ON (name) {} FROM {} "
                        "WHERE scope_hash = %s AND name = ANY(%s) "
                        "ORDER BY name, version DESC").format(
                    sql.SQL(", ").join(map(sql.Identifier, COLUMNS)), self._table),
                (scope.scope_hash, wanted))
            rows = await cur.fetchall()
        found = {row["name"]: decode(row) for row in rows}
        return {name: found[name] for name in wanted if name in found}

    async def write(self, scope: Scope, name: str, value: str, *, expected_version: int,
                    edit: str, now: float) -> BlockVersion:
        written = BlockVersion(scope.scope_hash, name, expected_version + 1, value, edit, now)
        async with self._store.tx("write") as conn:
            cur = await conn.execute(
                self._insert,
                (*encode(scope, written), scope.scope_hash, name, expected_version))
            if await cur.fetchone() is None:
                cur = await conn.execute(self._newest, (scope.scope_hash, name))
                row = await cur.fetchone()
                raise stale(name, expected_version, int(row["version"]) if row else 0)
        return written

    async def history(self, scope: Scope, name: str, *, before_version: int | None,
                      limit: int) -> tuple[BlockVersion, ...]:
        if limit <= 0:
            return ()
        older = sql.SQL("") if before_version is None else sql.SQL(" AND version < %s")
        bounds = () if before_version is None else (before_version,)
        async with self._store.tx("history") as conn:
            cur = await conn.execute(
                self._select + sql.SQL(" WHERE scope_hash = %s AND name = %s") + older
                + sql.SQL(" ORDER BY version DESC LIMIT %s"),
                (scope.scope_hash, name, *bounds, limit))
            rows = await cur.fetchall()
        return tuple(decode(row) for row in rows)

    async def delete_user(self, tenant_id: str, user_id: str) -> int:
        async with self._store.tx("delete_user") as conn:
            cur = await conn.execute(
                sql.SQL("DELETE FROM {} WHERE tenant_id = %s AND user_id = %s").format(
                    self._table), (tenant_id, user_id))
            return int(cur.rowcount)


_TYPES = {"version": "bigint", "updated_at": "double precision"}


def _typed(column: str) -> sql.Composable:
    """A placeholder cast to its column's type: in ``INSERT ... SELECT`` the server cannot
    infer a parameter's type from the target column."""
    return sql.SQL("%s::{}").format(sql.SQL(_TYPES.get(column, "text")))


def build_postgres_block_store(config: Mapping[str, Any], clock: Clock) -> PostgresBlockStore:
    settings = pool_settings(config, "block")
    return PostgresBlockStore(settings.dsn, schema=settings.schema,
                 pool_min_size=settings.pool_min_size,
                 pool_max_size=settings.pool_max_size, timeout_s=settings.timeout_s)
