"""The PostgreSQL backend: the native provider for several processes and machines.

Concurrency: writers serialise per tenant, with advisory locks rather than SERIALIZABLE.

The provider core decides inside one write unit by reading and then writing (is this
idempotency key taken? is this key held? which records belong to this user?), exactly
as it does on SQLite, where ``BEGIN IMMEDIATE`` makes every writer the only writer.
Here every write unit names the one tenant whose rows it reads to decide and writes
(``run_write(body, tenant_id=...)``; ``None`` when it may touch any tenant), and takes
transaction-scoped advisory locks (released at COMMIT or ROLLBACK, even if the client
dies) before its first statement that reads or writes memory state:

- a *tenant unit* takes the schema key (:func:`postgres.locks.writer_lock_key`) shared
  and then the tenant's key (:func:`postgres.locks.tenant_lock_key`) exclusively, so
  writers of one tenant run one at a time across every process and machine, while
  writers of different tenants run in parallel;
- a *global unit* (``tenant_id=None``: the indexing worker's settlements, requeues and
  reindexing, tooling) takes the schema key exclusively, so it runs alone: no tenant
  unit holds the shared key meanwhile. Migrations take it exclusively too, and so did
  every writer of the code before per-tenant units, so old and new processes exclude
  each other during a rolling upgrade.

The schema key is always taken before the tenant key and each unit takes its locks
once, so lock waits cannot form a cycle.

Why per-tenant serialisation keeps every invariant: a tenant unit reads and writes only
rows of its tenant's scopes (a scope hash includes the tenant), and the rows several
tenants share are safe without a common lock:

- records, versions, idempotency entries, the lexical statistics, terms, documents and
  postings, erasure progress and the snapshots' subject rows are all keyed by a scope or
  a ``(tenant, user)``, so two tenant units never touch the same row. Compare-and-set
  (``records.replace`` is ``UPDATE ... WHERE revision = ...``), key ownership (checked
  under the tenant lock, and a unique index on live keys behind it), idempotency (its
  key includes the scope) and erasure receipts (batches summed in the user's progress
  row) hold as they did under one schema-wide lock, because everything they read to
  decide belongs to the locked tenant.
- Identity sequences (record ``seq``, outbox ``seq``, job ``seq``, lexical scope ids)
  are drawn concurrently without conflict. The outbox's ``seq`` is in commit order among
  one tenant's events; events of different tenants committed at the same time have no
  order between them, and none is needed: delivery is at least once, sinks deduplicate
  by event id, nothing pages the outbox by ``seq``, and acknowledging deletes by id.
- Index jobs: a tenant unit enqueues, and drops the older pending jobs of, its own
  records only; workers lease with ``FOR UPDATE SKIP LOCKED`` and settle in global
  units; an erasure deleting a job a worker is leasing waits for that row lock.
- Retrieval snapshots are inserted under fresh ids and purged by id (row locks suffice).

Statements that row locks alone make safe are *lock-free*: a transaction made only of
them never waits for writers. Storing a retrieval snapshot (an insert under a fresh id;
every search stores one, so searches would otherwise queue behind writes) and purging
expired ones (deletes by id), acknowledging outbox events (a delete by id, idempotent),
and leasing index jobs (``FOR UPDATE SKIP LOCKED``: concurrent workers each claim
different jobs).

- SERIALIZABLE would also be correct, but it resolves conflicts by aborting a
  transaction that must then be *re-run from the start*; a unit's read-then-write is
  arbitrary provider code that a backend cannot re-run, and the framework never retries
  a write that may have started. Conflicts would surface as spurious failures.
- Writers run at READ COMMITTED, so each statement after the locks sees everything
  committed before they were granted (REPEATABLE READ would take its snapshot at the
  first statement, possibly before the wait, and miss the previous writer's commit).
  Row-level guards stay as a second line: compare-and-set, the live-key unique index,
  and settling a job checks its lease owner and attempt.
- Readers take no lock: a read runs at REPEATABLE READ, READ ONLY, so an operation's
  several statements see one consistent snapshot, like SQLite's WAL readers.

Round trips (see :mod:`postgres.transaction`): BEGIN, the locks and every statement
whose result nothing reads are queued and sent with the next statement whose result is
needed, or with COMMIT, as one query; ``lock_timeout`` is a session setting, not a
``SET`` per transaction. An add is one round trip (two when it also acknowledges
delivered events, whose count the port returns), a get one (a single statement in
autocommit, see :meth:`PostgresBackend.run_read`), an update three. Counters are in
:attr:`PostgresBackend.stats`.

``busy_timeout_ms`` bounds each wait for a lock (the connections' ``lock_timeout``) and
for a free pool connection; past it the operation fails as unavailable (safe to retry
later). With 0 the locks are tried once. Cancellation: psycopg cancels the running
statement on the server when the awaiting task is cancelled; the unit then sends
ROLLBACK, and the pool rolls back or discards a connection left in any state other than
idle, so locks are never held on behalf of a caller that has gone.

Durability is the server's: a COMMIT returns after the WAL is flushed
(``synchronous_commit`` on, PostgreSQL's default; a deployment that turns it off trades
the last commits on a crash for speed, and should not claim ``durable``).

Erasure deletes the rows in the erasing transaction; nothing can read them after COMMIT.
The dead tuples' bytes stay in the table files until VACUUM reuses the space, and in WAL
segments and backups until they rotate: operators own that retention (see
docs/platform-teams.md).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Final, TypeVar

import psycopg
from governed_memory.capabilities import Capabilities
from governed_memory.errors import MemoryUnavailableError
from governed_memory.records import MemoryRecord
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from governed_memory_native.postgres.errors import logger, translate, translated
from governed_memory_native.postgres.locks import tenant_lock_key, writer_lock_key
from governed_memory_native.postgres.migrating import current_version
from governed_memory_native.postgres.rows import record_from_row
from governed_memory_native.postgres.schema import CAS_GUARD_VERSION, LATEST_VERSION, migrate
from governed_memory_native.postgres.transaction import (
    NeedsSnapshot,
    PostgresStats,
    PostgresTransaction,
    Row,
    WriterLock,
)
from governed_memory_native.retrieval.ranking.wire import store_spec
from governed_memory_native.storage.port import (
    ReadTransaction,
    UnitsFromTransactions,
    WriteTransaction,
)

T = TypeVar("T")

__all__ = ["PostgresBackend", "PostgresStats"]

BEGIN_READ: Final = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"
BEGIN_WRITE: Final = "BEGIN ISOLATION LEVEL READ COMMITTED"

_GLOBAL: Final = "SELECT pg_advisory_xact_lock(%s)"
_GLOBAL_TRIED: Final = "SELECT pg_try_advisory_xact_lock(%s) AS granted"
# The MATERIALIZED CTE is evaluated before the outer target list reads its row: the
# schema key is held before the tenant key is asked for, whatever the planner does.
_TENANT: Final = ("WITH schema_key AS MATERIALIZED (SELECT pg_advisory_xact_lock_shared(%s))"
                  " SELECT pg_advisory_xact_lock(%s) FROM schema_key")
_TENANT_TRIED: Final = (
    "WITH schema_key AS MATERIALIZED"
    " (SELECT pg_try_advisory_xact_lock_shared(%s) AS shared)"
    " SELECT shared AND pg_try_advisory_xact_lock(%s) AS granted FROM schema_key")


class PostgresBackend(UnitsFromTransactions):
    name = "postgres"

    def __init__(self, dsn: str, *, schema: str, pool_min_size: int, pool_max_size: int,
                 busy_timeout_ms: int) -> None:
        self._dsn = dsn
        self._schema = schema
        self._min_size = pool_min_size
        self._max_size = pool_max_size
        self._busy_timeout_ms = busy_timeout_ms
        self._schema_key = writer_lock_key(schema)
        self._pool: AsyncConnectionPool[psycopg.AsyncConnection[Row]] | None = None
        self.stats = PostgresStats()
        self._queued_cas = False
        self._ending: set[asyncio.Task[None]] = set()
        """Read transactions ending after their caller has its result."""
        """Whether the schema has the guard a queued compare-and-set needs (v12)."""

    @property
    def schema(self) -> str:
        return self._schema

    def capabilities(self) -> Capabilities:
        return Capabilities(durable=True, transactional=True, multi_process=True, usage=True,
                            event_outbox=True)

    def ranking_store(self) -> Mapping[str, Any]:
        """This schema, for a ranking worker (:mod:`retrieval.ranking.pool`) to read in a session
        of its own (the dsn travels on the worker's stdin, never its command line)."""
        return store_spec(backend=self.name, busy_timeout_ms=self._busy_timeout_ms,
                          dsn=self._dsn, schema=self._schema)

    def decode_row(self, row: Mapping[str, Any]) -> MemoryRecord:
        return record_from_row(row)

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
                    version = await migrate(conn, self._schema, applied_at=time.time())
        except BaseException:
            await pool.close()
            raise
        self._queued_cas = version >= CAS_GUARD_VERSION
        self._pool = pool

    def _connection_kwargs(self) -> dict[str, Any]:
        return self.connection_kwargs()

    def connection_kwargs(self, role: str = "") -> dict[str, Any]:
        """How every session of this backend connects (a ranking worker's too, with its
        ``role`` in the application name)."""
        # Session settings are given when the session starts, so every pooled connection
        # (and a reconnected one) has them and no transaction spends a round trip on a
        # SET: search_path resolves unqualified table names in this schema only, and
        # lock_timeout bounds every lock wait (0 means none in PostgreSQL: the locks are
        # then tried instead, see _writer_lock).
        options = f"-c search_path={self._schema}"
        if self._busy_timeout_ms > 0:
            options += f" -c lock_timeout={self._busy_timeout_ms}ms"
        name = f"governed-memory/{self._schema}" + (f"/{role}" if role else "")
        return {
            "autocommit": True,  # transactions are BEGUN explicitly, with their first statement
            "row_factory": dict_row,
            "options": options,
            # operators see which deployment a session serves in pg_stat_activity
            "application_name": name,
        }

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await self.settled()
            await pool.close()

    async def settled(self) -> None:
        """Wait until every read transaction whose COMMIT is on its way has ended and
        given its connection back (close does; so do tests counting round trips)."""
        if self._ending:
            await asyncio.gather(*self._ending, return_exceptions=True)

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
        async with self._transaction(BEGIN_READ, lock=None) as transaction:
            yield transaction

    async def run_read(self, body: Callable[[ReadTransaction], Awaitable[T]], *,
                       point: bool = False) -> T:
        """A point read (a record by id or key, a snapshot by id) is one statement: it
        runs alone in autocommit, its own snapshot, one round trip instead of two (no
        BEGIN, no COMMIT). Should the unit ask for a second statement, it is run again
        from the start in a REPEATABLE READ transaction, so its statements still see one
        snapshot; a read unit writes nothing, so running it twice is harmless."""
        if point:
            try:
                async with self._transaction(None, lock=None) as single:
                    return await body(single)
            except NeedsSnapshot:
                self.stats.point_retries += 1
        async with self.reading() as transaction:
            return await body(transaction)

    @asynccontextmanager
    async def writing(self, *, tenant_id: str | None = None
                      ) -> AsyncIterator[WriteTransaction]:
        async with self._transaction(BEGIN_WRITE,
                                     lock=self._writer_lock(tenant_id)) as transaction:
            yield transaction

    def _writer_lock(self, tenant_id: str | None) -> WriterLock:
        """Shared schema key and the tenant's key for a tenant unit; the schema key
        exclusively for a unit that may touch any tenant (see the module docstring)."""
        tried = self._busy_timeout_ms == 0
        if tenant_id is None:
            return WriterLock(_GLOBAL_TRIED if tried else _GLOBAL, (self._schema_key,),
                              tried=tried)
        return WriterLock(_TENANT_TRIED if tried else _TENANT,
                          (self._schema_key, tenant_lock_key(self._schema, tenant_id)),
                          tried=tried)

    @asynccontextmanager
    async def _transaction(self, begin: str | None, *, lock: WriterLock | None
                           ) -> AsyncIterator[PostgresTransaction]:
        """A pooled connection and one transaction on it: committed if the body returns,
        rolled back if it raises or is cancelled (``begin=None``: a single statement in
        autocommit, see :meth:`run_read`).

        Errors from psycopg (taking a connection, COMMIT) become governed-memory errors;
        the body's own errors pass through unchanged.
        """
        pool = self._require_pool()
        if begin == BEGIN_READ:
            async with self._read_transaction(pool) as transaction:
                yield transaction
            return
        write = lock is not None
        try:
            async with pool.connection(timeout=self._wait_s) as conn:
                transaction = PostgresTransaction(conn, begin=begin, stats=self.stats,
                                                  queued_cas=self._queued_cas,
                                                  lock=lock, write=write)
                try:
                    yield transaction
                    await transaction.commit()
                except BaseException:
                    await transaction.roll_back()
                    raise
        except psycopg.Error as exc:
            raise translate(exc, "write" if write else "read") from None

    @asynccontextmanager
    async def _read_transaction(self, pool: AsyncConnectionPool[psycopg.AsyncConnection[Row]]
                                ) -> AsyncIterator[PostgresTransaction]:
        """A REPEATABLE READ, READ ONLY transaction whose COMMIT the caller does not wait
        for: a read's result is settled by its last statement, and a read-only COMMIT can
        neither fail it nor change it, so the COMMIT (and the connection's return to the
        pool) runs after the caller has its result, a round trip off every read unit.
        A body that raises or is cancelled is rolled back first, as any unit."""
        try:
            conn = await pool.getconn(timeout=self._wait_s)
        except psycopg.Error as exc:
            raise translate(exc, "read") from None
        transaction = PostgresTransaction(conn, begin=BEGIN_READ, stats=self.stats)
        try:
            yield transaction
        except BaseException:
            try:
                await transaction.roll_back()
            finally:
                await pool.putconn(conn)
            raise
        ending = asyncio.get_running_loop().create_task(
            self._end_read(pool, transaction, conn), name="gm-postgres-read-end")
        self._ending.add(ending)
        ending.add_done_callback(self._ending.discard)

    async def _end_read(self, pool: AsyncConnectionPool[psycopg.AsyncConnection[Row]],
                        transaction: PostgresTransaction,
                        conn: psycopg.AsyncConnection[Row]) -> None:
        try:
            await transaction.commit()
        except Exception:  # the read's result stands; the pool drops a broken session
            logger.debug("postgres read commit failed", exc_info=True)
        finally:
            await pool.putconn(conn)
