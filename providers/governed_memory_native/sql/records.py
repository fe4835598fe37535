"""Records and their lexical search on SQL, one statement set for both dialects.

Every filter (scope, status, expiry, type) is a SQL predicate, so a record of another
scope is never even fetched into Python. Storing a record and re-indexing it differ per
dialect (SQLite keeps a lexical delta, PostgreSQL indexes in the insert's own
statement), so :meth:`SqlRecords.insert` and :meth:`SqlRecords.replace` are the
dialects' own; so is the postings source a search ranks over.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Final

import attrs
from governed_memory.records import MemoryRecord, MemoryType

from governed_memory_native.retrieval.lexical import PostingsSource, Statistics, top_k
from governed_memory_native.sql.dialect import SqlDialect, chunks, unique
from governed_memory_native.sql.rows import SELECT_RECORD
from governed_memory_native.storage.values import ScoredRecord, SearchPage, SearchQuery

DEDUP_CANDIDATES: Final = 16
"""Live records of one content a dedup lookup compares keys among."""

VISIBLE: Final = "r.status = 'active' AND (r.expires_at IS NULL OR r.expires_at > ?)"
"""A record a caller may see at the bound time."""


class SqlRecords:
    __slots__ = ("_db",)

    def __init__(self, db: SqlDialect) -> None:
        self._db = db

    async def _records(self, sql: str, params: Any) -> list[MemoryRecord]:
        db = self._db
        return [db.record_from_row(row) for row in await db.rows(db.q(sql), params)]

    async def get(self, scope_hash: str, record_id: str) -> MemoryRecord | None:
        found = await self._records(
            f"SELECT {SELECT_RECORD} FROM memory_records AS r"
            " WHERE r.id = ? AND r.scope_hash = ?", (record_id, scope_hash))
        return found[0] if found else None

    async def by_key(self, scope_hash: str, key: str) -> MemoryRecord | None:
        found = await self._records(
            f"SELECT {SELECT_RECORD} FROM memory_records AS r"
            " WHERE r.scope_hash = ? AND r.record_key = ? AND r.status <> 'deleted'",
            (scope_hash, self._db.text(key)))
        return found[0] if found else None

    async def visible(
        self, scope_hash: str, after_id: str | None, limit: int,
        memory_types: tuple[MemoryType, ...], now: float,
    ) -> list[MemoryRecord]:
        sql = [f"SELECT {SELECT_RECORD} FROM memory_records AS r WHERE r.scope_hash = ? AND",
               VISIBLE]
        params: list[Any] = [scope_hash, now]
        if after_id is not None:
            sql.append("AND r.id > ?")
            params.append(after_id)
        if memory_types:
            clause, values = self._db.member("r.memory_type",
                                             [kind.value for kind in memory_types])
            sql.append(f"AND {clause}")
            params.extend(values)
        sql.append("ORDER BY r.id LIMIT ?")
        params.append(limit)
        return await self._records(" ".join(sql), params)

    async def pending(self, scope_hash: str, after_id: str | None, limit: int,
                      now: float) -> list[MemoryRecord]:
        return await self._records(
            f"SELECT {SELECT_RECORD} FROM memory_records AS r"
            " WHERE r.scope_hash = ? AND r.status = 'pending_review'"
            " AND (r.expires_at IS NULL OR r.expires_at > ?) AND r.id > ?"
            " ORDER BY r.id LIMIT ?", (scope_hash, now, after_id or "", limit))

    async def canonical(self, scope_hash: str, content_hash: str,
                        key: str | None, now: float) -> MemoryRecord | None:
        # The key is compared on decoded records (each dialect stores free text its own
        # way). Live records sharing one content under different keys are few; past
        # DEDUP_CANDIDATES of them, an add is simply not deduplicated.
        found = await self._records(
            f"SELECT {SELECT_RECORD} FROM memory_records AS r"
            " WHERE r.scope_hash = ? AND r.content_hash = ?"
            " AND r.status IN ('active', 'pending_review')"
            " AND (r.expires_at IS NULL OR r.expires_at > ?)"
            " AND (r.valid_from IS NULL OR r.valid_from <= ?)"
            " AND (r.invalid_at IS NULL OR r.invalid_at > ?)"
            " ORDER BY r.id LIMIT ?", (scope_hash, content_hash, now, now, now, DEDUP_CANDIDATES))
        return next((record for record in found if record.key == key), None)

    async def by_ids(self, scope_hashes: Sequence[str],
                     record_ids: Sequence[str]) -> list[MemoryRecord]:
        db = self._db
        scopes, scope_params = db.member("r.scope_hash", list(scope_hashes))
        found: list[MemoryRecord] = []
        for chunk in chunks(unique(record_ids), db.chunk):
            ids, id_params = db.member("r.id", chunk)
            found += await self._records(
                f"SELECT {SELECT_RECORD} FROM memory_records AS r WHERE {ids} AND {scopes}",
                [*id_params, *scope_params])
        return found

    async def scan(self, scope_hash: str, after_id: str | None,
                   limit: int) -> list[MemoryRecord]:
        return await self._records(
            f"SELECT {SELECT_RECORD} FROM memory_records AS r"
            " WHERE r.scope_hash = ? AND r.id > ? ORDER BY r.id LIMIT ?",
            (scope_hash, after_id or "", limit))

    async def ids_in_scope(self, scope_hash: str, after_id: str | None,
                           limit: int) -> list[str]:
        db = self._db
        rows = await db.tuples(db.q(
            "SELECT id FROM memory_records WHERE scope_hash = ? AND id > ? ORDER BY id LIMIT ?"
        ), (scope_hash, after_id or "", limit))
        return [str(row[0]) for row in rows]

    async def ids_of_user(self, tenant_id: str, user_id: str, limit: int) -> list[str]:
        db = self._db
        rows = await db.tuples(db.q(
            "SELECT id FROM memory_records WHERE tenant_id = ? AND user_id = ? ORDER BY id LIMIT ?"
        ), (tenant_id, user_id, limit))
        return [str(row[0]) for row in rows]

    async def usage(self, tenant_id: str, scope_hash: str | None,
                    now: float) -> tuple[int, int]:
        db = self._db
        sql = (f"SELECT count(*), coalesce(sum({db.content_bytes}), 0)"
               " FROM memory_records WHERE tenant_id = ? AND status <> 'deleted'"
               " AND (expires_at IS NULL OR expires_at > ?)")
        params: list[Any] = [tenant_id, now]
        if scope_hash is not None:
            sql += " AND scope_hash = ?"
            params.append(scope_hash)
        rows = await db.tuples(db.q(sql), params)
        return int(rows[0][0]), int(rows[0][1])

    async def live_count(self, now: float) -> int:
        db = self._db
        rows = await db.tuples(db.q(
            "SELECT count(*) FROM memory_records WHERE status <> 'deleted'"
            " AND (expires_at IS NULL OR expires_at > ?)"), (now,))
        return int(rows[0][0])

    async def expired(self, now: float, limit: int) -> list[tuple[str, str]]:
        db = self._db
        rows = await db.tuples(db.q(
            "SELECT id, tenant_id FROM memory_records"
            " WHERE expires_at IS NOT NULL AND expires_at <= ?"
            " ORDER BY expires_at, id LIMIT ?"), (now, limit))
        return [(str(row[0]), str(row[1])) for row in rows]

    async def expired_among(self, tenant_id: str, record_ids: Sequence[str],
                            now: float) -> list[str]:
        db = self._db
        found: list[str] = []
        for chunk in chunks(unique(record_ids), db.chunk):
            ids, params = db.member("id", chunk)
            rows = await db.tuples(db.q(
                f"SELECT id FROM memory_records WHERE {ids} AND tenant_id = ?"
                " AND expires_at IS NOT NULL AND expires_at <= ?"), [*params, tenant_id, now])
            found += (str(row[0]) for row in rows)
        return sorted(found)

    async def insert(self, record: MemoryRecord) -> None:
        raise NotImplementedError  # the dialect's own: it indexes the record too

    async def replace(self, record: MemoryRecord, expected_revision: str) -> bool:
        raise NotImplementedError  # the dialect's own: it re-indexes the record too

    async def mark_indexed(self, record_id: str, version: int) -> None:
        db = self._db
        await db.queue(db.q(
            "UPDATE memory_records SET index_state = 'indexed'"
            " WHERE id = ? AND version = ? AND index_state <> 'indexed'"
        ), (record_id, version))


class _WithRows:
    """A postings source whose :meth:`identify` reads the documents' whole rows when
    they are few (the winners and their ties), so the winners' records come with their
    ids instead of in one more statement (a round trip on PostgreSQL)."""

    __slots__ = ("_db", "_most", "_source", "rows")

    def __init__(self, source: PostingsSource[int], db: SqlDialect, most: int) -> None:
        self._source = source
        self._db = db
        self._most = most
        self.rows: dict[int, Any] = {}

    async def statistics(self, terms: Sequence[str]) -> Statistics[int]:
        return await self._source.statistics(terms)

    async def postings(self, terms: Sequence[str]
                       ) -> Mapping[str, Sequence[tuple[int, int, int]]]:
        return await self._source.postings(terms)

    async def probe(self, terms: Sequence[str], docs: Sequence[int], *,
                    next_read: str | None = None) -> Mapping[str, Mapping[int, int]]:
        return await self._source.probe(terms, docs, next_read=next_read)

    async def identify(self, docs: Sequence[int]) -> Mapping[int, str]:
        if len(docs) > self._most:  # a large tie: ids only, rows of the winners later
            return await self._source.identify(docs)
        self.rows.update(await _rows_by_seq(self._db, docs))
        return {doc: str(row["id"]) for doc, row in self.rows.items()}


async def _rows_by_seq(db: SqlDialect, docs: Sequence[int]) -> dict[int, Any]:
    found: dict[int, Any] = {}
    for chunk in chunks(list(docs), db.chunk):
        clause, params = db.member("r.seq", chunk)
        found.update((int(row["seq"]), row) for row in await db.rows(db.q(
            f"SELECT r.seq, {SELECT_RECORD} FROM memory_records AS r WHERE {clause}"),
            params))
    return found


class SqlLexicalSearch:
    """BM25 over the requested scopes' visible records: :func:`lexical_topk.top_k` over
    the dialect's postings source (a document is its record's ``seq``), so scores and
    order equal every other backend's. Full rows are read for the winners only (with
    their ids, when the winners and their ties are few), and decoded for the winners
    only."""

    __slots__ = ("_db",)

    cooperative: ClassVar[bool] = False
    """Whether the ranking may yield to the event loop between slices of postings: only
    where it runs on the loop (PostgreSQL). SQLite runs a unit of work in a thread, on
    the promise that it awaits nothing but its transaction."""

    def __init__(self, db: SqlDialect) -> None:
        self._db = db

    def source(self, query: SearchQuery) -> PostingsSource[int]:
        raise NotImplementedError

    async def ranked(self, query: SearchQuery) -> RankedRows:
        """The winners in rank order with their scores, their rows (as the dialect's
        ``rows`` returns them) and ``candidates``: a search before its records are
        decoded (a ranking worker sends the rows to the provider's process as they are)."""
        if not query.tokens or not query.scope_hashes:
            return RankedRows((), {}, 0)
        source = _WithRows(self.source(query), self._db, 2 * query.limit)
        found = await top_k(source, query.tokens, query.limit,
                            cooperative=self.cooperative)
        rows = source.rows
        missing = [doc for doc, _ in found.ranked if doc not in rows]
        if missing:
            rows.update(await _rows_by_seq(self._db, missing))
        return RankedRows(found.ranked, rows, found.candidates)

    async def search(self, query: SearchQuery) -> SearchPage:
        found = await self.ranked(query)
        record_from_row = self._db.record_from_row
        return SearchPage(
            matches=tuple(ScoredRecord(record_from_row(found.rows[doc]), score)
                          for doc, score in found.ranked),
            candidates=found.candidates,
        )


@attrs.frozen(slots=True)
class RankedRows:
    ranked: tuple[tuple[int, float], ...]
    """``(seq, score)`` of the winners, best first."""
    rows: Mapping[int, Any]
    """Each winner's ``memory_records`` row (``seq`` and ``SELECT_RECORD``) by ``seq``;
    it may hold rows of ties that did not make the cut."""
    candidates: int
