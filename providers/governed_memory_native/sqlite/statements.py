"""The statements only SQLite runs: its lexical index upkeep, filters in its JSON
functions, the shortlist lookup its planner needs, and erasure progress as JSON text.

Each class overrides, in a shared :mod:`sql_*` repository, exactly the methods whose SQL
is SQLite's own; the rest of the statements are the shared set.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

from governed_memory.errors import MemoryStorageError, MemoryValidationError
from governed_memory.read_filters import SENSITIVITY_KEY
from governed_memory.records import MemoryRecord

from governed_memory_native.retrieval.lexical import PostingsSource
from governed_memory_native.retrieval.tokens import words
from governed_memory_native.sql.dialect import Params, chunks, unique
from governed_memory_native.sql.erasure import SqlErasure
from governed_memory_native.sql.records import VISIBLE, SqlLexicalSearch, SqlRecords
from governed_memory_native.sql.rows import PROGRESS_COLUMNS, progress_from_row
from governed_memory_native.sql.vectors import SqlVectors
from governed_memory_native.sqlite.dialect import SqliteDialect
from governed_memory_native.sqlite.lexical import SqlitePostings
from governed_memory_native.sqlite.rows import RECORD_COLUMNS, record_params
from governed_memory_native.storage.copies import dumps
from governed_memory_native.storage.values import Removal, SearchQuery, VectorQuery

_INT64: Final = (-(2**63), 2**63 - 1)

_REPLACED: Final = tuple(name for name in RECORD_COLUMNS
                         if name not in {"id", "scope_hash", "tenant_id", "user_id", "scope"})
"""The columns a replace writes: a record's id and scope never change (the statement
matches both), and leaving them out of ``SET`` keeps SQLite from rewriting the entries of
the indexes on them (``memory_records_scope_id``, ``memory_records_user``): two pages per
update."""


def _marks(count: int) -> str:
    return ", ".join("?" * count)


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
    return query.reads_records()


_LABEL: Final = (f"coalesce(json_type(r.metadata, '$.{SENSITIVITY_KEY}') = 'text'"
                 f" AND json_extract(r.metadata, '$.{SENSITIVITY_KEY}') IN ({{marks}}), 0)")
"""Whether the record's sensitivity label (a JSON string under ``sensitivity``) is one
of the bound labels; never NULL, so ``NOT`` of it keeps the unlabelled records."""


def filter_clause(query: SearchQuery, copied: str = "r") -> tuple[str, list[Any]]:
    """The type, entity, metadata, validity, visibility and event-time filters as one SQL
    boolean (``1`` when none). Validity and visibility are read from the ``copied`` alias: ``p``
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
    if query.occurred_since is not None:
        clauses.append("coalesce(r.occurred_at, r.created_at) >= ?")
        params.append(query.occurred_since)
    if query.occurred_before is not None:
        clauses.append("coalesce(r.occurred_at, r.created_at) < ?")
        params.append(query.occurred_before)
    if query.source_types:
        clauses.append("json_extract(r.provenance, '$.source_type')"
                       f" IN ({_marks(len(query.source_types))})")
        params.extend(query.source_types)
    if query.sensitivity:
        clauses.append(_LABEL.format(marks=_marks(len(query.sensitivity))))
        params.extend(query.sensitivity)
    if query.exclude_sensitivity:
        clauses.append("NOT " + _LABEL.format(marks=_marks(len(query.exclude_sensitivity))))
        params.extend(query.exclude_sensitivity)
    return ("(" + " AND ".join(clauses) + ")" if clauses else "1"), params


class SqliteRecords(SqlRecords):
    """Writes keep the lexical index (:mod:`sqlite.lexical`) in the same transaction."""

    __slots__ = ("_tx",)

    def __init__(self, tx: SqliteDialect) -> None:
        super().__init__(tx)
        self._tx = tx

    async def live_count(self, now: float) -> int:
        """Every record minus those of ``memory_records_corpus`` that are not live: the
        partial index holds every record that is not active-and-never-expiring, so the
        count reads two narrow indexes instead of every row."""
        rows = await self._tx.tuples(
            "SELECT (SELECT count(*) FROM memory_records) - (SELECT count(*)"
            " FROM memory_records WHERE (expires_at IS NOT NULL OR status <> 'active')"
            " AND NOT (status <> 'deleted' AND (expires_at IS NULL OR expires_at > ?)))",
            (now,))
        return int(rows[0][0])

    async def insert(self, record: MemoryRecord) -> None:
        columns = ", ".join(RECORD_COLUMNS)
        values = ", ".join(f":{name}" for name in RECORD_COLUMNS)
        terms = words(record.content)  # tokenized once: token_count and the postings
        params = record_params(record)
        params["token_count"] = len(terms)
        seq = await self._tx.insert_row(
            f"INSERT INTO memory_records ({columns}, token_count) "
            f"VALUES ({values}, :token_count)", params)
        await self._tx.lexical.add(seq, record, terms)

    async def replace(self, record: MemoryRecord, expected_revision: str) -> bool:
        assignments = ", ".join(f"{name} = :{name}" for name in _REPLACED)
        terms = words(record.content)
        params = record_params(record)
        params["expected_revision"] = expected_revision
        params["token_count"] = len(terms)
        rows = await self._tx.returning(
            f"UPDATE memory_records SET {assignments}, token_count = :token_count "
            "WHERE id = :id AND scope_hash = :scope_hash AND revision = :expected_revision"
            " RETURNING seq", params)
        if len(rows) != 1:
            return False
        await self._tx.lexical.replace(int(rows[0][0]), record, terms)
        return True


class SqliteLexicalSearch(SqlLexicalSearch):
    """Every statistic is scope-local and read from ``lexical_scopes`` and
    ``lexical_terms``; postings are read by ``(scope, term)`` through the primary key of
    ``lexical_postings``, and the scopes' (bounded) delta and tombstones once
    (:mod:`sqlite.lexical`). Nothing counts or scans the corpus, and no row of another
    scope is read."""

    __slots__ = ("_tx",)

    def __init__(self, tx: SqliteDialect) -> None:
        super().__init__(tx)
        self._tx = tx

    def source(self, query: SearchQuery) -> PostingsSource[int]:
        return SqlitePostings(
            self._tx, query, filter_clause(query, copied="p"),
            "JOIN memory_records AS r ON r.seq = p.doc" if _needs_records(query) else "")


class SqliteVectors(SqlVectors):
    __slots__ = ()

    async def candidates(self, query: VectorQuery) -> list[tuple[str, bytes]]:
        db = self._db
        filters = query.filters
        wanted, params = filter_clause(filters)
        sql = ("SELECT r.id, v.vector FROM memory_records AS r JOIN memory_vectors AS v"
               " ON v.record_id = r.id AND v.identity = ? AND v.content_hash = r.content_hash"
               f" WHERE r.scope_hash IN ({_marks(len(filters.scope_hashes))}) AND {VISIBLE}"
               f" AND {wanted}")
        bound = [str(query.identity), *filters.scope_hashes, filters.now, *params]
        if query.among is None:
            return await db.vector_pairs(sql, bound)
        # A vector index's shortlist: look the ids up one by one. The unary ``+`` keeps
        # the planner off the scope's indexes, which would walk the whole scope (linear
        # in its size) to find a few dozen records.
        sql = sql.replace("WHERE r.scope_hash IN", "WHERE +r.scope_hash IN").replace(
            "r.status = 'active'", "+r.status = 'active'")
        found: list[tuple[str, bytes]] = []
        for chunk in chunks(unique(query.among), db.chunk):
            found += await db.vector_pairs(f"{sql} AND r.id IN ({_marks(len(chunk))})",
                                           [*bound, *chunk])
        return found


class SqliteErasure(SqlErasure):
    """Erasure stays physical (the words of erased content are content): postings, word
    counts, delta rows and tombstones go in this transaction, and the commit clears the
    WAL of the erased bytes."""

    __slots__ = ("_tx",)

    def __init__(self, tx: SqliteDialect) -> None:
        super().__init__(tx)
        self._tx = tx

    async def unindexed(self, docs: Sequence[int],
                        then: Sequence[tuple[str, Params]]) -> tuple[int, list[int]]:
        self._tx.erased_any = True
        indexed = await self._tx.lexical.erase(docs)
        return indexed, await self._tx.write_many(then)

    async def add_progress(self, tenant_id: str, user_id: str, removal: Removal,
                           started_at: float) -> None:
        prior, began = await self._progress(tenant_id, user_id)
        total = prior + removal
        await self._tx.write(
            "INSERT OR REPLACE INTO erasure_progress (tenant_id, user_id, records, versions,"
            " index_entries, idempotency_entries, scope_hashes, started_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (tenant_id, user_id, total.records, total.versions, total.index_entries,
             total.idempotency_entries, dumps(sorted(total.scope_hashes)),
             started_at if began is None else min(began, started_at)))

    async def take_progress(self, tenant_id: str,
                            user_id: str) -> tuple[Removal, float | None]:
        found = await self._progress(tenant_id, user_id)
        await self._tx.write("DELETE FROM erasure_progress WHERE tenant_id = ? AND user_id = ?",
                             (tenant_id, user_id))
        return found

    async def _progress(self, tenant_id: str, user_id: str) -> tuple[Removal, float | None]:
        rows = await self._tx.rows(
            f"SELECT {PROGRESS_COLUMNS} FROM erasure_progress"
            " WHERE tenant_id = ? AND user_id = ?", (tenant_id, user_id))
        if not rows:
            return Removal(), None
        row = rows[0]
        try:
            return progress_from_row(row, json.loads(row["scope_hashes"]))
        except (ValueError, TypeError):
            raise MemoryStorageError("a stored erasure progress row could not be read"
                                     ) from None
