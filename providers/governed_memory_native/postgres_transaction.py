"""One PostgreSQL transaction: the port's reads and writes as SQL, in few round trips.

Every filter (scope, status, expiry, type, entities, metadata) is a SQL predicate, so a
record of another scope is never even fetched into Python. Statements only take bound
parameters; the few pieces spliced into SQL text are clauses and names we generate.

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

Lexical search scores exactly as the other backends do (see :meth:`search`): the
``lexical_*`` tables hold each scope's statistics and the shared tokenizer's words, kept
on every write, and :mod:`lexical_topk` ranks over them, reading postings by
``(scope, term)`` through the primary key.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Final, TypeVar, cast

import attrs
import psycopg
from governed_memory.embedding import EmbedderIdentity
from governed_memory.errors import MemoryUnavailableError, MemoryValidationError
from governed_memory.events import MemoryEvent
from governed_memory.indexing import IndexJob, JobState
from governed_memory.records import (
    MemoryRecord,
    MemoryType,
    MemoryVersion,
    RecordStatus,
)
from psycopg import AsyncClientCursor, AsyncConnection, AsyncCursor
from psycopg.pq import TransactionStatus
from psycopg.rows import tuple_row

from governed_memory_native.lexical_topk import ExpiredDocument, Statistics, top_k
from governed_memory_native.port import (
    IdempotencyEntry,
    Removal,
    ScoredRecord,
    SearchPage,
    SearchQuery,
    StoredVector,
    VectorQuery,
    VectorScopeState,
)
from governed_memory_native.postgres_errors import logger, translated
from governed_memory_native.postgres_rows import (
    RECORD_COLUMNS,
    SELECT_RECORD,
    decode_text,
    encode_text,
    record_from_row,
    record_params,
)
from governed_memory_native.shared_statements import SharedStatements
from governed_memory_native.snapshots import dumps, record_to_json
from governed_memory_native.stored_rows import (
    IDEMPOTENCY_COLUMNS,
    JOB_COLUMNS,
    JOB_FIELDS,
    PROGRESS_COLUMNS,
    VERSION_COLUMNS,
    event_from_json,
    idempotency_from_row,
    job_from_row,
    job_value,
    progress_from_row,
    snapshot_body,
    version_from_row,
)
from governed_memory_native.tokens import words

T = TypeVar("T")
Row = dict[str, Any]
Params = Sequence[Any] | Mapping[str, Any] | None

_CHUNK: Final = 1000
"""Ids per erasure statement: bounds the size of one statement's lock set and arrays."""

_JOB_RETURNING: Final = ", ".join(f"j.{name}" for name in JOB_FIELDS)

_VISIBLE: Final = ("r.status = 'active'"
                   " AND (r.expires_at IS NULL OR r.expires_at > %(now)s)")

_STATISTICS: Final = (
    "WITH s AS (SELECT scope_id, documents, total_length FROM lexical_scopes"
    " WHERE scope_hash = ANY(%(scopes)s))"
    " SELECT 'scope' AS kind, NULL::text AS term, s.scope_id::bigint AS a,"
    " s.documents AS b, s.total_length AS c FROM s"
    " UNION ALL SELECT 'term', t.term, NULL, sum(t.documents)::bigint, NULL"
    " FROM lexical_terms AS t JOIN s USING (scope_id)"
    " WHERE t.term = ANY(%(terms)s) GROUP BY t.term"
    # active records of the scopes that expired by now: counted, but not in the corpus
    " UNION ALL SELECT 'expired', p.term, r.seq, r.token_count::bigint, p.tf::bigint"
    " FROM memory_records AS r LEFT JOIN lexical_postings AS p"
    " ON p.doc = r.seq AND p.term = ANY(%(terms)s)"
    " WHERE r.scope_hash = ANY(%(scopes)s) AND r.status = 'active'"
    " AND r.expires_at <= %(now)s"
)
"""A search's statistics in one round trip: each scope's id, record count and total
length, each query term's document frequency summed over the scopes, and the expired
records the stored statistics still count (with their query-term frequencies)."""

_LEXICAL_INDEX: Final = (
    " s AS (INSERT INTO lexical_scopes AS l (scope_hash, documents, total_length)"
    " SELECT %(lex_scope)s, 1, %(lex_length)s FROM r ON CONFLICT (scope_hash) DO UPDATE"
    " SET documents = l.documents + 1, total_length = l.total_length + excluded.total_length"
    " RETURNING scope_id),"
    " d AS (INSERT INTO lexical_docs (doc, scope_id, length)"
    " SELECT r.seq, s.scope_id, %(lex_length)s FROM r, s),"
    " p AS (INSERT INTO lexical_postings (scope_id, term, doc, tf, length, visibility,"
    " valid_from, invalid_at) SELECT s.scope_id, t.term, r.seq, t.tf, %(lex_length)s,"
    " %(lex_visibility)s, %(lex_valid_from)s, %(lex_invalid_at)s"
    " FROM r, s, unnest(%(lex_terms)s::text[], %(lex_tfs)s::int[]) AS t (term, tf))"
    " INSERT INTO lexical_terms AS lt (scope_id, term, documents)"
    " SELECT s.scope_id, t.term, 1 FROM s, unnest(%(lex_terms)s::text[]) AS t (term)"
    " ON CONFLICT (scope_id, term) DO UPDATE SET documents = lt.documents + 1"
)
"""Count the record of CTE ``r`` (its ``seq``) in its scope's lexical index:
statistics, document row, postings and term frequencies. Preceded by ``WITH r AS
(...),``: the record's own insert, so an add is one statement, or the ``seq`` a
compare-and-set returned."""

_UNINDEX: Final = (
    "WITH gone AS (DELETE FROM lexical_docs WHERE doc = ANY(%(docs)s)"
    " RETURNING doc, scope_id, length),"
    " per_scope AS (SELECT scope_id, count(*) AS n, sum(length) AS total FROM gone"
    " GROUP BY scope_id),"
    " shrunk AS (UPDATE lexical_scopes AS l SET documents = l.documents - g.n,"
    " total_length = l.total_length - g.total FROM per_scope AS g"
    " WHERE l.scope_id = g.scope_id AND l.documents > g.n),"
    " emptied AS (DELETE FROM lexical_scopes AS l USING per_scope AS g"
    " WHERE l.scope_id = g.scope_id AND l.documents <= g.n),"
    " postings AS (DELETE FROM lexical_postings WHERE doc = ANY(%(docs)s)"
    " RETURNING scope_id, term),"
    " per_term AS (SELECT scope_id, term, count(*) AS n FROM postings"
    " GROUP BY scope_id, term),"
    " fewer AS (UPDATE lexical_terms AS t SET documents = t.documents - c.n"
    " FROM per_term AS c WHERE t.scope_id = c.scope_id AND t.term = c.term"
    " AND t.documents > c.n),"
    " unused AS (DELETE FROM lexical_terms AS t USING per_term AS c"
    " WHERE t.scope_id = c.scope_id AND t.term = c.term AND t.documents <= c.n)"
    " SELECT count(*) AS n FROM gone"
)
"""Take records out of the lexical index exactly, in one statement: their postings and
document rows go, statistics shrink, and a term (or scope) left with no record loses its
row, so an erased word leaves nothing behind. Returns how many records were indexed.
The documents are given as a literal array: the planner then knows how few there are
(an array from a subquery is assumed to hold ten, and it chose to scan every term of
the store)."""

_ERASE: Final = (
    _UNINDEX,
    "DELETE FROM memory_vectors WHERE record_id = ANY(%(ids)s)",
    "DELETE FROM index_jobs WHERE record_id = ANY(%(ids)s)",
    "DELETE FROM memory_versions WHERE record_id = ANY(%(ids)s)",
)
"""One chunk's erasure before its idempotency entries and records go, in order: the
records' index rows, vectors, jobs and versions."""


def _chunks(items: Sequence[T]) -> Iterable[Sequence[T]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start:start + _CHUNK]


def _metadata_clause(index: int, name: str, value: Any) -> tuple[str, dict[str, Any]]:
    """Equality on one top-level key that respects JSON types (``"1"`` is not ``1``).

    Strings and booleans compare the stored JSON text of the value with its canonical
    encoding (every write stores ``snapshots.dumps`` output), which needs no unescaping
    and so works for any string; numbers compare numerically, as JSON numbers do.
    """
    key, val = f"mk{index}", f"mv{index}"
    member = f"(r.metadata::json -> %({key})s)"
    kind = f"json_typeof{member}"
    params: dict[str, Any] = {key: name}
    if value is None:
        return f"{kind} = 'null'", params
    if isinstance(value, bool | str):
        params[val] = dumps(value)
        expected = "'boolean'" if isinstance(value, bool) else "'string'"
        return f"({kind} = {expected} AND {member}::text = %({val})s)", params
    if isinstance(value, int):
        params[val] = value
        return f"({kind} = 'number' AND ({member}::text)::numeric = %({val})s::numeric)", params
    if isinstance(value, float):
        params[val] = value
        return f"({kind} = 'number' AND ({member}::text)::float8 = %({val})s::float8)", params
    raise MemoryValidationError("metadata_filter compares scalar values for equality",
                                field=f"metadata_filter.{name}")


def _filter_clause(query: SearchQuery, copied: str = "r") -> tuple[str, dict[str, Any]]:
    """The type, entity, metadata, validity and visibility filters as one SQL boolean
    (``true`` when none).

    Validity and visibility are read from the ``copied`` alias: ``p`` (the postings,
    which carry copies of them) in a lexical search, ``r`` elsewhere. The other filters
    always need ``memory_records AS r``.
    """
    clauses: list[str] = []
    params: dict[str, Any] = {}
    if query.memory_types:
        clauses.append("r.memory_type = ANY(%(types)s)")
        params["types"] = [kind.value for kind in query.memory_types]
    if query.entity_ids:
        clauses.append("EXISTS (SELECT 1 FROM json_array_elements_text(r.entity_ids::json)"
                       " AS e (v) WHERE e.v = ANY(%(entities)s))")
        params["entities"] = list(query.entity_ids)
    for index, (name, value) in enumerate(sorted(query.metadata_filter.items())):
        clause, values = _metadata_clause(index, name, value)
        clauses.append(clause)
        params.update(values)
    if query.valid_at is not None:
        clauses.append(f"({copied}.valid_from IS NULL OR {copied}.valid_from <= %(valid_at)s)"
                       f" AND ({copied}.invalid_at IS NULL OR {copied}.invalid_at > %(valid_at)s)")
        params["valid_at"] = query.valid_at
    if query.visibilities:
        clauses.append(f"{copied}.visibility = ANY(%(visibilities)s)")
        params["visibilities"] = [visibility.value for visibility in query.visibilities]
    return ("(" + " AND ".join(clauses) + ")" if clauses else "true"), params


def _needs_records(query: SearchQuery) -> bool:
    """Whether a lexical search's filters read columns only ``memory_records`` has."""
    return bool(query.memory_types or query.entity_ids or query.metadata_filter)


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


@attrs.frozen(slots=True)
class Outcome:
    """What one statement of a round trip returned."""

    rows: list[Any]
    rowcount: int


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
    """The current result of ``cursor``, rows read (none for a command)."""
    rows = await cursor.fetchall() if cursor.description is not None else []
    return Outcome(rows, cursor.rowcount)


class PostgresTransaction(SharedStatements):
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

    placeholder = "%s"

    def __init__(self, conn: AsyncConnection[Row], *, begin: str | None,
                 stats: PostgresStats, lock: WriterLock | None = None,
                 write: bool = False) -> None:
        self._conn = conn
        self._stats = stats
        self._single = begin is None
        self._queued: list[Statement] = [] if begin is None else [Statement(begin)]
        self._lock = lock
        self._write_tx = write
        self._action = "write" if write else "read"
        self._began = False
        """Whether anything was sent."""
        self._deferring = False
        self._literals: AsyncClientCursor[Any] | None = None

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

    async def _serialized(self) -> None:
        lock, self._lock = self._lock, None
        if lock is None:
            return
        if not lock.tried:
            self._queued.append(Statement(lock.sql, lock.params))
            return
        (outcome,) = await self._exchange([Statement(lock.sql, lock.params)])
        if not outcome.rows or not outcome.rows[0]["granted"]:
            raise MemoryUnavailableError("postgres write: another writer holds the lock")

    async def _queue(self, sql: str, params: Params = None, *,
                     lock_free: bool = False) -> None:
        """Send ``sql`` with the next round trip; its result is never read."""
        if not lock_free:
            await self._serialized()
        self._queued.append(Statement(sql, params))

    async def _rows(self, sql: str, params: Params = (), *,
                    lock_free: bool = False, binary: bool = False) -> list[Row]:
        if not lock_free:
            await self._serialized()
        (outcome,) = await self._exchange([Statement(sql, params)], binary=binary)
        return outcome.rows

    async def _tuples(self, sql: str, params: Params, *,
                      binary: bool = False) -> list[tuple[Any, ...]]:
        """Like :meth:`_rows`, as plain tuples."""
        await self._serialized()
        (outcome,) = await self._exchange([Statement(sql, params)], tuples=True,
                                          binary=binary)
        return outcome.rows

    async def _write(self, sql: str, params: Params = (), *,
                     lock_free: bool = False) -> int:
        """How many rows ``sql`` changed; queued instead (and 0) inside
        :meth:`_deferred`, whose callers never read the count."""
        if self._deferring:
            await self._queue(sql, params, lock_free=lock_free)
            return 0
        if not lock_free:
            await self._serialized()
        (outcome,) = await self._exchange([Statement(sql, params)])
        return outcome.rowcount

    @contextmanager
    def _deferred(self) -> Iterator[None]:
        """Queue the :class:`SharedStatements` writes made inside: for port methods that
        return nothing, whose statements' counts nobody reads."""
        self._deferring = True
        try:
            yield
        finally:
            self._deferring = False

    async def _flush(self) -> None:
        """Send what is queued (before a COPY, which cannot share a query)."""
        if self._queued:
            await self._exchange([])

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

    def _record_from_row(self, row: Any) -> MemoryRecord:
        return record_from_row(row)

    # -- reads ------------------------------------------------------------------------

    async def record_by_key(self, scope_hash: str, key: str) -> MemoryRecord | None:
        rows = await self._rows(
            f"SELECT {SELECT_RECORD} FROM memory_records AS r"
            " WHERE r.scope_hash = %s AND r.record_key = %s AND r.status <> 'deleted'",
            (scope_hash, encode_text(key)),
        )
        return record_from_row(rows[0]) if rows else None

    async def list_visible(
        self, scope_hash: str, after_id: str | None, limit: int,
        memory_types: tuple[MemoryType, ...], now: float,
    ) -> list[MemoryRecord]:
        sql = [f"SELECT {SELECT_RECORD} FROM memory_records AS r"
               " WHERE r.scope_hash = %(scope)s AND", _VISIBLE]
        params: dict[str, Any] = {"scope": scope_hash, "now": now, "limit": limit}
        if after_id is not None:
            sql.append("AND r.id > %(after)s")
            params["after"] = after_id
        if memory_types:
            sql.append("AND r.memory_type = ANY(%(types)s)")
            params["types"] = [kind.value for kind in memory_types]
        sql.append("ORDER BY r.id LIMIT %(limit)s")
        return [record_from_row(row) for row in await self._rows(" ".join(sql), params)]

    async def search(self, query: SearchQuery) -> SearchPage:
        """BM25 over the requested scopes' visible records: :func:`lexical_topk.top_k`
        over :class:`_PostgresPostings`, so scores and order equal the other backends'.

        PostgreSQL's own text search is not used for ranking: its parsers and
        dictionaries split and stem words differently from :mod:`tokens`, and
        ``ts_rank`` is not BM25, so neither matches nor scores would equal the other
        backends'. Full rows are read for the winners only.
        """
        if not query.tokens or not query.scope_hashes:
            return SearchPage(matches=(), candidates=0)
        found = await top_k(_PostgresPostings(self, query), query.tokens, query.limit)
        if not found.ranked:
            return SearchPage(matches=(), candidates=found.candidates)
        winners = [doc for doc, _ in found.ranked]
        full = {
            int(row["seq"]): record_from_row(row)
            for row in await self._rows(
                f"SELECT r.seq, {SELECT_RECORD} FROM memory_records AS r"
                " WHERE r.seq = ANY(%s)", (winners,),
            )
        }
        return SearchPage(
            matches=tuple(ScoredRecord(full[doc], score) for doc, score in found.ranked),
            candidates=found.candidates,
        )

    async def versions(self, record_id: str) -> list[MemoryVersion]:
        rows = await self._rows(
            f"SELECT {VERSION_COLUMNS} FROM memory_versions WHERE record_id = %s ORDER BY version",
            (record_id,),
        )
        return [version_from_row(row, decode_text(row["operation_id"])) for row in rows]

    async def version(self, record_id: str, version: int) -> MemoryVersion | None:
        rows = await self._rows(
            f"SELECT {VERSION_COLUMNS} FROM memory_versions"
            " WHERE record_id = %s AND version = %s",
            (record_id, version),
        )
        if not rows:
            return None
        return version_from_row(rows[0], decode_text(rows[0]["operation_id"]))

    async def idempotency(
        self, scope_hash: str, operation: str, key: str
    ) -> IdempotencyEntry | None:
        rows = await self._rows(
            f"SELECT {IDEMPOTENCY_COLUMNS} FROM memory_idempotency"
            " WHERE scope_hash = %s AND operation = %s AND idem_key = %s",
            (scope_hash, operation, encode_text(key)),
        )
        if not rows:
            return None
        return idempotency_from_row(rows[0], cast(str, decode_text(rows[0]["idem_key"])))

    async def usage(self, tenant_id: str, scope_hash: str | None, now: float) -> tuple[int, int]:
        sql = ("SELECT count(*) AS n, coalesce(sum(octet_length(content)), 0) AS bytes"
               " FROM memory_records WHERE tenant_id = %(tenant)s AND status <> 'deleted'"
               " AND (expires_at IS NULL OR expires_at > %(now)s)")
        params: dict[str, Any] = {"tenant": tenant_id, "now": now}
        if scope_hash is not None:
            sql += " AND scope_hash = %(scope)s"
            params["scope"] = scope_hash
        rows = await self._rows(sql, params)
        return int(rows[0]["n"]), int(rows[0]["bytes"])

    async def pending_events(self, limit: int) -> list[MemoryEvent]:
        rows = await self._rows(
            "SELECT body FROM event_outbox ORDER BY seq LIMIT %s", (limit,)
        )
        return [event_from_json(str(row["body"])) for row in rows]

    async def vector_candidates(self, query: VectorQuery) -> list[tuple[str, bytes]]:
        """The stored vectors of the records passing every hard filter; with
        ``query.among`` (a vector index's shortlist), of those records only.

        The shortlist's records are read first, by id, in a subquery the planner cannot
        flatten (``OFFSET 0``), and filtered afterwards: left to itself, on a table whose
        statistics lag behind its growth (a bulk load, a young scope), the planner
        walked the scope's ``(scope_hash, status, ...)`` index, linear in the scope's
        size, to find a few dozen records."""
        filters = query.filters
        wanted, params = _filter_clause(filters)
        params.update(identity=str(query.identity), scopes=list(filters.scope_hashes),
                      now=filters.now)
        sql = ("SELECT r.id AS id, v.vector AS vector FROM {records} AS r"
               " JOIN memory_vectors AS v ON v.record_id = r.id AND v.identity = %(identity)s"
               " AND v.content_hash = r.content_hash"
               f" WHERE r.scope_hash = ANY(%(scopes)s) AND {_VISIBLE} AND {wanted}")
        if query.among is None:
            return await self._vectors(sql.format(records="memory_records"), params)
        shortlist = sql.format(records="(SELECT * FROM memory_records"
                                       " WHERE id = ANY(%(among)s) OFFSET 0)")
        rows: list[tuple[str, bytes]] = []
        for chunk in _chunks(list(dict.fromkeys(query.among))):
            rows += await self._vectors(shortlist, {**params, "among": list(chunk)})
        return rows

    async def _vectors(self, sql: str, params: Params) -> list[tuple[str, bytes]]:
        """``(record id, vector)`` rows of ``sql``, in binary and as plain tuples: they
        are decoded on the event loop, and a vector then arrives as its raw bytes (text
        would be hex, twice the size, decoded again), already the ``(str, bytes)`` the
        port returns, without a dict or a copy per row (an index build reads 5,000 per
        page)."""
        return cast(list[tuple[str, bytes]], await self._tuples(sql, params, binary=True))

    # -- the vector change log (port.VectorChangeLog) -----------------------------------
    #
    # Kept by the triggers on memory_vectors (postgres_schema v7). A search reads it in its
    # REPEATABLE READ snapshot: every change up to the seq it reads is visible to it, and
    # none after (see postgres_schema._vector_bump).

    async def vector_scope_states(self, identity: EmbedderIdentity,
                                  scope_hashes: Sequence[str]) -> dict[str, VectorScopeState]:
        rows = await self._tuples(
            "SELECT scope_hash, seq, vectors FROM vector_scopes WHERE identity = %s"
            " AND scope_hash = ANY(%s)", (str(identity), list(dict.fromkeys(scope_hashes))))
        return {str(scope_hash): VectorScopeState(int(seq), int(vectors))
                for scope_hash, seq, vectors in rows}

    async def vector_changes(self, identity: EmbedderIdentity, scope_hash: str,
                             after_seq: int, limit: int) -> list[tuple[int, str]]:
        rows = await self._tuples(
            "SELECT seq, record_id FROM vector_changes WHERE identity = %s AND scope_hash = %s"
            " AND seq > %s ORDER BY seq LIMIT %s", (str(identity), scope_hash, after_seq, limit))
        return [(int(seq), str(record_id)) for seq, record_id in rows]

    async def scope_vectors(self, identity: EmbedderIdentity, scope_hash: str,
                            after_id: str | None, limit: int) -> list[tuple[str, bytes]]:
        """A page of the scope's vectors in record id order, through the index on
        ``(identity, scope_hash, record_id)``."""
        return await self._vectors(
            "SELECT record_id, vector FROM memory_vectors WHERE identity = %s"
            " AND scope_hash = %s AND record_id > %s ORDER BY record_id LIMIT %s",
            (str(identity), scope_hash, after_id or "", limit))

    async def vectors_by_ids(self, identity: EmbedderIdentity, scope_hash: str,
                             record_ids: Sequence[str]) -> list[tuple[str, bytes]]:
        found: list[tuple[str, bytes]] = []
        for chunk in _chunks(list(dict.fromkeys(record_ids))):
            found += await self._vectors(
                "SELECT record_id, vector FROM memory_vectors WHERE identity = %s"
                " AND scope_hash = %s AND record_id = ANY(%s)",
                (str(identity), scope_hash, list(chunk)))
        return found

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

    async def records_by_ids(self, scope_hashes: Sequence[str],
                             record_ids: Sequence[str]) -> list[MemoryRecord]:
        found: list[MemoryRecord] = []
        for chunk in _chunks(list(dict.fromkeys(record_ids))):
            rows = await self._rows(
                f"SELECT {SELECT_RECORD} FROM memory_records AS r"
                " WHERE r.id = ANY(%s) AND r.scope_hash = ANY(%s)",
                (list(chunk), list(scope_hashes)),
            )
            found.extend(record_from_row(row) for row in rows)
        return found

    async def records_missing_vectors(
        self, identity: EmbedderIdentity, after_id: str | None, limit: int, now: float,
    ) -> tuple[list[tuple[str, str, int]], int, str | None]:
        rows = await self._rows(
            "SELECT r.id, r.scope_hash, r.version, v.record_id IS NULL AS missing"
            " FROM memory_records AS r LEFT JOIN memory_vectors AS v"
            " ON v.record_id = r.id AND v.identity = %s AND v.content_hash = r.content_hash"
            " WHERE r.id > %s AND r.status <> 'deleted'"
            " AND (r.expires_at IS NULL OR r.expires_at > %s) ORDER BY r.id LIMIT %s",
            (str(identity), after_id or "", now, limit),
        )
        missing = [(str(row["id"]), str(row["scope_hash"]), int(row["version"]))
                   for row in rows if row["missing"]]
        return missing, len(rows), (str(rows[-1]["id"]) if rows else None)

    async def snapshot(self, snapshot_id: str) -> Mapping[str, Any] | None:
        rows = await self._rows(
            "SELECT body FROM retrieval_snapshots WHERE snapshot_id = %s", (snapshot_id,))
        return snapshot_body(rows[0]["body"]) if rows else None

    # -- writes -----------------------------------------------------------------------

    @staticmethod
    def _lexical_params(record: MemoryRecord) -> dict[str, Any]:
        """:data:`_LEXICAL_INDEX`'s parameters for ``record``'s current content."""
        terms = words(record.content)
        counts = Counter(terms)
        return {"lex_scope": record.scope_hash, "lex_length": len(terms),
                "lex_visibility": record.visibility.value,
                "lex_valid_from": record.valid_from, "lex_invalid_at": record.invalid_at,
                "lex_terms": list(counts), "lex_tfs": list(counts.values())}

    async def insert_record(self, record: MemoryRecord) -> None:
        """One queued statement: the row and, for an active record, its index rows. A
        key already held fails it (and the unit) with a conflict at the next round
        trip."""
        columns = ", ".join(RECORD_COLUMNS)
        values = ", ".join(f"%({name})s" for name in RECORD_COLUMNS)
        params = record_params(record)
        params["token_count"] = len(words(record.content))
        insert = (f"INSERT INTO memory_records ({columns}, token_count)"
                  f" VALUES ({values}, %(token_count)s)")
        if record.status is not RecordStatus.ACTIVE:
            await self._queue(insert, params)
            return
        params.update(self._lexical_params(record))
        await self._queue(f"WITH r AS ({insert} RETURNING seq),{_LEXICAL_INDEX}", params)

    async def insert_new_records(self, versions: Sequence[MemoryVersion]) -> None:
        """Bulk form of ``insert_record`` + ``append_version`` for new active records
        (imports, benchmark seeding): the same rows, written with three COPYs.

        Not part of the port and not used by the provider, which writes one record per
        transaction; it skips nothing a row needs, only the per-statement round trips.
        """
        if not versions:
            return
        await self._serialized()
        await self._flush()  # BEGIN and the locks: a COPY cannot share their query
        columns = ", ".join(RECORD_COLUMNS)
        with translated("write"):
            async with self._conn.cursor() as cursor:
                async with cursor.copy(
                        f"COPY memory_records ({columns}, token_count) FROM STDIN") as copy:
                    for version in versions:
                        params = record_params(version.record)
                        await copy.write_row([*(params[name] for name in RECORD_COLUMNS),
                                              len(words(version.record.content))])
                await cursor.execute(
                    "SELECT seq, id FROM memory_records WHERE id = ANY(%s)",
                    ([version.record.id for version in versions],))
                seqs = {str(row["id"]): int(row["seq"]) for row in await cursor.fetchall()}
                await self._bulk_index(cursor, [
                    (seqs[version.record.id], version.record) for version in versions
                    if version.record.status is RecordStatus.ACTIVE])
                async with cursor.copy(
                        "COPY memory_versions (record_id, version, operation, recorded_at,"
                        " operation_id, snapshot) FROM STDIN") as copy:
                    for version in versions:
                        await copy.write_row([
                            version.record.id, version.record.version,
                            version.operation.value, version.recorded_at,
                            encode_text(version.operation_id), record_to_json(version.record)])

    async def _bulk_index(self, cursor: Any, indexed: Sequence[tuple[int, MemoryRecord]]
                          ) -> None:
        """:data:`_LEXICAL_INDEX` for many records: statistics and term frequencies summed per
        scope in Python, documents and postings by COPY."""
        if not indexed:
            return
        documents: Counter[str] = Counter()
        lengths: Counter[str] = Counter()
        frequencies: dict[tuple[str, str], int] = Counter()
        tokenized = []
        for seq, record in indexed:
            counts = Counter(words(record.content))
            length = sum(counts.values())
            documents[record.scope_hash] += 1
            lengths[record.scope_hash] += length
            for term in counts:
                frequencies[record.scope_hash, term] += 1
            tokenized.append((seq, record, counts, length))
        scopes = sorted(documents)
        await cursor.execute(
            "INSERT INTO lexical_scopes AS l (scope_hash, documents, total_length)"
            " SELECT * FROM unnest(%s::text[], %s::bigint[], %s::bigint[])"
            " ON CONFLICT (scope_hash) DO UPDATE SET"
            " documents = l.documents + excluded.documents,"
            " total_length = l.total_length + excluded.total_length"
            " RETURNING scope_id, scope_hash",
            (scopes, [documents[h] for h in scopes], [lengths[h] for h in scopes]))
        ids = {str(row["scope_hash"]): int(row["scope_id"]) for row in await cursor.fetchall()}
        async with cursor.copy("COPY lexical_docs (doc, scope_id, length) FROM STDIN") as copy:
            for seq, record, _, length in tokenized:
                await copy.write_row([seq, ids[record.scope_hash], length])
        async with cursor.copy(
                "COPY lexical_postings (scope_id, term, doc, tf, length, visibility,"
                " valid_from, invalid_at) FROM STDIN") as copy:
            for seq, record, counts, length in tokenized:
                for term, tf in counts.items():
                    await copy.write_row([ids[record.scope_hash], term, seq, tf, length,
                                          record.visibility.value, record.valid_from,
                                          record.invalid_at])
        keys = sorted(frequencies)
        await cursor.execute(
            "INSERT INTO lexical_terms AS t (scope_id, term, documents)"
            " SELECT * FROM unnest(%s::int[], %s::text[], %s::int[])"
            " ON CONFLICT (scope_id, term) DO UPDATE"
            " SET documents = t.documents + excluded.documents",
            ([ids[h] for h, _ in keys], [term for _, term in keys],
             [frequencies[key] for key in keys]))
        # A bulk load changes the tables' shape faster than autovacuum notices: without
        # fresh planner statistics, probes and postings reads got plans 30x slower.
        await cursor.execute("ANALYZE lexical_postings, lexical_terms, lexical_docs")

    async def replace_record(self, record: MemoryRecord, expected_revision: str) -> bool:
        """Compare-and-set: the UPDATE goes alone (so psycopg prepares it), since its
        result says whether it applied. If it did, the re-index (the record's removal
        from the lexical index and, if it stays active, its index rows for the new
        content) is queued behind it: every later statement of the unit runs after
        it."""
        assignments = ", ".join(
            f"{name} = %({name})s" for name in RECORD_COLUMNS if name != "id"
        )
        params = record_params(record)
        params["expected_revision"] = expected_revision
        params["token_count"] = len(words(record.content))
        rows = await self._rows(
            f"UPDATE memory_records SET {assignments}, token_count = %(token_count)s"
            " WHERE id = %(id)s AND scope_hash = %(scope_hash)s"
            " AND revision = %(expected_revision)s RETURNING seq",
            params,
        )
        if len(rows) != 1:
            return False
        seq = int(rows[0]["seq"])
        await self._queue(_UNINDEX, {"docs": [seq]})
        if record.status is RecordStatus.ACTIVE:
            await self._queue(f"WITH r AS (SELECT %(doc)s::bigint AS seq),{_LEXICAL_INDEX}",
                              {"doc": seq, **self._lexical_params(record)})
        return True

    async def append_version(self, version: MemoryVersion) -> None:
        await self._queue(
            "INSERT INTO memory_versions"
            " (record_id, version, operation, recorded_at, operation_id, snapshot)"
            " VALUES (%s, %s, %s, %s, %s, %s)",
            (version.record.id, version.record.version, version.operation.value,
             version.recorded_at, encode_text(version.operation_id),
             record_to_json(version.record)),
        )

    async def put_idempotency(self, entry: IdempotencyEntry) -> None:
        await self._queue(
            "INSERT INTO memory_idempotency (scope_hash, operation, idem_key, fingerprint,"
            " record_id, tenant_id, user_id, version, revision, hard, erased, created_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (scope_hash, operation, idem_key) DO UPDATE SET"
            " fingerprint = excluded.fingerprint, record_id = excluded.record_id,"
            " tenant_id = excluded.tenant_id, user_id = excluded.user_id,"
            " version = excluded.version, revision = excluded.revision,"
            " hard = excluded.hard, erased = excluded.erased,"
            " created_at = excluded.created_at",
            (entry.scope_hash, entry.operation, encode_text(entry.key), entry.fingerprint,
             entry.record_id, entry.tenant_id, entry.user_id, entry.version, entry.revision,
             entry.hard, entry.erased, entry.created_at),
        )

    async def put_event(self, event: MemoryEvent) -> None:
        """The shared statement, queued: it returns nothing."""
        with self._deferred():
            await super().put_event(event)

    async def mark_indexed(self, record_id: str, version: int) -> None:
        """The shared statement, queued: it returns nothing."""
        with self._deferred():
            await super().mark_indexed(record_id, version)

    async def put_vector(self, vector: StoredVector) -> None:
        """The shared statements, queued: they return nothing (the triggers on
        ``memory_vectors`` log the change in the same transaction)."""
        with self._deferred():
            await super().put_vector(vector)

    async def acknowledge_events(self, event_ids: Sequence[str]) -> int:
        """Every chunk's delete in one round trip, before (and without) the writer lock:
        the port returns how many were removed, so this cannot wait for a later one."""
        chunks = [list(chunk) for chunk in _chunks(sorted(set(event_ids)))]
        if not chunks:
            return 0
        outcomes = await self._exchange([
            Statement("DELETE FROM event_outbox WHERE event_id = ANY(%s)", (chunk,))
            for chunk in chunks])
        return sum(outcome.rowcount for outcome in outcomes)

    async def remove_vectors(self, record_id: str) -> int:
        return await self._write("DELETE FROM memory_vectors WHERE record_id = %s",
                                 (record_id,))

    async def enqueue_index_job(self, job: IndexJob) -> None:
        await self._queue(
            "DELETE FROM index_jobs WHERE record_id = %s AND state = 'pending'"
            " AND version <= %s",
            (job.record_id, job.version),
        )
        await self._queue(
            f"INSERT INTO index_jobs ({JOB_COLUMNS})"
            f" VALUES ({', '.join(['%s'] * len(JOB_FIELDS))})",
            [job_value(job, name) for name in JOB_FIELDS],
        )

    async def lease_index_jobs(self, owner: str, now: float, lease_until: float,
                               limit: int) -> list[IndexJob]:
        """Due jobs, oldest first, locked with ``FOR UPDATE SKIP LOCKED`` and without the
        writer lock: workers lease concurrently, never wait for (or take) a job another
        transaction is leasing right now, and never wait for memory writes."""
        rows = await self._rows(
            "WITH due AS (SELECT seq FROM index_jobs"
            " WHERE (state = 'pending' AND next_attempt_at <= %(now)s)"
            " OR (state = 'leased' AND lease_expires_at <= %(now)s)"
            " ORDER BY seq LIMIT %(limit)s FOR UPDATE SKIP LOCKED)"
            " UPDATE index_jobs AS j SET state = 'leased', lease_owner = %(owner)s,"
            " lease_expires_at = %(until)s, attempts = j.attempts + 1"
            f" FROM due WHERE j.seq = due.seq RETURNING j.seq, {_JOB_RETURNING}",
            {"now": now, "limit": limit, "owner": owner, "until": lease_until},
            lock_free=True,
        )
        return [job_from_row(row) for row in sorted(rows, key=lambda row: int(row["seq"]))]

    async def settle_index_job(self, job: IndexJob, *, done: bool,
                               next_attempt_at: float | None = None,
                               error_code: str | None = None) -> bool:
        held = ("job_id = %(job)s AND state = 'leased' AND lease_owner = %(owner)s"
                " AND attempts = %(attempts)s")
        lease = {"job": job.job_id, "owner": job.lease_owner, "attempts": job.attempts}
        if done:
            return await self._write(f"DELETE FROM index_jobs WHERE {held}", lease) == 1
        state = JobState.DEAD if next_attempt_at is None else JobState.PENDING
        return await self._write(
            "UPDATE index_jobs SET state = %(state)s,"
            " next_attempt_at = coalesce(%(next)s, next_attempt_at),"
            " lease_owner = NULL, lease_expires_at = NULL, last_error_code = %(error)s"
            f" WHERE {held}",
            {**lease, "state": state.value, "next": next_attempt_at, "error": error_code},
        ) == 1

    async def requeue_dead_jobs(self, job_ids: Sequence[str] | None, now: float) -> int:
        update = ("UPDATE index_jobs SET state = 'pending', attempts = 0, next_attempt_at = %s"
                  " WHERE state = 'dead'")
        if job_ids is None:
            return await self._write(update, (now,))
        chunks = [list(chunk) for chunk in _chunks(sorted(set(job_ids)))]
        if not chunks:
            return 0
        await self._serialized()
        outcomes = await self._exchange([
            Statement(f"{update} AND job_id = ANY(%s)", (now, chunk)) for chunk in chunks])
        return sum(outcome.rowcount for outcome in outcomes)

    async def put_snapshot(self, snapshot_id: str, tenant_id: str, body: Mapping[str, Any],
                           *, created_at: float, subjects: Sequence[str]) -> None:
        await self._queue(
            "INSERT INTO retrieval_snapshots (snapshot_id, tenant_id, body, created_at)"
            " VALUES (%s, %s, %s, %s)",
            (snapshot_id, tenant_id, dumps(body), created_at), lock_free=True,
        )
        users = sorted(set(subjects))
        if users:
            await self._queue(
                "INSERT INTO retrieval_snapshot_subjects (tenant_id, user_id, snapshot_id)"
                " SELECT %s, u, %s FROM unnest(%s::text[]) AS u",
                (tenant_id, snapshot_id, users), lock_free=True)

    async def erase_snapshots_of_user(self, tenant_id: str, user_id: str,
                                      tombstone: Mapping[str, Any]) -> int:
        rows = await self._rows(
            "SELECT snapshot_id FROM retrieval_snapshot_subjects"
            " WHERE tenant_id = %s AND user_id = %s ORDER BY snapshot_id",
            (tenant_id, user_id))
        for row in rows:
            snapshot_id = str(row["snapshot_id"])
            await self._queue(
                "DELETE FROM retrieval_snapshot_subjects WHERE snapshot_id = %s",
                (snapshot_id,))
            await self._queue(
                "UPDATE retrieval_snapshots SET body = %s WHERE snapshot_id = %s",
                (dumps({**tombstone, "snapshot_id": snapshot_id}), snapshot_id))
        return len(rows)

    async def purge_snapshots(self, before: float, limit: int) -> int:
        """Lock-free: deletes by id of snapshots past retention; a concurrent purge of the
        same ones waits on their row locks and then finds them gone."""
        rows = await self._rows(
            "SELECT snapshot_id FROM retrieval_snapshots WHERE created_at < %s"
            " ORDER BY created_at, snapshot_id LIMIT %s", (before, limit), lock_free=True)
        ids = [str(row["snapshot_id"]) for row in rows]
        if not ids:
            return 0
        await self._queue(
            "DELETE FROM retrieval_snapshot_subjects WHERE snapshot_id = ANY(%s)", (ids,),
            lock_free=True)
        return await self._write(
            "DELETE FROM retrieval_snapshots WHERE snapshot_id = ANY(%s)", (ids,),
            lock_free=True)

    async def add_erasure_progress(self, tenant_id: str, user_id: str, removal: Removal,
                                   started_at: float) -> None:
        await self._queue(
            "INSERT INTO erasure_progress AS e (tenant_id, user_id, records, versions,"
            " index_entries, idempotency_entries, scope_hashes, started_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (tenant_id, user_id) DO UPDATE SET"
            " records = e.records + excluded.records,"
            " versions = e.versions + excluded.versions,"
            " index_entries = e.index_entries + excluded.index_entries,"
            " idempotency_entries = e.idempotency_entries + excluded.idempotency_entries,"
            " scope_hashes = ARRAY(SELECT DISTINCT h FROM unnest("
            "e.scope_hashes || excluded.scope_hashes) AS h ORDER BY h),"
            " started_at = least(e.started_at, excluded.started_at)",
            (tenant_id, user_id, removal.records, removal.versions, removal.index_entries,
             removal.idempotency_entries, sorted(removal.scope_hashes), started_at),
        )

    async def take_erasure_progress(self, tenant_id: str,
                                    user_id: str) -> tuple[Removal, float | None]:
        rows = await self._rows(
            "DELETE FROM erasure_progress WHERE tenant_id = %s AND user_id = %s"
            f" RETURNING {PROGRESS_COLUMNS}",
            (tenant_id, user_id))
        if not rows:
            return Removal(), None
        return progress_from_row(rows[0], rows[0]["scope_hashes"])

    async def erase_records(
        self, record_ids: Sequence[str], *, tombstone_idempotency: bool = False
    ) -> Removal:
        """Two round trips per chunk of ids: the records' ``seq`` and scopes, then
        :data:`_ERASE`, the idempotency entries (removed, or marked erased) and the
        records themselves, in that order in one query, each statement's count read
        afterwards."""
        idempotency = (
            "UPDATE memory_idempotency SET erased = true WHERE record_id = ANY(%(ids)s)"
            if tombstone_idempotency else
            "DELETE FROM memory_idempotency WHERE record_id = ANY(%(ids)s)")
        removal = Removal()
        for chunk in _chunks(sorted(set(record_ids))):
            ids = list(chunk)
            rows = await self._rows(
                "SELECT seq, scope_hash FROM memory_records WHERE id = ANY(%s)", (ids,))
            if not rows:
                continue
            params = {"ids": ids, "docs": [int(row["seq"]) for row in rows]}
            indexed, vectors, _, versions, entries, records = await self._exchange([
                *(Statement(sql, params) for sql in _ERASE), Statement(idempotency, params),
                Statement("DELETE FROM memory_records WHERE id = ANY(%(ids)s)", params)])
            removal += Removal(
                records=records.rowcount, versions=versions.rowcount,
                index_entries=int(indexed.rows[0]["n"]) + vectors.rowcount,
                idempotency_entries=0 if tombstone_idempotency else entries.rowcount,
                scope_hashes=frozenset(str(row["scope_hash"]) for row in rows),
            )
        return removal

    async def erase_idempotency(
        self, *, scope_hash: str | None = None,
        tenant_user: tuple[str, str] | None = None,
    ) -> Removal:
        if scope_hash is not None:
            where, params = "scope_hash = %s", [scope_hash]
        elif tenant_user is not None:
            where, params = "tenant_id = %s AND user_id = %s", list(tenant_user)
        else:
            return Removal()
        rows = await self._rows(
            f"DELETE FROM memory_idempotency WHERE {where} RETURNING scope_hash", params
        )
        return Removal(idempotency_entries=len(rows),
                       scope_hashes=frozenset(str(row["scope_hash"]) for row in rows))


class _PostgresPostings:
    """:class:`lexical_topk.PostingsSource` over the ``lexical_*`` tables for one search;
    a document is its record's ``seq``. Every statement reads by ``(scope, term)`` or
    by key through an index; none counts or scans the corpus."""

    def __init__(self, tx: PostgresTransaction, query: SearchQuery) -> None:
        self._tx = tx
        self._query = query
        self._scope_ids: list[int] = []
        wanted, self._params = _filter_clause(query, copied="p")
        join = "JOIN memory_records AS r ON r.seq = p.doc" if _needs_records(query) else ""
        self._postings = ("SELECT p.doc AS doc, p.tf AS tf, p.length AS length"
                          f" FROM lexical_postings AS p {join}"
                          " WHERE p.scope_id = ANY(%(ids)s) AND p.term = %(term)s"
                          f" AND {wanted}")

    async def statistics(self, terms: Sequence[str]) -> Statistics[int]:
        rows = await self._tx._rows(_STATISTICS, {
            "scopes": list(dict.fromkeys(self._query.scope_hashes)), "terms": list(terms),
            "now": self._query.now})
        documents = total = 0
        containing: dict[str, int] = {}
        expired: dict[int, tuple[int, dict[str, int]]] = {}
        for row in rows:
            if row["kind"] == "scope":
                self._scope_ids.append(int(row["a"]))
                documents += int(row["b"])
                total += int(row["c"])
            elif row["kind"] == "term":
                containing[str(row["term"])] = int(row["b"])
            else:
                found = expired.setdefault(int(row["a"]), (int(row["b"]), {}))[1]
                if row["term"] is not None:
                    found[str(row["term"])] = int(row["c"])
        return Statistics(documents, total, containing, [
            ExpiredDocument(doc, length, found)
            for doc, (length, found) in sorted(expired.items())])

    async def postings(self, term: str) -> list[tuple[int, int, int]]:
        return await self._tx._tuples(self._postings,
                                      {**self._params, "ids": self._scope_ids, "term": term})

    async def probe(self, term: str, docs: Sequence[int]) -> dict[int, int]:
        found: dict[int, int] = {}
        for chunk in _chunks(list(docs)):
            found.update(await self._tx._tuples(
                "SELECT doc, tf FROM lexical_postings WHERE scope_id = ANY(%s)"
                " AND term = %s AND doc = ANY(%s)", (self._scope_ids, term, list(chunk))))
        return found

    async def identify(self, docs: Sequence[int]) -> dict[int, str]:
        found: dict[int, str] = {}
        for chunk in _chunks(list(docs)):
            rows = await self._tx._rows(
                "SELECT seq, id FROM memory_records WHERE seq = ANY(%s)", (list(chunk),))
            found.update((int(row["seq"]), str(row["id"])) for row in rows)
        return found
