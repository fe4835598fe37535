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

import os
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from governed_memory.clock import Clock
from governed_memory.errors import MemoryConfigurationError, MemoryUnavailableError
from governed_memory.scope import Scope
from governed_memory.tiers.blocks import BlockVersion, stale
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from governed_memory_native.blocks.rows import COLUMNS, INSERTED, TABLE, decode, distinct, encode
from governed_memory_native.postgres.errors import translated

DSN_ENV = "GOVERNED_MEMORY_POSTGRES_DSN"
_IDENT = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_KEYS = frozenset({"dsn", "schema", "pool_min_size", "pool_max_size", "timeout_s"})
_CATALOG_RACE = (pg_errors.UniqueViolation, pg_errors.DuplicateSchema,
                 pg_errors.DuplicateTable, pg_errors.DuplicateObject)

Row = dict[str, Any]


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
        self._dsn = dsn
        self.schema = schema
        self._min, self._max, self._timeout = pool_min_size, pool_max_size, timeout_s
        self._pool: AsyncConnectionPool[psycopg.AsyncConnection[Row]] | None = None
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
        if self._pool is not None:
            return
        pool: AsyncConnectionPool[psycopg.AsyncConnection[Row]] = AsyncConnectionPool(
            self._dsn, min_size=self._min, max_size=self._max, open=False,
            timeout=self._timeout, name=f"governed-memory-blocks/{self.schema}",
            kwargs={"row_factory": dict_row},
            connection_class=psycopg.AsyncConnection[Row])
        with translated("open"):
            await pool.open(wait=True, timeout=self._timeout)
        try:
            await self._migrate(pool)
        except BaseException:
            await pool.close()
            raise
        self._pool = pool

    async def _migrate(self, pool: AsyncConnectionPool[psycopg.AsyncConnection[Row]]) -> None:
        """Create the schema and table idempotently. Our advisory lock orders this
        store's migrators across processes; another store's migrator creating the same
        schema in the same instant can still win the catalog race once, after which
        ``IF NOT EXISTS`` holds, so that one collision is retried."""
        with translated("migrate"):
            try:
                await self._create(pool)
            except _CATALOG_RACE:
                await self._create(pool)

    async def _create(self, pool: AsyncConnectionPool[psycopg.AsyncConnection[Row]]) -> None:
        async with pool.connection() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))",
                               (f"governed-memory-blocks/{self.schema}",))
            for statement in _schema_statements(self.schema):
                await conn.execute(statement)

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    @asynccontextmanager
    async def _tx(self, action: str) -> AsyncIterator[psycopg.AsyncConnection[Row]]:
        if self._pool is None:
            raise MemoryUnavailableError("the block store is not started")
        with translated(action):
            async with self._pool.connection() as conn, conn.transaction():
                yield conn

    async def current(self, scope: Scope, names: Sequence[str]) -> Mapping[str, BlockVersion]:
        wanted = distinct(names)
        if not wanted:
            return {}
        async with self._tx("current") as conn:
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
        async with self._tx("write") as conn:
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
        async with self._tx("history") as conn:
            cur = await conn.execute(
                self._select + sql.SQL(" WHERE scope_hash = %s AND name = %s") + older
                + sql.SQL(" ORDER BY version DESC LIMIT %s"),
                (scope.scope_hash, name, *bounds, limit))
            rows = await cur.fetchall()
        return tuple(decode(row) for row in rows)

    async def delete_user(self, tenant_id: str, user_id: str) -> int:
        async with self._tx("delete_user") as conn:
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
    unknown = sorted(set(config) - _KEYS)
    if unknown:
        raise MemoryConfigurationError(f"block store 'postgres': unknown key(s) {unknown}")
    dsn = config.get("dsn", os.environ.get(DSN_ENV))
    if not isinstance(dsn, str) or not dsn.strip():
        raise MemoryConfigurationError(
            f"dsn: the postgres block store needs a dsn (or {DSN_ENV})")
    schema = config.get("schema", "governed_memory")
    if not isinstance(schema, str) or not _IDENT.match(schema):
        raise MemoryConfigurationError("schema: a lower-case SQL identifier")
    sizes = {k: config.get(k, d) for k, d in (("pool_min_size", 1), ("pool_max_size", 4))}
    for key, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise MemoryConfigurationError(f"{key}: a positive integer")
    if sizes["pool_min_size"] > sizes["pool_max_size"]:
        raise MemoryConfigurationError("pool_min_size: must not exceed pool_max_size")
    timeout = config.get("timeout_s", 5.0)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise MemoryConfigurationError("timeout_s: a positive number of seconds")
    return PostgresBlockStore(dsn, schema=schema, pool_min_size=sizes["pool_min_size"],
                              pool_max_size=sizes["pool_max_size"], timeout_s=float(timeout))
