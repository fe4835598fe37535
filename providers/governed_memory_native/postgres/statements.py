"""The statements only PostgreSQL runs: lexical indexing inside a record's own insert,
BM25 statistics in one round trip, ``SKIP LOCKED`` leases, filters over ``json``, the
shortlist fence its planner needs, and erasure progress as an array.

Each class overrides, in a shared :mod:`sql_*` repository, exactly the methods whose SQL
is PostgreSQL's own; the rest of the statements are the shared set. Lexical search
scores exactly as the other backends do: the ``lexical_*`` tables hold each scope's
statistics and the shared tokenizer's words, kept on every write, and
:mod:`search.lexical` ranks over them, reading postings by ``(scope, term)`` through the
primary key.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, Final

from governed_memory.errors import MemoryValidationError
from governed_memory.indexing import IndexJob
from governed_memory.records import MemoryRecord, MemoryVersion, RecordStatus

from governed_memory_native.postgres.dialect import PostgresDialect
from governed_memory_native.postgres.errors import translated
from governed_memory_native.postgres.rows import (
    RECORD_COLUMNS,
    SELECT_RECORD,
    encode_text,
    record_from_row,
    record_params,
)
from governed_memory_native.search.lexical import (
    COMMON_SHARE,
    READ_TOGETHER,
    ExpiredDocument,
    PostingsSource,
    Statistics,
)
from governed_memory_native.search.tokens import words
from governed_memory_native.sql.dialect import Params, chunks, unique
from governed_memory_native.sql.erasure import SqlErasure
from governed_memory_native.sql.jobs import SqlIndexJobs
from governed_memory_native.sql.records import SqlLexicalSearch, SqlRecords
from governed_memory_native.sql.rows import (
    JOB_FIELDS,
    PROGRESS_COLUMNS,
    job_from_row,
    progress_from_row,
)
from governed_memory_native.sql.vectors import SqlVectors
from governed_memory_native.storage.copies import dumps, record_to_json
from governed_memory_native.storage.values import Removal, SearchQuery, VectorQuery

_VISIBLE: Final = ("r.status = 'active'"
                   " AND (r.expires_at IS NULL OR r.expires_at > %(now)s)")

_JOB_RETURNING: Final = ", ".join(f"j.{name}" for name in JOB_FIELDS)

def _statistics_sql(postings: str) -> str:
    """A search's statistics and its first postings in one round trip: each scope's id,
    record count and total length; each query term's document frequency summed over
    the scopes; the expired records the stored statistics still count (with their
    query-term frequencies); and the postings (``postings``, the search's filtered
    postings statement over ``wanted_terms``) of the terms
    :func:`lexical_topk.first_reads` picks (the same rule, on the stored frequencies:
    the same terms unless a record of the scopes has expired), so the first request of
    the search is answered from here."""
    return (
        "WITH s AS (SELECT scope_id, documents, total_length FROM lexical_scopes"
        " WHERE scope_hash = ANY(%(scopes)s)),"
        " t AS (SELECT t.term, sum(t.documents)::bigint AS df"
        " FROM lexical_terms AS t JOIN s USING (scope_id)"
        " WHERE t.term = ANY(%(terms)s) GROUP BY t.term),"
        " wanted_terms AS (SELECT term FROM (SELECT term, df,"
        " sum(df) OVER (ORDER BY df, term) AS running,"
        " row_number() OVER (ORDER BY df, term) AS n FROM t) AS o"
        " WHERE n = 1 OR (running <= %(together)s"
        " AND df * %(common)s <= (SELECT sum(documents) FROM s)))"
        " SELECT 'scope' AS kind, NULL::text AS term, s.scope_id::bigint AS a,"
        " s.documents AS b, s.total_length AS c FROM s"
        " UNION ALL SELECT 'term', term, NULL, df, NULL FROM t"
        # active records of the scopes that expired by now: counted, but not in the corpus
        " UNION ALL SELECT 'expired', p.term, r.seq, r.token_count::bigint, p.tf::bigint"
        " FROM memory_records AS r LEFT JOIN lexical_postings AS p"
        " ON p.doc = r.seq AND p.term = ANY(%(terms)s)"
        " WHERE r.scope_hash = ANY(%(scopes)s) AND r.status = 'active'"
        " AND r.expires_at <= %(now)s"
        " UNION ALL SELECT 'read', term, NULL, NULL, NULL FROM wanted_terms"
        f" UNION ALL SELECT 'posting', x.term, x.doc, x.tf, x.length FROM ({postings}) AS x"
    )


READ_AHEAD: Final = 2_000
"""Postings of the next term a search may read that a probe brings along (the read then
costs no round trip of its own). It bounds what a read ahead that pruning then spares
costs: a few round trips' worth of rows received and decoded."""

_PREFETCH_SCOPES: Final = "ARRAY(SELECT scope_id FROM s)"
_PREFETCH_TERMS: Final = "ARRAY(SELECT term FROM wanted_terms)"

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
    """The type, entity, metadata, validity, visibility and event-time filters as one SQL
    boolean (``true`` when none).

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
    if query.occurred_since is not None:
        clauses.append("coalesce(r.occurred_at, r.created_at) >= %(occurred_since)s")
        params["occurred_since"] = query.occurred_since
    if query.occurred_before is not None:
        clauses.append("coalesce(r.occurred_at, r.created_at) < %(occurred_before)s")
        params["occurred_before"] = query.occurred_before
    return ("(" + " AND ".join(clauses) + ")" if clauses else "true"), params


def _needs_records(query: SearchQuery) -> bool:
    """Whether a lexical search's filters read columns only ``memory_records`` has."""
    return bool(query.memory_types or query.entity_ids or query.metadata_filter
                or query.bounds_event_time())


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


class PostgresLexicalSearch(SqlLexicalSearch):
    """PostgreSQL's own text search is not used for ranking: its parsers and
    dictionaries split and stem words differently from :mod:`search.tokens`, and ``ts_rank`` is
    not BM25, so neither matches nor scores would equal the other backends'."""

    __slots__ = ("_tx",)

    cooperative = True  # the ranking runs on the event loop, between round trips

    def __init__(self, tx: PostgresDialect) -> None:
        super().__init__(tx)
        self._tx = tx

    def source(self, query: SearchQuery) -> PostingsSource[int]:
        return _PostgresPostings(self._tx, query)


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
        wanted, params = _filter_clause(filters)
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


class _PostgresPostings:
    """:class:`lexical_topk.PostingsSource` over the ``lexical_*`` tables for one search;
    a document is its record's ``seq``. Every statement reads by ``(scope, term)`` or
    by key through an index; none counts or scans the corpus.

    Round trips: the statistics come with the postings of the terms the search reads
    first (:data:`lexical_topk.READ_TOGETHER`); every later request, for any number of
    terms, is one statement; probes of a term whose postings are held are answered
    here. A search is then typically three or four round trips: statistics, one or two
    requests of probes, the winners' rows (:mod:`sql.records`)."""

    def __init__(self, tx: PostgresDialect, query: SearchQuery) -> None:
        self._tx = tx
        self._query = query
        self._scope_ids: list[int] = []
        wanted, self._params = _filter_clause(query, copied="p")
        join = "JOIN memory_records AS r ON r.seq = p.doc" if _needs_records(query) else ""
        self._postings = ("SELECT p.term AS term, p.doc AS doc, p.tf AS tf,"
                          " p.length AS length"
                          f" FROM lexical_postings AS p {join}"
                          " WHERE p.scope_id = ANY(@scopes) AND p.term = ANY(@terms)"
                          f" AND {wanted}")
        self._held: dict[str, list[tuple[int, int, int]]] = {}
        """Every (filtered) posting of the terms read so far, by term."""
        self._by_doc: dict[str, dict[int, int]] = {}
        self._remote: dict[str, dict[int, int]] = {}
        """Probe answers that came with a read ahead, until the probe returns them."""
        self._containing: dict[str, int] = {}

    async def statistics(self, terms: Sequence[str]) -> Statistics[int]:
        prefetch = self._postings.replace("@scopes", _PREFETCH_SCOPES).replace(
            "@terms", _PREFETCH_TERMS)
        rows = await self._tx.tuples(_statistics_sql(prefetch), {
            **self._params, "scopes": list(dict.fromkeys(self._query.scope_hashes)),
            "terms": list(terms), "now": self._query.now, "together": READ_TOGETHER,
            "common": COMMON_SHARE})
        documents = total = 0
        containing: dict[str, int] = {}
        expired: dict[int, tuple[int, dict[str, int]]] = {}
        held = self._held
        for kind, term, a, b, c in rows:
            if kind == "posting":
                held[term].append((a, b, c))
            elif kind == "read":
                held[term] = []
            elif kind == "scope":
                self._scope_ids.append(int(a))
                documents += int(b)
                total += int(c)
            elif kind == "term":
                containing[str(term)] = int(b)
                self._containing[str(term)] = int(b)
            else:
                found = expired.setdefault(int(a), (int(b), {}))[1]
                if term is not None:
                    found[str(term)] = int(c)
        return Statistics(documents, total, containing, [
            ExpiredDocument(doc, length, found)
            for doc, (length, found) in sorted(expired.items())])

    async def postings(self, terms: Sequence[str]) -> dict[str, list[tuple[int, int, int]]]:
        held = self._held
        missing = [term for term in terms if term not in held]
        if missing:
            rows = await self._tx.tuples(
                self._postings.replace("@scopes", "%(ids)s").replace("@terms", "%(terms)s"),
                {**self._params, "ids": self._scope_ids, "terms": missing})
            for term in missing:
                held[term] = []
            for term, doc, tf, length in rows:
                held[term].append((doc, tf, length))
        return {term: held[term] for term in terms}

    async def probe(self, terms: Sequence[str], docs: Sequence[int], *,
                    next_read: str | None = None) -> dict[str, dict[int, int]]:
        """Terms whose postings are held are answered here; the others in one statement
        per thousand documents, which also brings ``next_read``'s postings when they
        are at most :data:`READ_AHEAD` (the read that likely follows then costs no round
        trip; if pruning spares it, they were read for nothing)."""
        held = self._held
        ahead = (next_read if next_read is not None and next_read not in held
                 and 0 < self._containing.get(next_read, 0) <= READ_AHEAD else None)
        remote = [term for term in terms if term not in held and term != ahead]
        docs = list(docs)
        if ahead is not None:
            probes = ("SELECT 'probe', term, doc, tf, NULL::integer FROM lexical_postings"
                      " WHERE scope_id = ANY(%(ids)s) AND term = ANY(%(probed)s)"
                      " AND doc = ANY(%(docs)s)")
            whole = self._postings.replace("@scopes", "%(ids)s").replace("@terms",
                                                                        "%(ahead)s")
            held[ahead] = []
            for kind, term, doc, tf, length in await self._tx.tuples(
                    f"SELECT 'posting', * FROM ({whole}) AS a UNION ALL {probes}",
                    {**self._params, "ids": self._scope_ids, "ahead": [ahead],
                     "probed": remote, "docs": docs[: self._tx.chunk]}):
                if kind == "posting":
                    held[term].append((doc, tf, length))
                else:
                    self._remote.setdefault(term, {})[doc] = tf
            docs_left = docs[self._tx.chunk:]
        else:
            docs_left = docs
        found: dict[str, dict[int, int]] = {}
        for term in remote:
            found[term] = self._remote.pop(term, {})
        if remote:
            for chunk in chunks(docs_left, self._tx.chunk):
                for term, doc, tf in await self._tx.tuples(
                        "SELECT term, doc, tf FROM lexical_postings WHERE scope_id = ANY(%s)"
                        " AND term = ANY(%s) AND doc = ANY(%s)",
                        (self._scope_ids, remote, chunk)):
                    found[term][doc] = tf
        for term in terms:
            if term in found:
                continue
            by_doc = self._by_doc.get(term)
            if by_doc is None:
                by_doc = self._by_doc[term] = {doc: tf for doc, tf, _ in held[term]}
            found[term] = {doc: by_doc[doc] for doc in docs if doc in by_doc}
        return found

    async def identify(self, docs: Sequence[int]) -> dict[int, str]:
        found: dict[int, str] = {}
        for chunk in chunks(list(docs), self._tx.chunk):
            rows = await self._tx.rows(
                "SELECT seq, id FROM memory_records WHERE seq = ANY(%s)", (list(chunk),))
            found.update((int(row["seq"]), str(row["id"])) for row in rows)
        return found
