"""Record versions on SQL: the history a replay and ``history`` read back, append-only."""

from __future__ import annotations

from governed_memory.records import MemoryVersion

from governed_memory_native.sql.dialect import SqlDialect
from governed_memory_native.sql.rows import VERSION_COLUMNS, version_from_row
from governed_memory_native.storage.copies import record_to_json


class SqlVersions:
    __slots__ = ("_db",)

    def __init__(self, db: SqlDialect) -> None:
        self._db = db

    async def of(self, record_id: str) -> list[MemoryVersion]:
        db = self._db
        rows = await db.rows(db.q(
            f"SELECT {VERSION_COLUMNS} FROM memory_versions WHERE record_id = ? ORDER BY version"
        ), (record_id,))
        return [version_from_row(row, db.untext(row["operation_id"])) for row in rows]

    async def get(self, record_id: str, version: int) -> MemoryVersion | None:
        db = self._db
        rows = await db.rows(db.q(
            f"SELECT {VERSION_COLUMNS} FROM memory_versions WHERE record_id = ? AND version = ?"
        ), (record_id, version))
        return version_from_row(rows[0], db.untext(rows[0]["operation_id"])) if rows else None

    async def append(self, version: MemoryVersion) -> None:
        db = self._db
        await db.queue(db.q(
            "INSERT INTO memory_versions"
            " (record_id, version, operation, recorded_at, operation_id, snapshot)"
            " VALUES (?, ?, ?, ?, ?, ?)"
        ), (version.record.id, version.record.version, version.operation.value,
            version.recorded_at, db.text(version.operation_id), record_to_json(version.record)))
