"""The PostgreSQL backend: the native provider for several processes and machines.

Concurrency, and why a lock rather than SERIALIZABLE:

The provider core decides inside one ``writing()`` transaction by reading and then
writing (is this idempotency key taken? is this key held? which records belong to this
user?), exactly as it does on SQLite, where ``BEGIN IMMEDIATE`` makes every writer the
only writer. The same guarantee is given here: every write transaction first takes one
transaction-scoped advisory lock (``pg_advisory_xact_lock``, keyed by the schema, see
:func:`postgres_schema.writer_lock_key`), so writes on one schema are serialized across
every process and machine, and released at COMMIT or ROLLBACK, even if the client dies.

- SERIALIZABLE would also be correct, but it resolves conflicts by aborting a transaction
  that must then be *re-run from the start*; the core's read-then-write runs in the body
  of ``async with writing()``, which a backend cannot re-run, and the framework never
  retries a write that may have started. Conflicts would surface as spurious failures.
- Per-tenant or per-scope locks would let tenants write in parallel, but a write
  transaction is not told its tenant before its first read, and erasures and maintenance
  span many scopes; a lock taken lazily on the first statement would be fragile for every
  future port method. The single writer lock is held only for one write's few
  statements (milliseconds), the same contract SQLite offers, on a server that does not
  block readers.
- The lock is taken just before the transaction's first statement that reads or writes
  memory state, which in every provider operation is its first statement. A few
  statements are *lock-free* because row locks alone make them safe, and a transaction
  made only of them never waits for writers: storing a retrieval snapshot (an insert
  under a fresh id; every search stores one, so searches would otherwise queue behind
  writes) and purging expired ones (deletes by id), acknowledging outbox events (a
  delete by id, idempotent), and leasing index jobs (``FOR UPDATE SKIP LOCKED``:
  concurrent workers each claim different jobs).
- Writers run at READ COMMITTED, so each statement after the lock sees everything
  committed before the lock was granted (REPEATABLE READ would take its snapshot at the
  first statement, possibly before the wait, and miss the previous writer's commit).
  Row-level guards stay as a second line: ``replace_record`` is a compare-and-set
  ``UPDATE ... WHERE revision = ...``, live keys have a unique index, and settling a job
  checks its lease owner and attempt.
- Readers take no lock: a read runs at REPEATABLE READ, READ ONLY, so an operation's
  several statements see one consistent snapshot, like SQLite's WAL readers.

``busy_timeout_ms`` bounds the wait for the writer lock (``lock_timeout``) and for a free
pool connection; past it the operation fails as unavailable (safe to retry later). With 0
the lock is tried once. Cancellation: psycopg cancels the running statement on the
server when the awaiting task is cancelled, the transaction is rolled back, and the pool
discards a connection left in any state other than idle, so the lock is never held on
behalf of a caller that has gone.

Durability is the server's: a COMMIT returns after the WAL is flushed
(``synchronous_commit`` on, PostgreSQL's default; a deployment that turns it off trades
the last commits on a crash for speed, and should not claim ``durable``).

Erasure deletes the rows in the erasing transaction; nothing can read them after COMMIT.
The dead tuples' bytes stay in the table files until VACUUM reuses the space, and in WAL
segments and backups until they rotate: operators own that retention (see
docs/platform-teams.md).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from governed_memory.errors import MemoryUnavailableError
from governed_memory.records import Capabilities
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from governed_memory_native.port import ReadTransaction, UnitsFromTransactions, WriteTransaction
from governed_memory_native.postgres_errors import translate, translated
from governed_memory_native.postgres_schema import (
    LATEST_VERSION,
    current_version,
    migrate,
    writer_lock_key,
)
from governed_memory_native.postgres_transaction import PostgresTransaction, Row


class PostgresBackend(UnitsFromTransactions):
    name = "postgres"

    def __init__(self, dsn: str, *, schema: str, pool_min_size: int, pool_max_size: int,
                 busy_timeout_ms: int) -> None:
        self._dsn = dsn
        self._schema = schema
        self._min_size = pool_min_size
        self._max_size = pool_max_size
        self._busy_timeout_ms = busy_timeout_ms
        self._lock_key = writer_lock_key(schema)
        self._pool: AsyncConnectionPool[psycopg.AsyncConnection[Row]] | None = None

    @property
    def schema(self) -> str:
        return self._schema

    def capabilities(self) -> Capabilities:
        return Capabilities(durable=True, transactional=True, multi_process=True, usage=True,
                            event_outbox=True)

    @property
    def _wait_s(self) -> float:
        """How long to wait for a pool connection; at least a moment, even with 0."""
        return max(self._busy_timeout_ms / 1000, 0.05)

    async def open(self) -> None:
        if self._pool is not None:
            return
        pool: AsyncConnectionPool[psycopg.AsyncConnection[Row]] = AsyncConnectionPool(
            self._dsn,
            min_size=self._min_size,
            max_size=self._max_size,
            open=False,
            timeout=self._wait_s,
            name=f"governed-memory/{self._schema}",
            kwargs=self._connection_kwargs(),
            connection_class=psycopg.AsyncConnection[Row],
        )
        try:
            with translated("open"):
                await pool.open(wait=True, timeout=max(self._wait_s, 5.0))
                async with pool.connection() as conn:
                    await migrate(conn, self._schema, applied_at=time.time())
        except BaseException:
            await pool.close()
            raise
        self._pool = pool

    def _connection_kwargs(self) -> dict[str, Any]:
        # search_path is set when the session starts, so every pooled connection (and a
        # reconnected one) resolves unqualified table names in this schema only.
        return {
            "autocommit": True,
            "row_factory": dict_row,
            "options": f"-c search_path={self._schema}",
            # operators see which deployment a session serves in pg_stat_activity
            "application_name": f"governed-memory/{self._schema}",
        }

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    def _require_pool(self) -> AsyncConnectionPool[psycopg.AsyncConnection[Row]]:
        if self._pool is None:
            raise MemoryUnavailableError("the postgres backend is not open")
        return self._pool

    async def check(self) -> str:
        pool = self._require_pool()
        with translated("health check"):
            async with pool.connection(timeout=self._wait_s) as conn:
                version = await current_version(conn)
        stats = pool.get_stats()
        size = stats.get("pool_size", 0)
        if version != LATEST_VERSION:
            return f"postgres schema v{version}, expected v{LATEST_VERSION}"
        return f"postgres schema v{version}, pool {size}/{self._max_size}"

    @asynccontextmanager
    async def reading(self) -> AsyncIterator[ReadTransaction]:
        async with self._transaction("read", write=False) as transaction:
            yield transaction

    @asynccontextmanager
    async def writing(self, *, tenant_id: str | None = None
                      ) -> AsyncIterator[WriteTransaction]:
        async with self._transaction("write", write=True) as transaction:
            yield transaction

    @asynccontextmanager
    async def _transaction(self, action: str, *, write: bool
                           ) -> AsyncIterator[PostgresTransaction]:
        """A pooled connection inside one transaction; committed if the body returns.

        Errors from psycopg (taking a connection, BEGIN, the lock, COMMIT) become
        governed-memory errors; the body's own errors pass through unchanged.
        """
        pool = self._require_pool()
        try:
            async with pool.connection(timeout=self._wait_s) as conn, conn.transaction():
                if not write:
                    await conn.execute(
                        "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"
                    )
                    yield PostgresTransaction(conn)
                else:
                    yield PostgresTransaction(
                        conn, serialize=lambda: self._take_writer_lock(conn))
        except psycopg.Error as exc:
            raise translate(exc, action) from None

    async def _take_writer_lock(self, conn: psycopg.AsyncConnection[Row]) -> None:
        if self._busy_timeout_ms == 0:
            cursor = await conn.execute(
                "SELECT pg_try_advisory_xact_lock(%s) AS granted", (self._lock_key,)
            )
            row = await cursor.fetchone()
            if row is None or not row["granted"]:
                raise MemoryUnavailableError("postgres write: another writer holds the lock")
            return
        await conn.execute(
            "SELECT set_config('lock_timeout', %s, true)", (f"{self._busy_timeout_ms}ms",)
        )
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key,))
