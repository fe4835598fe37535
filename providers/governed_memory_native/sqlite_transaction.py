"""One SQLite transaction: the port's reads and writes as SQL.

Every filter (scope, status, expiry, type, entities, metadata) is a SQL predicate, so a
record of another scope is never even fetched into Python. Statements only ever take
bound parameters; the few pieces spliced into SQL text are placeholders we generate.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

import aiosqlite
from governed_memory.converter import structure
from governed_memory.errors import MemoryStorageError, MemoryValidationError
from governed_memory.records import (
    MemoryRecord,
    MemoryType,
    MemoryVersion,
    RecordStatus,
    VersionOperation,
)

from governed_memory_native.port import (
    IdempotencyEntry,
    Removal,
    ScoredRecord,
    SearchPage,
    SearchQuery,
)
from governed_memory_native.snapshots import record_from_json, record_to_json
from governed_memory_native.sqlite_errors import translated
from governed_memory_native.sqlite_rows import (
    RECORD_COLUMNS,
    SELECT_RECORD,
    record_from_row,
    record_params,
)
from governed_memory_native.tokens import fts5_match_expression, index_text

_CHUNK: Final = 500
"""Ids bound per statement; far below SQLite's variable limit."""
_INT64: Final = (-(2**63), 2**63 - 1)

_VISIBLE: Final = "r.status = 'active' AND (r.expires_at IS NULL OR r.expires_at > ?)"


def _marks(count: int) -> str:
    return ", ".join("?" * count)


def _chunks(items: Sequence[str]) -> Iterable[Sequence[str]]:
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


class SqliteTransaction:
    """Runs on a connection that already holds ``BEGIN`` (reads) or ``BEGIN IMMEDIATE``."""

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn

    async def _rows(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[Any]:
        with translated("read"):
            async with self._conn.execute(sql, params) as cursor:
                return list(await cursor.fetchall())

    async def _write(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> int:
        with translated("write"):
            async with self._conn.execute(sql, params) as cursor:
                return int(cursor.rowcount)

    # -- reads ------------------------------------------------------------------------

    async def record(self, scope_hash: str, record_id: str) -> MemoryRecord | None:
        rows = await self._rows(
            f"SELECT {SELECT_RECORD} FROM memory_records AS r WHERE r.id = ? AND r.scope_hash = ?",
            (record_id, scope_hash),
        )
        return record_from_row(rows[0]) if rows else None

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
        where = [f"r.scope_hash IN ({_marks(len(query.scope_hashes))})", "AND", _VISIBLE]
        params: list[Any] = [*query.scope_hashes, query.now]
        if query.memory_types:
            where.append(f"AND r.memory_type IN ({_marks(len(query.memory_types))})")
            params.extend(kind.value for kind in query.memory_types)
        if query.entity_ids:
            where.append("AND EXISTS (SELECT 1 FROM json_each(r.entity_ids) AS e "
                         f"WHERE e.value IN ({_marks(len(query.entity_ids))}))")
            params.extend(query.entity_ids)
        for name, value in sorted(query.metadata_filter.items()):
            clause, values = _metadata_clause(name, value)
            where.append("AND " + clause)
            params.extend(values)
        matched = (
            "WITH hits AS MATERIALIZED ("
            " SELECT rowid AS seq, -bm25(memory_fts) AS score"
            " FROM memory_fts WHERE memory_fts MATCH ?) "
        )
        match = fts5_match_expression(query.tokens)
        body = "FROM hits JOIN memory_records AS r ON r.seq = hits.seq WHERE " + " ".join(where)
        # One MATCH: the window count is taken over every filtered candidate before LIMIT.
        rows = await self._rows(
            f"{matched} SELECT {SELECT_RECORD}, hits.score AS score, "
            f"count(*) OVER () AS candidates {body} "
            "ORDER BY hits.score DESC, r.id ASC LIMIT ?",
            [match, *params, query.limit],
        )
        return SearchPage(
            matches=tuple(ScoredRecord(record_from_row(row), float(row["score"]))
                          for row in rows),
            candidates=int(rows[0]["candidates"]) if rows else 0,
        )

    async def versions(self, record_id: str) -> list[MemoryVersion]:
        rows = await self._rows(
            "SELECT operation, recorded_at, operation_id, snapshot FROM memory_versions "
            "WHERE record_id = ? ORDER BY version",
            (record_id,),
        )
        return [_version_from_row(row) for row in rows]

    async def version(self, record_id: str, version: int) -> MemoryVersion | None:
        rows = await self._rows(
            "SELECT operation, recorded_at, operation_id, snapshot FROM memory_versions "
            "WHERE record_id = ? AND version = ?",
            (record_id, version),
        )
        return _version_from_row(rows[0]) if rows else None

    async def idempotency(
        self, scope_hash: str, operation: str, key: str
    ) -> IdempotencyEntry | None:
        rows = await self._rows(
            "SELECT scope_hash, operation, idem_key, fingerprint, record_id, tenant_id, user_id,"
            " version, revision, hard, erased, created_at FROM memory_idempotency"
            " WHERE scope_hash = ? AND operation = ? AND idem_key = ?",
            (scope_hash, operation, key),
        )
        if not rows:
            return None
        row = rows[0]
        return IdempotencyEntry(
            scope_hash=row["scope_hash"], operation=row["operation"], key=row["idem_key"],
            fingerprint=row["fingerprint"], record_id=row["record_id"],
            tenant_id=row["tenant_id"], user_id=row["user_id"], created_at=row["created_at"],
            version=row["version"], revision=row["revision"], hard=bool(row["hard"]),
            erased=bool(row["erased"]),
        )

    async def record_ids_in_scope(
        self, scope_hash: str, after_id: str | None, limit: int
    ) -> list[str]:
        rows = await self._rows(
            "SELECT id FROM memory_records WHERE scope_hash = ? AND id > ? ORDER BY id LIMIT ?",
            (scope_hash, after_id or "", limit),
        )
        return [str(row[0]) for row in rows]

    async def record_ids_of_user(self, tenant_id: str, user_id: str, limit: int) -> list[str]:
        rows = await self._rows(
            "SELECT id FROM memory_records WHERE tenant_id = ? AND user_id = ? ORDER BY id LIMIT ?",
            (tenant_id, user_id, limit),
        )
        return [str(row[0]) for row in rows]

    async def scan_scope(
        self, scope_hash: str, after_id: str | None, limit: int
    ) -> list[MemoryRecord]:
        rows = await self._rows(
            f"SELECT {SELECT_RECORD} FROM memory_records AS r "
            "WHERE r.scope_hash = ? AND r.id > ? ORDER BY r.id LIMIT ?",
            (scope_hash, after_id or "", limit),
        )
        return [record_from_row(row) for row in rows]

    # -- writes -----------------------------------------------------------------------

    async def insert_record(self, record: MemoryRecord) -> None:
        columns = ", ".join(RECORD_COLUMNS)
        values = ", ".join(f":{name}" for name in RECORD_COLUMNS)
        with translated("write"):
            async with self._conn.execute(
                f"INSERT INTO memory_records ({columns}) VALUES ({values})",
                record_params(record),
            ) as cursor:
                seq = cursor.lastrowid
        if record.status is not RecordStatus.DELETED:
            await self._write("INSERT INTO memory_fts (rowid, content) VALUES (?, ?)",
                              (seq, index_text(record.content)))

    async def replace_record(self, record: MemoryRecord, expected_revision: str) -> bool:
        assignments = ", ".join(f"{name} = :{name}" for name in RECORD_COLUMNS if name != "id")
        params = record_params(record)
        params["expected_revision"] = expected_revision
        changed = await self._write(
            f"UPDATE memory_records SET {assignments} "
            "WHERE id = :id AND scope_hash = :scope_hash AND revision = :expected_revision",
            params,
        )
        if changed != 1:
            return False
        rows = await self._rows("SELECT seq FROM memory_records WHERE id = ?", (record.id,))
        seq = int(rows[0][0])
        await self._write("DELETE FROM memory_fts WHERE rowid = ?", (seq,))
        if record.status is not RecordStatus.DELETED:
            await self._write("INSERT INTO memory_fts (rowid, content) VALUES (?, ?)",
                              (seq, index_text(record.content)))
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
            seqs = [int(row[0]) for row in rows]
            seq_marks = _marks(len(seqs))
            indexed = await self._rows(
                f"SELECT count(*) FROM memory_fts WHERE rowid IN ({seq_marks})", seqs
            )
            await self._write(f"DELETE FROM memory_fts WHERE rowid IN ({seq_marks})", seqs)
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
                records=records, versions=versions, index_entries=int(indexed[0][0]),
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


def _version_from_row(row: Any) -> MemoryVersion:
    try:
        operation = structure(row["operation"], VersionOperation)
    except MemoryValidationError:
        raise MemoryStorageError("a stored version could not be read") from None
    return MemoryVersion(
        record=record_from_json(row["snapshot"]),
        operation=operation,
        recorded_at=float(row["recorded_at"]),
        operation_id=row["operation_id"],
    )
