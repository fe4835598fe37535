"""The statements only PostgreSQL runs: lexical indexing inside a record's own insert,
``SKIP LOCKED`` leases, the shortlist fence its planner needs, and erasure progress as an
array.

Each class overrides, in a shared :mod:`sql_*` repository, exactly the methods whose SQL
is PostgreSQL's own; the rest of the statements are the shared set. A record write keeps
the ``lexical_*`` tables in the same statement as its row; searching them is
:mod:`postgres.lexical`, and the hard filters both read paths share are
:mod:`postgres.filters`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, Final

from governed_memory.indexing import IndexJob
from governed_memory.records import MemoryRecord, MemoryVersion, RecordStatus

from governed_memory_native.postgres.dialect import PostgresDialect
from governed_memory_native.postgres.errors import translated
from governed_memory_native.postgres.filters import filter_clause
from governed_memory_native.postgres.lexical import READ_AHEAD as READ_AHEAD
from governed_memory_native.postgres.lexical import PostgresLexicalSearch as PostgresLexicalSearch
from governed_memory_native.postgres.rows import (
    RECORD_COLUMNS,
    SELECT_RECORD,
    encode_text,
    record_from_row,
    record_params,
)
from governed_memory_native.retrieval.tokens import words
from governed_memory_native.sql.dialect import Params, chunks, unique
from governed_memory_native.sql.erasure import SqlErasure
from governed_memory_native.sql.jobs import SqlIndexJobs
from governed_memory_native.sql.records import SqlRecords
from governed_memory_native.sql.rows import (
    JOB_FIELDS,
    PROGRESS_COLUMNS,
    job_from_row,
    progress_from_row,
)
from governed_memory_native.sql.vectors import SqlVectors
from governed_memory_native.storage.copies import record_to_json
from governed_memory_native.storage.values import Removal, VectorQuery

_VISIBLE: Final = ("r.status = 'active'"
                   " AND (r.expires_at IS NULL OR r.expires_at > %(now)s)")

_JOB_RETURNING: Final = ", ".join(f"j.{name}" for name in JOB_FIELDS)

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


class PostgresRecords(SqlRecords):
    """A record's insert carries its lexical index rows in the same statement; a
    compare-and-set's re-index is queued behind it. A record read by id in a unit
    brings its ``seq`` along, so a compare-and-set of it later in the unit can be
    queued whole (see :meth:`replace`)."""

    __slots__ = ("_seqs", "_tx")

    def __init__(self, tx: PostgresDialect) -> None:
        super().__init__(tx)
        self._tx = tx
        self._seqs: dict[str, int] = {}
        """``seq`` of the records this transaction read by id (a row's ``seq`` never
        changes)."""

    async def get(self, scope_hash: str, record_id: str) -> MemoryRecord | None:
        rows = await self._tx.rows(
            f"SELECT r.seq, {SELECT_RECORD} FROM memory_records AS r"
            " WHERE r.id = %s AND r.scope_hash = %s", (record_id, scope_hash))
        if not rows:
            return None
        self._seqs[record_id] = int(rows[0]["seq"])
        return record_from_row(rows[0])

    @staticmethod
    def _lexical_params(record: MemoryRecord, terms: list[str]) -> dict[str, Any]:
        """:data:`_LEXICAL_INDEX`'s parameters for ``record``'s current content, whose
        terms (``words(record.content)``) the caller has already counted."""
        counts = Counter(terms)
        return {"lex_scope": record.scope_hash, "lex_length": len(terms),
                "lex_visibility": record.visibility.value,
                "lex_valid_from": record.valid_from, "lex_invalid_at": record.invalid_at,
                "lex_terms": list(counts), "lex_tfs": list(counts.values())}

    async def insert(self, record: MemoryRecord) -> None:
        """One queued statement: the row and, for an active record, its index rows. A
        key already held fails it (and the unit) with a conflict at the next round
        trip."""
        columns = ", ".join(RECORD_COLUMNS)
        values = ", ".join(f"%({name})s" for name in RECORD_COLUMNS)
        params = record_params(record)
        terms = words(record.content)  # tokenized once: token_count and the postings
        params["token_count"] = len(terms)
        insert = (f"INSERT INTO memory_records ({columns}, token_count)"
                  f" VALUES ({values}, %(token_count)s)")
        if record.status is not RecordStatus.ACTIVE:
            await self._tx.queue(insert, params)
            return
        params.update(self._lexical_params(record, terms))
        await self._tx.queue(f"WITH r AS ({insert} RETURNING seq),{_LEXICAL_INDEX}", params)

    async def insert_new(self, versions: Sequence[MemoryVersion]) -> None:
        """Bulk form of ``insert`` + ``versions.append`` for new active records
        (imports, benchmark seeding): the same rows, written with three COPYs.

        Not part of the port and not used by the provider, which writes one record per
        transaction; it skips nothing a row needs, only the per-statement round trips.
        """
        if not versions:
            return
        await self._tx.serialized()
        await self._tx.flush()  # BEGIN and the locks: a COPY cannot share their query
        columns = ", ".join(RECORD_COLUMNS)
        with translated("write"):
            async with self._tx.connection.cursor() as cursor:
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

    async def replace(self, record: MemoryRecord, expected_revision: str) -> bool:
        """Compare-and-set, then the re-index (the record's removal from the lexical
        index and, if it stays active, its index rows for the new content).

        A record this unit read by id (its ``seq`` known), on a schema that has the
        guard (v12, ``postgres_schema.CAS_GUARD_VERSION``), is replaced by queued
        statements only, sent with the unit's next round trip (its COMMIT, for an
        update): the UPDATE is guarded by ``compare_and_set_applied``, which fails the
        statement, and so the unit, with a conflict if no row was at the expected
        revision. That cannot happen while the unit holds its tenant's writer lock
        (every writer of the record's rows holds it), so the guard is the second line,
        and the caller is told ``True``. Otherwise the UPDATE goes alone (so psycopg
        prepares it) and its result says whether it applied."""
        assignments = ", ".join(
            f"{name} = %({name})s" for name in RECORD_COLUMNS if name != "id"
        )
        params = record_params(record)
        params["expected_revision"] = expected_revision
        terms = words(record.content)
        params["token_count"] = len(terms)
        update = (f"UPDATE memory_records SET {assignments}, token_count = %(token_count)s"
                  " WHERE id = %(id)s AND scope_hash = %(scope_hash)s"
                  " AND revision = %(expected_revision)s")
        seq = self._seqs.get(record.id) if self._tx.queued_cas else None
        if seq is not None:
            await self._tx.queue(f"WITH u AS ({update} RETURNING 1)"
                                 " SELECT compare_and_set_applied(count(*)) FROM u", params)
        else:
            rows = await self._tx.rows(f"{update} RETURNING seq", params)
            if len(rows) != 1:
                return False
            seq = int(rows[0]["seq"])
        await self._tx.queue(_UNINDEX, {"docs": [seq]})
        if record.status is RecordStatus.ACTIVE:
            await self._tx.queue(f"WITH r AS (SELECT %(doc)s::bigint AS seq),{_LEXICAL_INDEX}",
                                 {"doc": seq, **self._lexical_params(record, terms)})
        return True


class PostgresIndexJobs(SqlIndexJobs):
    __slots__ = ("_tx",)

    def __init__(self, tx: PostgresDialect) -> None:
        super().__init__(tx)
        self._tx = tx

    async def lease(self, owner: str, now: float, lease_until: float,
                    limit: int) -> list[IndexJob]:
        """Due jobs, oldest first, locked with ``FOR UPDATE SKIP LOCKED`` and without the
        writer lock: workers lease concurrently, never wait for (or take) a job another
        transaction is leasing right now, and never wait for memory writes."""
        rows = await self._tx.rows(
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


class PostgresVectors(SqlVectors):
    __slots__ = ("_tx",)

    def __init__(self, tx: PostgresDialect) -> None:
        super().__init__(tx)
        self._tx = tx

    async def candidates(self, query: VectorQuery) -> list[tuple[str, bytes]]:
        """The stored vectors of the records passing every hard filter; with
        ``query.among`` (a vector index's shortlist), of those records only.

        The shortlist's records are read first, by id, in a subquery the planner cannot
        flatten (``OFFSET 0``), and filtered afterwards: left to itself, on a table whose
        statistics lag behind its growth (a bulk load, a young scope), the planner
        walked the scope's ``(scope_hash, status, ...)`` index, linear in the scope's
        size, to find a few dozen records."""
        filters = query.filters
        wanted, params = filter_clause(filters)
        params.update(identity=str(query.identity), scopes=list(filters.scope_hashes),
                      now=filters.now)
        sql = ("SELECT r.id AS id, v.vector AS vector FROM {records} AS r"
               " JOIN memory_vectors AS v ON v.record_id = r.id AND v.identity = %(identity)s"
               " AND v.content_hash = r.content_hash"
               f" WHERE r.scope_hash = ANY(%(scopes)s) AND {_VISIBLE} AND {wanted}")
        if query.among is None:
            return await self._tx.vector_pairs(sql.format(records="memory_records"), params)
        shortlist = sql.format(records="(SELECT * FROM memory_records"
                                       " WHERE id = ANY(%(among)s) OFFSET 0)")
        rows: list[tuple[str, bytes]] = []
        for chunk in chunks(unique(query.among), self._tx.chunk):
            rows += await self._tx.vector_pairs(shortlist, {**params, "among": list(chunk)})
        return rows


class PostgresErasure(SqlErasure):
    __slots__ = ("_tx",)

    def __init__(self, tx: PostgresDialect) -> None:
        super().__init__(tx)
        self._tx = tx

    async def unindexed(self, docs: Sequence[int],
                        then: Sequence[tuple[str, Params]]) -> tuple[int, list[int]]:
        """:data:`_UNINDEX` and ``then`` in one round trip, each statement's count read
        afterwards: an erasure chunk costs two round trips with the lookup of its
        records."""
        indexed, *outcomes = await self._tx.round_trip(
            [(_UNINDEX, {"docs": list(docs)}), *then])
        return int(indexed.rows[0]["n"]), [outcome.rowcount for outcome in outcomes]

    async def add_progress(self, tenant_id: str, user_id: str, removal: Removal,
                           started_at: float) -> None:
        """One upsert that sums the counts and unites the scope hashes in SQL."""
        await self._tx.queue(
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

    async def take_progress(self, tenant_id: str,
                            user_id: str) -> tuple[Removal, float | None]:
        rows = await self._tx.rows(
            "DELETE FROM erasure_progress WHERE tenant_id = %s AND user_id = %s"
            f" RETURNING {PROGRESS_COLUMNS}",
            (tenant_id, user_id))
        if not rows:
            return Removal(), None
        return progress_from_row(rows[0], rows[0]["scope_hashes"])
