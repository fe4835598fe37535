"""The connection pool behind a tier store on PostgreSQL (the conversation turns, the
memory blocks): opened once, its schema created idempotently, used one transaction at a
time, and configured the same way for every such store.

Creating the schema takes an advisory lock named after the store and its schema, so one
migrator at a time runs across processes. Another store's migrator creating the same
schema at the same instant can still win the catalog race once (``CREATE SCHEMA IF NOT
EXISTS`` is not atomic against a concurrent one); after that ``IF NOT EXISTS`` holds, so
that one collision is retried.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import psycopg
from governed_memory.errors import MemoryConfigurationError, MemoryUnavailableError
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from governed_memory_native.postgres.errors import translated

__all__ = ["DSN_ENV", "PoolSettings", "PostgresStorePool", "Row", "pool_settings"]

DSN_ENV = "GOVERNED_MEMORY_POSTGRES_DSN"
Row = dict[str, Any]
_IDENT = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_KEYS = frozenset({"dsn", "schema", "pool_min_size", "pool_max_size", "timeout_s"})
_CATALOG_RACE = (pg_errors.UniqueViolation, pg_errors.DuplicateSchema,
                 pg_errors.DuplicateTable, pg_errors.DuplicateObject)


@attrs.frozen(slots=True)
class PoolSettings:
    dsn: str
    schema: str = "governed_memory"
    pool_min_size: int = 1
    pool_max_size: int = 4
    timeout_s: float = 5.0


class PostgresStorePool:
    """One store's pool; ``schema_statements(schema)`` creates what it keeps."""

    def __init__(self, settings: PoolSettings, *, what: str,
                 schema_statements: Callable[[str], Sequence[sql.Composed]]) -> None:
        self.settings = settings
        self._what = what
        self._statements = schema_statements
        self._pool: AsyncConnectionPool[psycopg.AsyncConnection[Row]] | None = None

    @property
    def lock_name(self) -> str:
        return f"governed-memory-{self._what}s/{self.settings.schema}"

    async def start(self) -> None:
        if self._pool is not None:
            return
        s = self.settings
        pool: AsyncConnectionPool[psycopg.AsyncConnection[Row]] = AsyncConnectionPool(
            s.dsn, min_size=s.pool_min_size, max_size=s.pool_max_size, open=False,
            timeout=s.timeout_s, name=self.lock_name, kwargs={"row_factory": dict_row},
            connection_class=psycopg.AsyncConnection[Row])
        with translated("open"):
            await pool.open(wait=True, timeout=s.timeout_s)
        try:
            with translated("migrate"):
                try:
                    await self._create(pool)
                except _CATALOG_RACE:
                    await self._create(pool)
        except BaseException:
            await pool.close()
            raise
        self._pool = pool

    async def _create(self, pool: AsyncConnectionPool[psycopg.AsyncConnection[Row]]) -> None:
        async with pool.connection() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.lock_name,))
            for statement in self._statements(self.settings.schema):
                await conn.execute(statement)

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    @asynccontextmanager
    async def tx(self, action: str) -> AsyncIterator[psycopg.AsyncConnection[Row]]:
        """One transaction on a pooled connection, its driver errors translated."""
        if self._pool is None:
            raise MemoryUnavailableError(f"the {self._what} store is not started")
        with translated(action):
            async with self._pool.connection() as conn, conn.transaction():
                yield conn


def pool_settings(config: Mapping[str, Any], kind: str) -> PoolSettings:
    """``dsn`` (else ``$GOVERNED_MEMORY_POSTGRES_DSN``), ``schema``, ``pool_min_size``,
    ``pool_max_size`` and ``timeout_s``; any other key is refused, naming the store
    (``kind``: ``turn``, ``block``)."""
    unknown = sorted(set(config) - _KEYS)
    if unknown:
        raise MemoryConfigurationError(f"{kind} store 'postgres': unknown key(s) {unknown}")
    dsn = config.get("dsn", os.environ.get(DSN_ENV))
    if not isinstance(dsn, str) or not dsn.strip():
        raise MemoryConfigurationError(
            f"dsn: the postgres {kind} store needs a dsn (or {DSN_ENV})")
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
    return PoolSettings(dsn, schema, sizes["pool_min_size"], sizes["pool_max_size"],
                        float(timeout))
