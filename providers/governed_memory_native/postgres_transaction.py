"""One PostgreSQL transaction: the port's reads and writes as SQL.

Every filter (scope, status, expiry, type, entities, metadata) is a SQL predicate, so a
record of another scope is never even fetched into Python. Statements only take bound
parameters; the few pieces spliced into SQL text are clauses and names we generate.

Lexical search scores exactly as the other backends do (see :meth:`search`): the
postings table holds the shared tokenizer's words, PostgreSQL computes the corpus
statistics and a BM25 shortlist, and :mod:`bm25` rescores the shortlist in Python.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Final, TypeVar, cast

from governed_memory.embedding import EmbedderIdentity
from governed_memory.errors import MemoryValidationError
from governed_memory.events import MemoryEvent
from governed_memory.indexing import IndexJob, JobState
from governed_memory.records import (
    MemoryRecord,
    MemoryType,
    MemoryVersion,
    RecordStatus,
)
from psycopg import AsyncConnection

from governed_memory_native.bm25 import K1, B
from governed_memory_native.port import (
    IdempotencyEntry,
    Removal,
    ScoredRecord,
    SearchPage,
    SearchQuery,
    VectorQuery,
)
from governed_memory_native.postgres_errors import translated
from governed_memory_native.postgres_rows import (
    RECORD_COLUMNS,
    SELECT_RECORD,
    decode_text,
    encode_text,
    record_from_row,
    record_params,
)
from governed_memory_native.shared_statements import SharedStatements
from governed_memory_native.shortlist_rescoring import rescore
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

_CHUNK: Final = 1000
"""Ids per erasure statement: bounds the size of one statement's lock set and arrays."""

_JOB_RETURNING: Final = ", ".join(f"j.{name}" for name in JOB_FIELDS)

_VISIBLE: Final = ("r.status = 'active'"
                   " AND (r.expires_at IS NULL OR r.expires_at > %(now)s)")
_CORPUS: Final = "r.scope_hash = ANY(%(scopes)s) AND " + _VISIBLE

_IDF_FLOOR: Final = 1e-6
""":func:`bm25.idf`'s floor, for the SQL shortlist only (Python rescoring uses bm25)."""

_NEAR_CUTOFF: Final = 1 - 1e-9
"""How close to the ``limit``-th SQL score a candidate must be to get rescored in Python.

PostgreSQL sums a document's per-term parts in whatever order the plan meets them, so
its score can differ from :func:`bm25.document_score` in the last bits; that is enough to
reorder exact ties. SQL only shortlists; every document within this (far wider) relative
band of the cutoff is rescored in Python exactly as the memory backend scores it, with
the id breaking true ties."""

_SEARCH: Final = (
    "WITH corpus AS MATERIALIZED ("
    " SELECT count(*) AS size, coalesce(sum(r.token_count), 0)::bigint AS total"
    " FROM memory_records AS r WHERE " + _CORPUS + "),"
    # tf of each query term in each corpus document, and whether it passes the filters
    " postings AS MATERIALIZED ("
    " SELECT p.term AS term, p.seq AS doc, p.tf AS tf, p.len AS len, {wanted} AS wanted"
    " FROM memory_postings AS p {join}"
    " WHERE p.term = ANY(%(terms)s) AND p.scope_hash = ANY(%(scopes)s)"
    " AND p.status = 'active' AND (p.expires_at IS NULL OR p.expires_at > %(now)s)),"
    # df counts every corpus document, filtered out or not, as the memory backend does
    " df AS MATERIALIZED ("
    " SELECT term, count(*) AS df,"
    " ln(((SELECT size FROM corpus) - count(*) + 0.5)::float8 / (count(*) + 0.5)::float8)"
    " AS raw FROM postings GROUP BY term),"
    " weights AS (SELECT term, df, CASE WHEN raw > 0 THEN raw ELSE %(floor)s END AS weight"
    " FROM df),"
    " mean AS (SELECT CASE WHEN total = 0 THEN 1.0::float8"
    " ELSE total::float8 / size END AS length FROM corpus),"
    " scored AS MATERIALIZED ("
    " SELECT p.doc AS doc, sum(w.weight * p.tf * %(k1p1)s / (p.tf + %(k1)s * (%(one_b)s"
    " + %(b)s * p.len / (SELECT length FROM mean)))) AS score"
    " FROM postings AS p JOIN weights AS w USING (term) WHERE p.wanted GROUP BY p.doc),"
    " cutoff AS (SELECT score * %(near)s AS score FROM scored"
    " ORDER BY score DESC LIMIT 1 OFFSET %(offset)s)"
    # every posting of every document near or above the limit-th score
    " SELECT p.doc AS doc, r.id AS id, p.len AS len, p.term AS term, p.tf AS tf,"
    " w.df AS df, corpus.size AS size, corpus.total AS total,"
    " (SELECT count(*) FROM scored) AS candidates"
    " FROM scored AS s JOIN postings AS p ON p.doc = s.doc"
    " JOIN weights AS w USING (term) JOIN memory_records AS r ON r.seq = s.doc"
    " CROSS JOIN corpus"
    " WHERE s.score >= coalesce((SELECT score FROM cutoff), 0)"
)
"""The corpus statistics, the postings of the query terms and a BM25 shortlist, in one
statement; ``{wanted}`` is a clause we generate (joining ``memory_records`` only when a
type, entity or metadata filter needs its columns), every value is bound."""


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


class PostgresTransaction(SharedStatements):
    """Runs on a connection inside a transaction the backend opened (and will end).

    ``serialize`` (write transactions only) takes the schema's writer lock; it runs
    once, before the first statement that is not *lock-free* (see the backend's
    docstring). Lock-free statements are appends, claims and deletions by id that row
    locks alone make safe: storing and purging retrieval snapshots, acknowledging outbox
    events, leasing index jobs with ``SKIP LOCKED``.
    """

    placeholder = "%s"

    def __init__(self, conn: AsyncConnection[Row],
                 serialize: Callable[[], Awaitable[None]] | None = None) -> None:
        self._conn = conn
        self._serialize = serialize

    async def _serialized(self) -> None:
        if self._serialize is not None:
            take, self._serialize = self._serialize, None
            await take()

    async def _rows(self, sql: str, params: Sequence[Any] | dict[str, Any] = (), *,
                    lock_free: bool = False, binary: bool = False) -> list[Row]:
        """``binary`` fetches results in PostgreSQL's binary format: vectors arrive as
        raw bytes instead of hex text twice their size."""
        if not lock_free:
            await self._serialized()
        with translated("read"):
            cursor = await self._conn.execute(sql, params, binary=binary)
            return await cursor.fetchall()

    async def _write(self, sql: str, params: Sequence[Any] | dict[str, Any] = (), *,
                     lock_free: bool = False) -> int:
        if not lock_free:
            await self._serialized()
        with translated("write"):
            cursor = await self._conn.execute(sql, params)
            return cursor.rowcount

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
        """BM25 over the requested scopes' visible records, ``memory_postings`` as the
        term index.

        Every statistic comes from the corpus (the requested scopes' visible records):
        its size and total length from ``token_count``, document frequencies from the
        postings of the query terms joined with ``memory_records`` so every filter stays
        in SQL. PostgreSQL's own text search is not used for ranking: its parsers and
        dictionaries split and stem words differently from :mod:`tokens`, and
        ``ts_rank`` is not BM25, so neither matches nor scores would equal the other
        backends'. SQL ranks all candidates; Python rescores the few near the top with
        :mod:`bm25` (see :data:`_SEARCH`) and reads full rows for the winners only.
        """
        if not query.tokens or not query.scope_hashes:
            return SearchPage(matches=(), candidates=0)
        wanted, params = _filter_clause(query, copied="p")
        params.update(
            scopes=list(query.scope_hashes), now=query.now, terms=list(query.tokens),
            floor=_IDF_FLOOR,
            k1p1=K1 + 1, k1=K1, one_b=1 - B, b=B, near=_NEAR_CUTOFF,
            offset=query.limit - 1,
        )
        join = "JOIN memory_records AS r ON r.seq = p.seq" if _needs_records(query) else ""
        rows = await self._rows(_SEARCH.format(wanted=wanted, join=join), params)
        if not rows:
            return SearchPage(matches=(), candidates=0)
        shortlist = rescore(rows, query.tokens, query.limit)
        winners, scores = shortlist.winners, shortlist.scores
        full = {
            int(row["seq"]): record_from_row(row)
            for row in await self._rows(
                f"SELECT r.seq, {SELECT_RECORD} FROM memory_records AS r"
                " WHERE r.seq = ANY(%s)", (winners,),
            )
        }
        return SearchPage(
            matches=tuple(ScoredRecord(full[seq], scores[seq]) for seq in winners),
            candidates=shortlist.candidates,
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
        filters = query.filters
        wanted, params = _filter_clause(filters)
        params.update(identity=str(query.identity), scopes=list(filters.scope_hashes),
                      now=filters.now)
        rows = await self._rows(
            "SELECT r.id AS id, v.vector AS vector FROM memory_records AS r"
            " JOIN memory_vectors AS v ON v.record_id = r.id AND v.identity = %(identity)s"
            " AND v.content_hash = r.content_hash"
            f" WHERE r.scope_hash = ANY(%(scopes)s) AND {_VISIBLE} AND {wanted}",
            params, binary=True,
        )
        return [(str(row["id"]), bytes(row["vector"])) for row in rows]

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

    async def _index(self, seq: int, record: MemoryRecord) -> None:
        if record.status is RecordStatus.DELETED:
            return
        terms = words(record.content)
        counts = Counter(terms)
        if not counts:
            return
        await self._write(
            "INSERT INTO memory_postings (term, scope_hash, seq, tf, len, status, expires_at,"
            " visibility, valid_from, invalid_at)"
            " SELECT t.term, %s, %s, t.tf, %s, %s, %s, %s, %s, %s"
            " FROM unnest(%s::text[], %s::int[]) AS t (term, tf)",
            (record.scope_hash, seq, len(terms), record.status.value, record.expires_at,
             record.visibility.value, record.valid_from, record.invalid_at,
             list(counts), list(counts.values())),
        )

    async def insert_record(self, record: MemoryRecord) -> None:
        columns = ", ".join(RECORD_COLUMNS)
        values = ", ".join(f"%({name})s" for name in RECORD_COLUMNS)
        params = record_params(record)
        params["token_count"] = len(words(record.content))
        rows = await self._rows_written(
            f"INSERT INTO memory_records ({columns}, token_count)"
            f" VALUES ({values}, %(token_count)s) RETURNING seq",
            params,
        )
        await self._index(int(rows[0]["seq"]), record)

    async def insert_new_records(self, versions: Sequence[MemoryVersion]) -> None:
        """Bulk form of ``insert_record`` + ``append_version`` for new active records
        (imports, benchmark seeding): the same rows, written with three COPYs.

        Not part of the port and not used by the provider, which writes one record per
        transaction; it skips nothing a row needs, only the per-statement round trips.
        """
        if not versions:
            return
        await self._serialized()
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
                async with cursor.copy(
                        "COPY memory_postings (term, scope_hash, seq, tf, len, status,"
                        " expires_at, visibility, valid_from, invalid_at) FROM STDIN") as copy:
                    for version in versions:
                        record = version.record
                        if record.status is RecordStatus.DELETED:
                            continue
                        terms = words(record.content)
                        for term, tf in Counter(terms).items():
                            await copy.write_row([
                                term, record.scope_hash, seqs[record.id], tf, len(terms),
                                record.status.value, record.expires_at,
                                record.visibility.value, record.valid_from,
                                record.invalid_at])
                async with cursor.copy(
                        "COPY memory_versions (record_id, version, operation, recorded_at,"
                        " operation_id, snapshot) FROM STDIN") as copy:
                    for version in versions:
                        await copy.write_row([
                            version.record.id, version.record.version,
                            version.operation.value, version.recorded_at,
                            encode_text(version.operation_id), record_to_json(version.record)])

    async def _rows_written(self, sql: str, params: dict[str, Any]) -> list[Row]:
        await self._serialized()
        with translated("write"):
            cursor = await self._conn.execute(sql, params)
            return await cursor.fetchall()

    async def replace_record(self, record: MemoryRecord, expected_revision: str) -> bool:
        assignments = ", ".join(
            f"{name} = %({name})s" for name in RECORD_COLUMNS if name != "id"
        )
        params = record_params(record)
        params["expected_revision"] = expected_revision
        params["token_count"] = len(words(record.content))
        rows = await self._rows_written(
            f"UPDATE memory_records SET {assignments}, token_count = %(token_count)s"
            " WHERE id = %(id)s AND scope_hash = %(scope_hash)s"
            " AND revision = %(expected_revision)s RETURNING seq",
            params,
        )
        if len(rows) != 1:
            return False
        seq = int(rows[0]["seq"])
        await self._write("DELETE FROM memory_postings WHERE seq = %s", (seq,))
        await self._index(seq, record)
        return True

    async def append_version(self, version: MemoryVersion) -> None:
        await self._write(
            "INSERT INTO memory_versions"
            " (record_id, version, operation, recorded_at, operation_id, snapshot)"
            " VALUES (%s, %s, %s, %s, %s, %s)",
            (version.record.id, version.record.version, version.operation.value,
             version.recorded_at, encode_text(version.operation_id),
             record_to_json(version.record)),
        )

    async def put_idempotency(self, entry: IdempotencyEntry) -> None:
        await self._write(
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

    async def acknowledge_events(self, event_ids: Sequence[str]) -> int:
        removed = 0
        for chunk in _chunks(sorted(set(event_ids))):
            removed += await self._write(
                "DELETE FROM event_outbox WHERE event_id = ANY(%s)", (list(chunk),),
                lock_free=True,
            )
        return removed

    async def remove_vectors(self, record_id: str) -> int:
        return await self._write("DELETE FROM memory_vectors WHERE record_id = %s",
                                 (record_id,))

    async def enqueue_index_job(self, job: IndexJob) -> None:
        await self._write(
            "DELETE FROM index_jobs WHERE record_id = %s AND state = 'pending'"
            " AND version <= %s",
            (job.record_id, job.version),
        )
        await self._write(
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
        requeued = 0
        for chunk in _chunks(sorted(set(job_ids))):
            requeued += await self._write(f"{update} AND job_id = ANY(%s)", (now, list(chunk)))
        return requeued

    async def put_snapshot(self, snapshot_id: str, tenant_id: str, body: Mapping[str, Any],
                           *, created_at: float, subjects: Sequence[str]) -> None:
        await self._write(
            "INSERT INTO retrieval_snapshots (snapshot_id, tenant_id, body, created_at)"
            " VALUES (%s, %s, %s, %s)",
            (snapshot_id, tenant_id, dumps(body), created_at), lock_free=True,
        )
        users = sorted(set(subjects))
        if users:
            await self._write(
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
            await self._write(
                "DELETE FROM retrieval_snapshot_subjects WHERE snapshot_id = %s",
                (snapshot_id,))
            await self._write(
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
        await self._write(
            "DELETE FROM retrieval_snapshot_subjects WHERE snapshot_id = ANY(%s)", (ids,),
            lock_free=True)
        return await self._write(
            "DELETE FROM retrieval_snapshots WHERE snapshot_id = ANY(%s)", (ids,),
            lock_free=True)

    async def add_erasure_progress(self, tenant_id: str, user_id: str, removal: Removal,
                                   started_at: float) -> None:
        await self._write(
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
        removal = Removal()
        for chunk in _chunks(sorted(set(record_ids))):
            ids = list(chunk)
            rows = await self._rows(
                "SELECT seq, scope_hash FROM memory_records WHERE id = ANY(%s)", (ids,)
            )
            if not rows:
                continue
            seqs = [int(row["seq"]) for row in rows]
            indexed = await self._rows(
                "SELECT count(DISTINCT seq) AS n FROM memory_postings WHERE seq = ANY(%s)",
                (seqs,),
            )
            await self._write("DELETE FROM memory_postings WHERE seq = ANY(%s)", (seqs,))
            vectors = await self._write(
                "DELETE FROM memory_vectors WHERE record_id = ANY(%s)", (ids,))
            await self._write("DELETE FROM index_jobs WHERE record_id = ANY(%s)", (ids,))
            versions = await self._write(
                "DELETE FROM memory_versions WHERE record_id = ANY(%s)", (ids,)
            )
            if tombstone_idempotency:
                await self._write(
                    "UPDATE memory_idempotency SET erased = true WHERE record_id = ANY(%s)",
                    (ids,),
                )
                entries = 0
            else:
                entries = await self._write(
                    "DELETE FROM memory_idempotency WHERE record_id = ANY(%s)", (ids,)
                )
            records = await self._write("DELETE FROM memory_records WHERE id = ANY(%s)", (ids,))
            removal += Removal(
                records=records, versions=versions,
                index_entries=int(indexed[0]["n"]) + vectors,
                idempotency_entries=entries,
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
