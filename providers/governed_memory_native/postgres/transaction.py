"""One PostgreSQL transaction: the connection, the dialect hooks the shared statements
run on, and the transaction's repositories, in few round trips.

Statements only take bound parameters; the few pieces spliced into SQL text are clauses
and names we generate.

Round trips: a statement whose result the port method does not return (``BEGIN``, the
writer locks, a record's insert with its index rows, a version, an idempotency entry,
an event, ``COMMIT``) is *queued* and sent with the next statement whose result is
needed, or with ``COMMIT``, as one multi-statement query. A plain add is one round
trip: ``BEGIN``, the locks, the record and its index rows, the version, the event and
``COMMIT`` travel together. The server runs them in order, so the locks are granted
before the first statement that needs them; if any statement fails, the server skips
the rest and the transaction is aborted, so a queued statement's error (say a unique
key taken) surfaces at the next round trip or at ``COMMIT`` and fails the unit as a
whole, never half of it. :class:`PostgresStats` counts round trips and statements.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeVar, cast

import attrs
import psycopg
from governed_memory.errors import MemoryUnavailableError
from governed_memory.records import MemoryRecord
from psycopg import AsyncClientCursor, AsyncConnection, AsyncCursor
from psycopg.pq import ExecStatus, TransactionStatus
from psycopg.rows import tuple_row

from governed_memory_native.postgres.dialect import Outcome
from governed_memory_native.postgres.errors import logger, translated
from governed_memory_native.postgres.lexical import PostgresLexicalSearch
from governed_memory_native.postgres.rows import decode_text, encode_text, record_from_row
from governed_memory_native.postgres.statements import (
    PostgresErasure,
    PostgresIndexJobs,
    PostgresRecords,
    PostgresVectors,
)
from governed_memory_native.sql.idempotency import SqlIdempotency
from governed_memory_native.sql.outbox import SqlOutbox
from governed_memory_native.sql.revisions import SqlScopeRevisions
from governed_memory_native.sql.snapshots import SqlSnapshots
from governed_memory_native.sql.versions import SqlVersions

T = TypeVar("T")
Row = dict[str, Any]
Params = Sequence[Any] | Mapping[str, Any] | None

_CHUNK: Final = 1000
"""Ids per statement: bounds the size of one statement's lock set and arrays."""


@attrs.define
class PostgresStats:
    """Counters of what the hot paths cost, for benchmarks and tests to read
    (``backend.stats.as_dict()``). Written on the event loop only, so no lock."""

    round_trips: int = 0
    """Waits for the server: one statement sent alone, or the queued statements with
    the one whose result is needed, or with COMMIT, as one query."""
    statements: int = 0
    """Statements sent, BEGIN, locks, COMMIT and ROLLBACK included."""
    reads: int = 0
    """Read units of work (transactions) that sent anything."""
    writes: int = 0
    """Write units of work that sent anything (committed or not)."""
    commits: int = 0
    """Committed write transactions: one WAL flush each, with the default
    ``synchronous_commit``."""
    rollbacks: int = 0
    """Transactions rolled back (a unit that raised, or was cancelled, after it began)."""
    point_retries: int = 0
    """Point reads that asked for a second statement and ran again in a transaction."""

    def as_dict(self) -> dict[str, int]:
        return attrs.asdict(self)


@attrs.frozen(slots=True)
class WriterLock:
    """The advisory locks a write unit takes, as one statement (see the backend)."""

    sql: str
    params: tuple[int, ...]
    tried: bool = False
    """Try once instead of waiting (``busy_timeout_ms = 0``): the statement then
    returns ``granted``, which must be read before anything runs under the lock."""


@attrs.frozen(slots=True)
class Statement:
    """One statement of a round trip."""

    sql: str
    params: Params = None


def _consume(future: asyncio.Future[Any]) -> None:
    """Retrieve a shielded computation's outcome, so one whose caller was cancelled is
    not reported as an exception never retrieved (the caller's own is raised)."""
    if not future.cancelled():
        future.exception()


class NeedsSnapshot(BaseException):
    """A single-statement (point) unit asked for a second statement: the backend runs
    it again inside a REPEATABLE READ transaction. A BaseException, like cancellation,
    so that no ``except Exception`` in a body mistakes it for a storage error."""


async def _outcome(cursor: AsyncCursor[Any]) -> Outcome:
    """The current result of ``cursor``, rows read (none for a command). Asked of the
    result itself: ``cursor.description`` builds a ``Column`` per column on every call,
    a tenth of a point read's time for a record's 27 columns."""
    result = cursor.pgresult
    returns_rows = result is not None and (result.nfields > 0 or result.status in _TUPLES)
    rows = await cursor.fetchall() if returns_rows else []
    return Outcome(rows, cursor.rowcount)


_TUPLES: Final = frozenset({ExecStatus.TUPLES_OK, ExecStatus.SINGLE_TUPLE,
                            ExecStatus.TUPLES_CHUNK})


class PostgresTransaction:
    """Runs on a pooled connection; the backend ends it with :meth:`commit` or
    :meth:`roll_back`.

    Nothing is sent until a statement's result is needed: ``begin`` and every statement
    whose result no caller reads wait in :attr:`_queued` and go with the next round trip
    (see the module docstring). A unit that sends nothing costs nothing.

    With ``begin=None`` the transaction is a single statement in autocommit (a point
    read): one round trip, no BEGIN or COMMIT, the statement's own snapshot; a second
    statement raises :class:`NeedsSnapshot` instead of reading another snapshot.

    ``lock`` (write transactions only) is queued once, right before the first
    statement that is not *lock-free* (see the backend's docstring). Lock-free
    statements are appends, claims and deletions by id that row locks alone make safe:
    storing and purging retrieval snapshots, acknowledging outbox events, leasing index
    jobs with ``SKIP LOCKED``.
    """

    __slots__ = ("_action", "_began", "_conn", "_literals", "_lock", "_queued", "_single",
                 "_stats", "_write_tx", "erasure", "idempotency", "jobs", "outbox",
                 "postings", "queued_cas", "records", "revisions", "snapshots", "vectors",
                 "versions")

    chunk = _CHUNK
    content_bytes = "octet_length(content)"

    def __init__(self, conn: AsyncConnection[Row], *, begin: str | None,
                 stats: PostgresStats, lock: WriterLock | None = None,
                 write: bool = False, queued_cas: bool = False) -> None:
        self._conn = conn
        self.queued_cas = queued_cas
        """The schema has ``compare_and_set_applied`` (v12): a compare-and-set of a
        record read in this transaction may be queued."""
        self._stats = stats
        self._single = begin is None
        self._queued: list[Statement] = [] if begin is None else [Statement(begin)]
        self._lock = lock
        self._write_tx = write
        self._action = "write" if write else "read"
        self._began = False
        """Whether anything was sent."""
        self._literals: AsyncClientCursor[Any] | None = None
        self.records = PostgresRecords(self)
        self.postings = PostgresLexicalSearch(self)
        self.versions = SqlVersions(self)
        self.idempotency = SqlIdempotency(self)
        self.outbox = SqlOutbox(self)
        self.jobs = PostgresIndexJobs(self)
        self.vectors = PostgresVectors(self)
        self.snapshots = SqlSnapshots(self)
        self.erasure = PostgresErasure(self)
        self.revisions = SqlScopeRevisions(self)

    @property
    def connection(self) -> AsyncConnection[Row]:
        return self._conn

    # -- sending ----------------------------------------------------------------------

    async def _exchange(self, statements: Sequence[Statement], *,
                        tuples: bool = False, binary: bool = False) -> list[Outcome]:
        """One round trip: the queued statements, then ``statements``; returns what each
        of ``statements`` returned.

        A statement alone goes as itself (extended protocol; psycopg prepares it once
        it is used often). Several go as one simple-protocol query, their parameters
        bound client-side by psycopg (its client-side cursor's quoting): the server runs
        them in order and stops at the first error, and psycopg spends one send and one
        wait on all of them. (psycopg's pipeline mode would keep the statements
        prepared, but it spends an event-loop wait on each statement, and a pipeline
        interrupted by cancellation could leave the connection in pipeline mode, where
        later statements return nothing.) ``binary`` results (PostgreSQL's binary
        format: vectors arrive as raw bytes instead of hex text twice their size) need
        the extended protocol, so the queue goes first, in a round trip of its own.
        ``tuples`` makes rows plain tuples (postings come by the ten thousand).
        """
        if self._single and self._began:
            raise NeedsSnapshot
        if binary and self._queued:
            await self._exchange([])
        queued, self._queued = self._queued, []
        if not self._began:
            self._began = True
            if self._write_tx:
                self._stats.writes += 1
            else:
                self._stats.reads += 1
        batch = [*queued, *statements]
        self._stats.round_trips += 1
        self._stats.statements += len(batch)
        cursor = (self._conn.cursor(row_factory=tuple_row) if tuples
                  else self._conn.cursor())
        with translated(self._action):
            if len(batch) == 1:
                await cursor.execute(batch[0].sql, batch[0].params, binary=binary)
                return [await _outcome(cursor)] if statements else []
            await cursor.execute(self._simple_query(batch), prepare=False)
            for _ in queued:
                cursor.nextset()
            outcomes = []
            for _ in statements:
                outcomes.append(await _outcome(cursor))
                cursor.nextset()
            return outcomes

    def _simple_query(self, statements: Sequence[Statement]) -> str:
        if self._literals is None:
            self._literals = AsyncClientCursor(self._conn)
        literals = self._literals
        return "; ".join(statement.sql if statement.params is None
                         else literals.mogrify(statement.sql, statement.params)
                         for statement in statements)

    async def serialized(self) -> None:
        lock, self._lock = self._lock, None
        if lock is None:
            return
        if not lock.tried:
            self._queued.append(Statement(lock.sql, lock.params))
            return
        (outcome,) = await self._exchange([Statement(lock.sql, lock.params)])
        if not outcome.rows or not outcome.rows[0]["granted"]:
            raise MemoryUnavailableError("postgres write: another writer holds the lock")

    async def flush(self) -> None:
        """Send what is queued (before a COPY, which cannot share a query)."""
        if self._queued:
            await self._exchange([])

    # -- the dialect hooks (sql_dialect.SqlDialect) -----------------------------------

    def q(self, sql: str) -> str:
        return sql.replace("?", "%s")

    def member(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} = ANY(?)", [list(values)]

    def text(self, value: str | None) -> Any:
        return encode_text(value)  # text cannot hold U+0000: free text is UTF-8 bytea

    def untext(self, value: Any) -> str | None:
        return decode_text(value)

    def record_from_row(self, row: Any) -> MemoryRecord:
        return record_from_row(row)

    async def rows(self, sql: str, params: Params = (), *,
                   lock_free: bool = False, binary: bool = False) -> list[Row]:
        if not lock_free:
            await self.serialized()
        (outcome,) = await self._exchange([Statement(sql, params)], binary=binary)
        return outcome.rows

    async def tuples(self, sql: str, params: Params = (), *,
                     binary: bool = False) -> list[tuple[Any, ...]]:
        """Like :meth:`rows`, as plain tuples."""
        await self.serialized()
        (outcome,) = await self._exchange([Statement(sql, params)], tuples=True,
                                          binary=binary)
        return outcome.rows

    async def write(self, sql: str, params: Params = (), *, lock_free: bool = False) -> int:
        if not lock_free:
            await self.serialized()
        (outcome,) = await self._exchange([Statement(sql, params)])
        return outcome.rowcount

    async def queue(self, sql: str, params: Params = None, *,
                    lock_free: bool = False) -> None:
        """Send ``sql`` with the next round trip; its result is never read."""
        if not lock_free:
            await self.serialized()
        self._queued.append(Statement(sql, params))

    async def write_many(self, statements: Sequence[tuple[str, Params]], *,
                         lock_free: bool = False) -> list[int]:
        """All of them in one round trip."""
        return [outcome.rowcount
                for outcome in await self.round_trip(statements, lock_free=lock_free)]

    async def vector_pairs(self, sql: str, params: Params) -> list[tuple[str, bytes]]:
        """In binary and as plain tuples: they are decoded on the event loop, and a
        vector then arrives as its raw bytes (text would be hex, twice the size, decoded
        again), already the ``(str, bytes)`` the port returns, without a dict or a copy
        per row (an index build reads 5,000 per page)."""
        return cast(list[tuple[str, bytes]], await self.tuples(sql, params, binary=True))

    async def round_trip(self, statements: Sequence[tuple[str, Params]], *,
                         lock_free: bool = False) -> list[Outcome]:
        """``statements`` after whatever is queued, in one round trip; what each
        returned."""
        if not lock_free:
            await self.serialized()
        return await self._exchange([Statement(sql, params) for sql, params in statements])

    # -- ending -----------------------------------------------------------------------

    async def commit(self) -> None:
        """COMMIT with whatever is still queued, in one round trip; nothing at all if
        the unit sent nothing (it read and wrote nothing)."""
        if self._single or (not self._began and len(self._queued) == 1):
            self._queued.clear()
            return
        self._queued.append(Statement("COMMIT"))
        await self._exchange([])
        if self._write_tx:
            self._stats.commits += 1

    async def roll_back(self) -> None:
        """Drop what is queued and roll back on the server if a transaction is open
        there. A failure here is not raised (the unit's own error is): the pool rolls
        back or discards a connection returned in any state but idle."""
        self._queued.clear()
        if self._conn.pgconn.transaction_status not in (TransactionStatus.INTRANS,
                                                       TransactionStatus.INERROR):
            return
        self._stats.rollbacks += 1
        self._stats.round_trips += 1
        self._stats.statements += 1
        try:
            await self._conn.execute("ROLLBACK")
        except psycopg.Error:
            logger.debug("postgres rollback failed", exc_info=True)

    async def compute(self, work: Callable[[], T]) -> T:
        """On a worker thread: a PostgreSQL unit runs on the event loop, which must not
        build or scan an index.

        Shielded: once handed over, ``work`` runs to its end even if the caller is
        cancelled meanwhile (its changes to an index are made whole under the index's lock; a
        half-run one would be wiped anyway), and the caller's cancellation still
        propagates at once. The unit's statements are not touched by it.
        """
        future = asyncio.get_running_loop().run_in_executor(None, work)
        future.add_done_callback(_consume)
        return await asyncio.shield(future)
