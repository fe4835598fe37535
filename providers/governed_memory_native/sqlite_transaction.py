"""One SQLite transaction: the port's reads and writes as SQL.

Every filter (scope, status, expiry, type, entities, metadata) is a SQL predicate, so a
record of another scope is never even fetched into Python. Statements only ever take
bound parameters; the few pieces spliced into SQL text are placeholders we generate.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Final, TypeVar

from governed_memory.embedding import EmbedderIdentity
from governed_memory.errors import MemoryStorageError, MemoryValidationError
from governed_memory.events import MemoryEvent
from governed_memory.indexing import IndexJob, JobState
from governed_memory.records import (
    MemoryRecord,
    MemoryType,
    MemoryVersion,
)

from governed_memory_native.indexing_config import DEFAULT_LEXICAL_DELTA_MAX
from governed_memory_native.lexical_topk import top_k
from governed_memory_native.port import (
    IdempotencyEntry,
    Removal,
    ScoredRecord,
    SearchPage,
    SearchQuery,
    VectorQuery,
    VectorScopeState,
)
from governed_memory_native.shared_statements import SharedStatements
from governed_memory_native.snapshots import dumps, record_to_json
from governed_memory_native.sqlite_errors import translated
from governed_memory_native.sqlite_lexical import LexicalWrites, SqlitePostings
from governed_memory_native.sqlite_rows import (
    RECORD_COLUMNS,
    SELECT_RECORD,
    record_from_row,
    record_params,
)
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

_CHUNK: Final = 500
"""Ids bound per statement; far below SQLite's variable limit."""
_INT64: Final = (-(2**63), 2**63 - 1)

_VISIBLE: Final = "r.status = 'active' AND (r.expires_at IS NULL OR r.expires_at > ?)"

_REPLACED: Final = tuple(name for name in RECORD_COLUMNS
                         if name not in {"id", "scope_hash", "tenant_id", "user_id", "scope"})
"""The columns a replace writes: a record's id and scope never change (the statement
matches both), and leaving them out of ``SET`` keeps SQLite from rewriting the entries of
the indexes on them (``memory_records_scope_id``, ``memory_records_user``): two pages per
update."""


def _marks(count: int) -> str:
    return ", ".join("?" * count)


def _chunks(items: Sequence[T]) -> Iterable[Sequence[T]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start:start + _CHUNK]


def _metadata_clause(name: str, value: Any) -> tuple[str, list[Any]]:
    """Equality on one top-level key that respects JSON types (``"1"`` is not ``1``)."""
    base = ("EXISTS (SELECT 1 FROM json_each(r.metadata) AS m "
            "WHERE m.key = ? AND ")
    if value is None:
        return base + "m.type = 'null')", [name]
    if isinstance(value, bool):
        return base + "m.type = ?)", [name, "true" if value else "false"]
    if isinstance(value, int | float):
        bound: float | int = value
        if isinstance(value, int) and not _INT64[0] <= value <= _INT64[1]:
            bound = float(value)
        return base + "m.type IN ('integer', 'real') AND m.value = ?)", [name, bound]
    if isinstance(value, str):
        return base + "m.type = 'text' AND m.value = ?)", [name, value]
    raise MemoryValidationError("metadata_filter compares scalar values for equality",
                                field=f"metadata_filter.{name}")


def _needs_records(query: SearchQuery) -> bool:
    """Whether a lexical search's filters read columns only ``memory_records`` has."""
    return bool(query.memory_types or query.entity_ids or query.metadata_filter)


def _filter_clause(query: SearchQuery, copied: str = "r") -> tuple[str, list[Any]]:
    """The type, entity, metadata, validity and visibility filters as one SQL boolean
    (``1`` when none). Validity and visibility are read from the ``copied`` alias: ``p``
    (the lexical postings carry copies of them) in a lexical search, ``r`` elsewhere."""
    clauses: list[str] = []
    params: list[Any] = []
    if query.memory_types:
        clauses.append(f"r.memory_type IN ({_marks(len(query.memory_types))})")
        params.extend(kind.value for kind in query.memory_types)
    if query.entity_ids:
        clauses.append("EXISTS (SELECT 1 FROM json_each(r.entity_ids) AS e "
                       f"WHERE e.value IN ({_marks(len(query.entity_ids))}))")
        params.extend(query.entity_ids)
    for name, value in sorted(query.metadata_filter.items()):
        clause, values = _metadata_clause(name, value)
        clauses.append(clause)
        params.extend(values)
    if query.valid_at is not None:
        clauses.append(f"({copied}.valid_from IS NULL OR {copied}.valid_from <= ?)"
                       f" AND ({copied}.invalid_at IS NULL OR {copied}.invalid_at > ?)")
        params.extend([query.valid_at, query.valid_at])
    if query.visibilities:
        clauses.append(f"{copied}.visibility IN ({_marks(len(query.visibilities))})")
        params.extend(visibility.value for visibility in query.visibilities)
    return ("(" + " AND ".join(clauses) + ")" if clauses else "1"), params


class UnitCancelled(Exception):
    """The caller of a unit of work was cancelled: stop before the next statement."""


class SqliteTransaction(SharedStatements):
    """Runs on a connection that already holds ``BEGIN`` (reads) or ``BEGIN IMMEDIATE``."""

    placeholder = "?"

    def __init__(self, conn: sqlite3.Connection, *,
                 hop: Callable[[Callable[[], Any]], Awaitable[Any]] | None = None,
                 cancel: threading.Event | None = None,
                 delta_max: int = DEFAULT_LEXICAL_DELTA_MAX) -> None:
        """``conn`` already holds the transaction. Without ``hop`` the statements run
        right here, on the thread driving the unit of work; with it each statement is
        sent to the connection's thread (the ``reading()``/``writing()`` contexts that
        tooling uses). ``cancel`` set means the caller is gone: the next statement
        raises :class:`UnitCancelled` instead of running, so the unit rolls back.
        ``delta_max`` bounds each scope's lexical delta (see :mod:`sqlite_lexical`)."""
        self._conn = conn
        self._hop = hop
        self._cancel = cancel
        self.erased_any = False
        """Set once this transaction erased a record, so its commit must also clear the
        WAL of the erased bytes."""
        self._lexical = LexicalWrites(self, delta_max)

    @property
    def full_deltas(self) -> frozenset[int]:
        """Scopes (ids) this transaction left with a full lexical delta: once it
        commits, they are due for a merge."""
        return frozenset(self._lexical.due)

    async def seal(self) -> None:
        """Run just before COMMIT. Nothing is left to do here since schema v9: the
        lexical index is plain tables whose erased rows ``secure_delete`` zeroes, so
        erasure no longer merges (rewrites) a global FTS5 index of every tenant."""

    async def fetch(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Rows as tuples, of a read or of a write with ``RETURNING``
        (:class:`sqlite_lexical.Statements`)."""
        return await self._tuples(sql, params)

    async def execute(self, sql: str, params: Sequence[Any]) -> int:
        return await self._write(sql, params)

    async def merge_lexical_delta(self, scope_ids: Sequence[int], at_least: int) -> int:
        """Merge the lexical delta of those scopes holding at least ``at_least`` rows
        into the main tables; how many rows were merged."""
        return await self._lexical.merge(scope_ids, at_least)

    async def _rows(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[Any]:
        if self._hop is not None:
            rows: list[Any] = await self._hop(lambda: self._fetch(sql, params))
            return rows
        return self._fetch(sql, params)

    async def _write(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> int:
        if self._hop is not None:
            changed: int = await self._hop(lambda: self._change(sql, params)[0])
            return changed
        return self._change(sql, params)[0]

    async def _insert(self, sql: str, params: Sequence[Any] | dict[str, Any]) -> int:
        """Run an INSERT; returns the new row's rowid."""
        if self._hop is not None:
            rowid: int = await self._hop(lambda: self._change(sql, params)[1])
            return rowid
        return self._change(sql, params)[1]

    async def _returning(self, sql: str, params: Sequence[Any] | dict[str, Any]
                         ) -> list[tuple[Any, ...]]:
        """Run a write with ``RETURNING``; the rows it returned."""
        if self._hop is not None:
            rows: list[tuple[Any, ...]] = await self._hop(lambda: self._change_returning(
                sql, params))
            return rows
        return self._change_returning(sql, params)

    def _change_returning(self, sql: str, params: Sequence[Any] | dict[str, Any]
                          ) -> list[tuple[Any, ...]]:
        self.check_cancel()
        with translated("write"):
            cursor = self._conn.cursor()
            cursor.row_factory = None
            return cursor.execute(sql, params).fetchall()

    def _fetch(self, sql: str, params: Sequence[Any] | dict[str, Any]) -> list[Any]:
        self.check_cancel()
        with translated("read"):
            return self._conn.execute(sql, params).fetchall()

    async def _tuples(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Like :meth:`_rows`, as plain tuples: postings come by the ten thousand, and a
        tuple costs a fraction of an ``sqlite3.Row``."""
        if self._hop is not None:
            rows: list[tuple[Any, ...]] = await self._hop(lambda: self._fetch_tuples(sql, params))
            return rows
        return self._fetch_tuples(sql, params)

    def _fetch_tuples(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        self.check_cancel()
        with translated("read"):
            cursor = self._conn.cursor()
            cursor.row_factory = None
            return cursor.execute(sql, params).fetchall()

    def _change(self, sql: str, params: Sequence[Any] | dict[str, Any]) -> tuple[int, int]:
        self.check_cancel()
        with translated("write"):
            cursor = self._conn.execute(sql, params)
            return int(cursor.rowcount), int(cursor.lastrowid or 0)

    def check_cancel(self) -> None:
        if self._cancel is not None and self._cancel.is_set():
            raise UnitCancelled

    def _record_from_row(self, row: Any) -> MemoryRecord:
        return record_from_row(row)

    # -- reads ------------------------------------------------------------------------

    async def record_by_key(self, scope_hash: str, key: str) -> MemoryRecord | None:
        rows = await self._rows(
            f"SELECT {SELECT_RECORD} FROM memory_records AS r "
            "WHERE r.scope_hash = ? AND r.record_key = ? AND r.status <> 'deleted'",
            (scope_hash, key),
        )
        return record_from_row(rows[0]) if rows else None

    async def list_visible(
        self, scope_hash: str, after_id: str | None, limit: int,
        memory_types: tuple[MemoryType, ...], now: float,
    ) -> list[MemoryRecord]:
        sql = [f"SELECT {SELECT_RECORD} FROM memory_records AS r WHERE r.scope_hash = ? AND",
               _VISIBLE]
        params: list[Any] = [scope_hash, now]
        if after_id is not None:
            sql.append("AND r.id > ?")
            params.append(after_id)
        if memory_types:
            sql.append(f"AND r.memory_type IN ({_marks(len(memory_types))})")
            params.extend(kind.value for kind in memory_types)
        sql.append("ORDER BY r.id LIMIT ?")
        params.append(limit)
        return [record_from_row(row) for row in await self._rows(" ".join(sql), params)]

    async def search(self, query: SearchQuery) -> SearchPage:
        """BM25 over the requested scopes' visible records: :func:`lexical_topk.top_k`
        over :class:`_SqlitePostings`, so scores and order equal the other backends'.

        Every statistic is scope-local and read from ``lexical_scopes`` and
        ``lexical_terms``; postings are read by ``(scope, term)`` through the primary
        key of ``lexical_postings``, and the scopes' (bounded) delta and tombstones once
        (:mod:`sqlite_lexical`). Nothing counts or scans the corpus, and no row of
        another scope is read. Full rows are read for the winners only.
        """
        if not query.tokens or not query.scope_hashes:
            return SearchPage(matches=(), candidates=0)
        source = SqlitePostings(
            self, query, _filter_clause(query, copied="p"),
            "JOIN memory_records AS r ON r.seq = p.doc" if _needs_records(query) else "")
        found = await top_k(source, query.tokens, query.limit)
        if not found.ranked:
            return SearchPage(matches=(), candidates=found.candidates)
        winners = [doc for doc, _ in found.ranked]
        full = {
            int(row["seq"]): record_from_row(row)
            for row in await self._rows(
                f"SELECT r.seq, {SELECT_RECORD} FROM memory_records AS r "
                f"WHERE r.seq IN ({_marks(len(winners))})", winners,
            )
        }
        return SearchPage(
            matches=tuple(ScoredRecord(full[doc], score) for doc, score in found.ranked),
            candidates=found.candidates,
        )

    async def versions(self, record_id: str) -> list[MemoryVersion]:
        rows = await self._rows(
            f"SELECT {VERSION_COLUMNS} FROM memory_versions WHERE record_id = ? ORDER BY version",
            (record_id,),
        )
        return [version_from_row(row, row["operation_id"]) for row in rows]

    async def version(self, record_id: str, version: int) -> MemoryVersion | None:
        rows = await self._rows(
            f"SELECT {VERSION_COLUMNS} FROM memory_versions WHERE record_id = ? AND version = ?",
            (record_id, version),
        )
        return version_from_row(rows[0], rows[0]["operation_id"]) if rows else None

    async def idempotency(
        self, scope_hash: str, operation: str, key: str
    ) -> IdempotencyEntry | None:
        rows = await self._rows(
            f"SELECT {IDEMPOTENCY_COLUMNS} FROM memory_idempotency"
            " WHERE scope_hash = ? AND operation = ? AND idem_key = ?",
            (scope_hash, operation, key),
        )
        return idempotency_from_row(rows[0], rows[0]["idem_key"]) if rows else None

    async def usage(self, tenant_id: str, scope_hash: str | None, now: float) -> tuple[int, int]:
        sql = ("SELECT COUNT(*), COALESCE(SUM(LENGTH(CAST(content AS BLOB))), 0) "
               "FROM memory_records WHERE tenant_id = ? AND status <> 'deleted' "
               "AND (expires_at IS NULL OR expires_at > ?)")
        params: list[Any] = [tenant_id, now]
        if scope_hash is not None:
            sql += " AND scope_hash = ?"
            params.append(scope_hash)
        rows = await self._rows(sql, params)
        return int(rows[0][0]), int(rows[0][1])

    async def live_record_count(self, now: float) -> int:
        """Every record minus those of ``memory_records_corpus`` that are not live: the
        partial index holds every record that is not active-and-never-expiring, so the
        count reads two narrow indexes instead of every row."""
        rows = await self._tuples(
            "SELECT (SELECT count(*) FROM memory_records) - (SELECT count(*)"
            " FROM memory_records WHERE (expires_at IS NOT NULL OR status <> 'active')"
            " AND NOT (status <> 'deleted' AND (expires_at IS NULL OR expires_at > ?)))",
            (now,))
        return int(rows[0][0])

    async def pending_events(self, limit: int) -> list[MemoryEvent]:
        rows = await self._rows("SELECT body FROM event_outbox ORDER BY seq LIMIT ?", (limit,))
        return [event_from_json(str(row[0])) for row in rows]

    async def vector_candidates(self, query: VectorQuery) -> list[tuple[str, bytes]]:
        filters = query.filters
        wanted, params = _filter_clause(filters)
        sql = ("SELECT r.id, v.vector FROM memory_records AS r JOIN memory_vectors AS v"
               " ON v.record_id = r.id AND v.identity = ? AND v.content_hash = r.content_hash"
               f" WHERE r.scope_hash IN ({_marks(len(filters.scope_hashes))}) AND {_VISIBLE}"
               f" AND {wanted}")
        bound = [str(query.identity), *filters.scope_hashes, filters.now, *params]
        if query.among is None:
            rows = await self._tuples(sql, bound)
        else:
            # A vector index's shortlist: look the ids up one by one. The unary ``+``
            # keeps the planner off the scope's indexes, which would walk the whole scope
            # (linear in its size) to find a few dozen records.
            sql = sql.replace("WHERE r.scope_hash IN", "WHERE +r.scope_hash IN").replace(
                "r.status = 'active'", "+r.status = 'active'")
            rows = []
            for chunk in _chunks(list(dict.fromkeys(query.among))):
                rows.extend(await self._tuples(f"{sql} AND r.id IN ({_marks(len(chunk))})",
                                               [*bound, *chunk]))
        return [(str(row[0]), bytes(row[1])) for row in rows]

    # -- the vector change log (port.VectorChangeLog) -----------------------------------

    async def vector_scope_states(self, identity: EmbedderIdentity,
                                  scope_hashes: Sequence[str]) -> dict[str, VectorScopeState]:
        states: dict[str, VectorScopeState] = {}
        for chunk in _chunks(list(dict.fromkeys(scope_hashes))):
            rows = await self._tuples(
                "SELECT scope_hash, seq, vectors FROM vector_scopes WHERE identity = ?"
                f" AND scope_hash IN ({_marks(len(chunk))})", [str(identity), *chunk])
            states.update((str(row[0]), VectorScopeState(int(row[1]), int(row[2])))
                          for row in rows)
        return states

    async def vector_changes(self, identity: EmbedderIdentity, scope_hash: str,
                             after_seq: int, limit: int) -> list[tuple[int, str]]:
        rows = await self._tuples(
            "SELECT seq, record_id FROM vector_changes WHERE identity = ? AND scope_hash = ?"
            " AND seq > ? ORDER BY seq LIMIT ?", [str(identity), scope_hash, after_seq, limit])
        return [(int(row[0]), str(row[1])) for row in rows]

    async def scope_vectors(self, identity: EmbedderIdentity, scope_hash: str,
                            after_id: str | None, limit: int) -> list[tuple[str, bytes]]:
        rows = await self._tuples(
            "SELECT record_id, vector FROM memory_vectors WHERE identity = ? AND scope_hash = ?"
            " AND record_id > ? ORDER BY record_id LIMIT ?",
            [str(identity), scope_hash, after_id or "", limit])
        return [(str(row[0]), bytes(row[1])) for row in rows]

    async def vectors_by_ids(self, identity: EmbedderIdentity, scope_hash: str,
                             record_ids: Sequence[str]) -> list[tuple[str, bytes]]:
        found: list[tuple[str, bytes]] = []
        for chunk in _chunks(list(dict.fromkeys(record_ids))):
            rows = await self._tuples(
                "SELECT record_id, vector FROM memory_vectors WHERE identity = ?"
                f" AND scope_hash = ? AND record_id IN ({_marks(len(chunk))})",
                [str(identity), scope_hash, *chunk])
            found.extend((str(row[0]), bytes(row[1])) for row in rows)
        return found

    async def compute(self, work: Callable[[], T]) -> T:
        """Inline: a unit of work already runs on a storage thread (the statement-at-a-
        time contexts run on the event loop, but only tooling uses them)."""
        self.check_cancel()
        return work()

    async def records_by_ids(self, scope_hashes: Sequence[str],
                             record_ids: Sequence[str]) -> list[MemoryRecord]:
        found: list[MemoryRecord] = []
        for chunk in _chunks(list(dict.fromkeys(record_ids))):
            rows = await self._rows(
                f"SELECT {SELECT_RECORD} FROM memory_records AS r"
                f" WHERE r.id IN ({_marks(len(chunk))})"
                f" AND r.scope_hash IN ({_marks(len(scope_hashes))})",
                [*chunk, *scope_hashes],
            )
            found.extend(record_from_row(row) for row in rows)
        return found

    async def records_missing_vectors(
        self, identity: EmbedderIdentity, after_id: str | None, limit: int, now: float,
    ) -> tuple[list[tuple[str, str, int]], int, str | None]:
        rows = await self._rows(
            "SELECT r.id, r.scope_hash, r.version, v.record_id IS NULL AS missing"
            " FROM memory_records AS r LEFT JOIN memory_vectors AS v"
            " ON v.record_id = r.id AND v.identity = ? AND v.content_hash = r.content_hash"
            " WHERE r.id > ? AND r.status <> 'deleted'"
            " AND (r.expires_at IS NULL OR r.expires_at > ?) ORDER BY r.id LIMIT ?",
            (str(identity), after_id or "", now, limit),
        )
        missing = [(str(row[0]), str(row[1]), int(row[2])) for row in rows if row[3]]
        return missing, len(rows), (str(rows[-1][0]) if rows else None)

    async def snapshot(self, snapshot_id: str) -> Mapping[str, Any] | None:
        rows = await self._rows("SELECT body FROM retrieval_snapshots WHERE snapshot_id = ?",
                                (snapshot_id,))
        return snapshot_body(rows[0][0]) if rows else None

    # -- writes -----------------------------------------------------------------------

    async def insert_record(self, record: MemoryRecord) -> None:
        columns = ", ".join(RECORD_COLUMNS)
        values = ", ".join(f":{name}" for name in RECORD_COLUMNS)
        terms = words(record.content)  # tokenized once: token_count and the postings
        params = record_params(record)
        params["token_count"] = len(terms)
        seq = await self._insert(
            f"INSERT INTO memory_records ({columns}, token_count) "
            f"VALUES ({values}, :token_count)",
            params,
        )
        await self._lexical.add(seq, record, terms)

    async def replace_record(self, record: MemoryRecord, expected_revision: str) -> bool:
        assignments = ", ".join(f"{name} = :{name}" for name in _REPLACED)
        terms = words(record.content)
        params = record_params(record)
        params["expected_revision"] = expected_revision
        params["token_count"] = len(terms)
        rows = await self._returning(
            f"UPDATE memory_records SET {assignments}, token_count = :token_count "
            "WHERE id = :id AND scope_hash = :scope_hash AND revision = :expected_revision"
            " RETURNING seq",
            params,
        )
        if len(rows) != 1:
            return False
        await self._lexical.replace(int(rows[0][0]), record, terms)
        return True

    async def append_version(self, version: MemoryVersion) -> None:
        await self._write(
            "INSERT INTO memory_versions"
            " (record_id, version, operation, recorded_at, operation_id, snapshot)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (version.record.id, version.record.version, version.operation.value,
             version.recorded_at, version.operation_id, record_to_json(version.record)),
        )

    async def put_idempotency(self, entry: IdempotencyEntry) -> None:
        await self._write(
            "INSERT OR REPLACE INTO memory_idempotency (scope_hash, operation, idem_key,"
            " fingerprint, record_id, tenant_id, user_id, version, revision, hard, erased,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (entry.scope_hash, entry.operation, entry.key, entry.fingerprint, entry.record_id,
             entry.tenant_id, entry.user_id, entry.version, entry.revision, int(entry.hard),
             int(entry.erased), entry.created_at),
        )

    async def acknowledge_events(self, event_ids: Sequence[str]) -> int:
        removed = 0
        for chunk in _chunks(sorted(set(event_ids))):
            removed += await self._write(
                f"DELETE FROM event_outbox WHERE event_id IN ({_marks(len(chunk))})", chunk
            )
        return removed

    async def remove_vectors(self, record_id: str) -> int:
        return await self._write("DELETE FROM memory_vectors WHERE record_id = ?", (record_id,))

    async def enqueue_index_job(self, job: IndexJob) -> None:
        await self._write(
            "DELETE FROM index_jobs WHERE record_id = ? AND state = 'pending' AND version <= ?",
            (job.record_id, job.version),
        )
        await self._write(
            f"INSERT INTO index_jobs ({JOB_COLUMNS}) VALUES ({_marks(len(JOB_FIELDS))})",
            [job_value(job, name) for name in JOB_FIELDS],
        )

    async def lease_index_jobs(self, owner: str, now: float, lease_until: float,
                               limit: int) -> list[IndexJob]:
        rows = await self._rows(
            "SELECT job_id FROM index_jobs"
            " WHERE (state = 'pending' AND next_attempt_at <= ?)"
            " OR (state = 'leased' AND lease_expires_at <= ?) ORDER BY seq LIMIT ?",
            (now, now, limit),
        )
        ids = [str(row[0]) for row in rows]
        if not ids:
            return []
        marks = _marks(len(ids))
        await self._write(
            "UPDATE index_jobs SET state = 'leased', lease_owner = ?, lease_expires_at = ?,"
            f" attempts = attempts + 1 WHERE job_id IN ({marks})",
            [owner, lease_until, *ids],
        )
        leased = await self._rows(
            f"SELECT {JOB_COLUMNS} FROM index_jobs WHERE job_id IN ({marks}) ORDER BY seq", ids)
        return [job_from_row(row) for row in leased]

    async def settle_index_job(self, job: IndexJob, *, done: bool,
                               next_attempt_at: float | None = None,
                               error_code: str | None = None) -> bool:
        held = "job_id = ? AND state = 'leased' AND lease_owner = ? AND attempts = ?"
        lease = (job.job_id, job.lease_owner, job.attempts)
        if done:
            return await self._write(f"DELETE FROM index_jobs WHERE {held}", lease) == 1
        state = JobState.DEAD if next_attempt_at is None else JobState.PENDING
        return await self._write(
            "UPDATE index_jobs SET state = ?, next_attempt_at = coalesce(?, next_attempt_at),"
            f" lease_owner = NULL, lease_expires_at = NULL, last_error_code = ? WHERE {held}",
            (state.value, next_attempt_at, error_code, *lease),
        ) == 1

    async def requeue_dead_jobs(self, job_ids: Sequence[str] | None, now: float) -> int:
        update = ("UPDATE index_jobs SET state = 'pending', attempts = 0, next_attempt_at = ?"
                  " WHERE state = 'dead'")
        if job_ids is None:
            return await self._write(update, (now,))
        requeued = 0
        for chunk in _chunks(sorted(set(job_ids))):
            requeued += await self._write(f"{update} AND job_id IN ({_marks(len(chunk))})",
                                          [now, *chunk])
        return requeued

    async def put_snapshot(self, snapshot_id: str, tenant_id: str, body: Mapping[str, Any],
                           *, created_at: float, subjects: Sequence[str]) -> None:
        await self._write(
            "INSERT INTO retrieval_snapshots (snapshot_id, tenant_id, body, created_at)"
            " VALUES (?, ?, ?, ?)",
            (snapshot_id, tenant_id, dumps(body), created_at),
        )
        for user_id in sorted(set(subjects)):
            await self._write(
                "INSERT INTO retrieval_snapshot_subjects (tenant_id, user_id, snapshot_id)"
                " VALUES (?, ?, ?)", (tenant_id, user_id, snapshot_id))

    async def erase_snapshots_of_user(self, tenant_id: str, user_id: str,
                                      tombstone: Mapping[str, Any]) -> int:
        rows = await self._rows(
            "SELECT snapshot_id FROM retrieval_snapshot_subjects"
            " WHERE tenant_id = ? AND user_id = ?", (tenant_id, user_id))
        for row in rows:
            snapshot_id = str(row[0])
            await self._write("DELETE FROM retrieval_snapshot_subjects WHERE snapshot_id = ?",
                              (snapshot_id,))
            await self._write("UPDATE retrieval_snapshots SET body = ? WHERE snapshot_id = ?",
                              (dumps({**tombstone, "snapshot_id": snapshot_id}), snapshot_id))
        return len(rows)

    async def add_erasure_progress(self, tenant_id: str, user_id: str, removal: Removal,
                                   started_at: float) -> None:
        prior, began = await self._erasure_progress(tenant_id, user_id)
        total = prior + removal
        await self._write(
            "INSERT OR REPLACE INTO erasure_progress (tenant_id, user_id, records, versions,"
            " index_entries, idempotency_entries, scope_hashes, started_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (tenant_id, user_id, total.records, total.versions, total.index_entries,
             total.idempotency_entries, dumps(sorted(total.scope_hashes)),
             started_at if began is None else min(began, started_at)),
        )

    async def take_erasure_progress(self, tenant_id: str,
                                    user_id: str) -> tuple[Removal, float | None]:
        found = await self._erasure_progress(tenant_id, user_id)
        await self._write("DELETE FROM erasure_progress WHERE tenant_id = ? AND user_id = ?",
                          (tenant_id, user_id))
        return found

    async def _erasure_progress(self, tenant_id: str,
                                user_id: str) -> tuple[Removal, float | None]:
        rows = await self._rows(
            f"SELECT {PROGRESS_COLUMNS} FROM erasure_progress"
            " WHERE tenant_id = ? AND user_id = ?",
            (tenant_id, user_id))
        if not rows:
            return Removal(), None
        row = rows[0]
        try:
            return progress_from_row(row, json.loads(row["scope_hashes"]))
        except (ValueError, TypeError):
            raise MemoryStorageError("a stored erasure progress row could not be read"
                                     ) from None

    async def purge_snapshots(self, before: float, limit: int) -> int:
        rows = await self._rows(
            "SELECT snapshot_id FROM retrieval_snapshots WHERE created_at < ?"
            " ORDER BY created_at LIMIT ?", (before, limit))
        ids = [str(row[0]) for row in rows]
        if not ids:
            return 0
        marks = _marks(len(ids))
        await self._write(
            f"DELETE FROM retrieval_snapshot_subjects WHERE snapshot_id IN ({marks})", ids)
        return await self._write(
            f"DELETE FROM retrieval_snapshots WHERE snapshot_id IN ({marks})", ids)

    async def erase_records(
        self, record_ids: Sequence[str], *, tombstone_idempotency: bool = False
    ) -> Removal:
        removal = Removal()
        for chunk in _chunks(sorted(set(record_ids))):
            marks = _marks(len(chunk))
            rows = await self._rows(
                f"SELECT seq, scope_hash FROM memory_records WHERE id IN ({marks})", chunk
            )
            if not rows:
                continue
            self.erased_any = True
            indexed = await self._lexical.erase([int(row[0]) for row in rows])
            vectors = await self._write(
                f"DELETE FROM memory_vectors WHERE record_id IN ({marks})", chunk)
            await self._write(f"DELETE FROM index_jobs WHERE record_id IN ({marks})", chunk)
            versions = await self._write(
                f"DELETE FROM memory_versions WHERE record_id IN ({marks})", chunk
            )
            if tombstone_idempotency:
                await self._write(
                    f"UPDATE memory_idempotency SET erased = 1 WHERE record_id IN ({marks})",
                    chunk,
                )
                entries = 0
            else:
                entries = await self._write(
                    f"DELETE FROM memory_idempotency WHERE record_id IN ({marks})", chunk
                )
            records = await self._write(f"DELETE FROM memory_records WHERE id IN ({marks})", chunk)
            removal += Removal(
                records=records, versions=versions,
                index_entries=indexed + vectors,
                idempotency_entries=entries,
                scope_hashes=frozenset(str(row[1]) for row in rows),
            )
        return removal

    async def erase_idempotency(
        self, *, scope_hash: str | None = None,
        tenant_user: tuple[str, str] | None = None,
    ) -> Removal:
        if scope_hash is not None:
            where, params = "scope_hash = ?", [scope_hash]
        elif tenant_user is not None:
            where, params = "tenant_id = ? AND user_id = ?", list(tenant_user)
        else:
            return Removal()
        hashes = await self._rows(
            f"SELECT DISTINCT scope_hash FROM memory_idempotency WHERE {where}", params
        )
        removed = await self._write(f"DELETE FROM memory_idempotency WHERE {where}", params)
        return Removal(idempotency_entries=removed,
                       scope_hashes=frozenset(str(row[0]) for row in hashes))
