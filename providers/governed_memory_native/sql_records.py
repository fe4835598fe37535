"""Records and their lexical search on SQL, one statement set for both dialects.

Every filter (scope, status, expiry, type) is a SQL predicate, so a record of another
scope is never even fetched into Python. Storing a record and re-indexing it differ per
dialect (SQLite keeps a lexical delta, PostgreSQL indexes in the insert's own
statement), so :meth:`SqlRecords.insert` and :meth:`SqlRecords.replace` are the
dialects' own; so is the postings source a search ranks over.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from governed_memory.records import MemoryRecord, MemoryType

from governed_memory_native.lexical_topk import PostingsSource, top_k
from governed_memory_native.record_rows import SELECT_RECORD
from governed_memory_native.sql_dialect import SqlDialect, chunks, unique
from governed_memory_native.storage_values import ScoredRecord, SearchPage, SearchQuery

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


class SqlLexicalSearch:
    """BM25 over the requested scopes' visible records: :func:`lexical_topk.top_k` over
    the dialect's postings source (a document is its record's ``seq``), so scores and
    order equal every other backend's. Full rows are read for the winners only."""

    __slots__ = ("_db",)

    def __init__(self, db: SqlDialect) -> None:
        self._db = db

    def source(self, query: SearchQuery) -> PostingsSource[int]:
        raise NotImplementedError

    async def search(self, query: SearchQuery) -> SearchPage:
        if not query.tokens or not query.scope_hashes:
            return SearchPage(matches=(), candidates=0)
        found = await top_k(self.source(query), query.tokens, query.limit)
        if not found.ranked:
            return SearchPage(matches=(), candidates=found.candidates)
        db = self._db
        winners, params = db.member("r.seq", [doc for doc, _ in found.ranked])
        full = {
            int(row["seq"]): db.record_from_row(row)
            for row in await db.rows(db.q(
                f"SELECT r.seq, {SELECT_RECORD} FROM memory_records AS r WHERE {winners}"),
                params)
        }
        return SearchPage(
            matches=tuple(ScoredRecord(full[doc], score) for doc, score in found.ranked),
            candidates=found.candidates,
        )
