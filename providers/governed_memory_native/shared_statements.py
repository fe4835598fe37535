"""The transaction methods whose SQL is the same on SQLite and PostgreSQL.

Both dialects speak this SQL (``ON CONFLICT``, ``excluded``, ``LIMIT``) and hand rows back
addressable by column name, so these statements differ only in the placeholder: ``?``
for sqlite3, ``%s`` for psycopg. Keeping one copy means a fix to one backend's read or
write cannot miss the other. A dialect subclasses this, names its placeholder, and
supplies how it runs a statement and decodes a record row; everything whose SQL or
locking really differs stays in the dialect's own transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Final

from governed_memory.embedding import EmbedderIdentity
from governed_memory.events import MemoryEvent
from governed_memory.indexing import IndexJob, JobState
from governed_memory.records import MemoryRecord

from governed_memory_native.port import StoredVector
from governed_memory_native.record_rows import SELECT_RECORD
from governed_memory_native.stored_rows import (
    JOB_COLUMNS,
    VECTOR_COLUMNS,
    job_from_row,
    vector_from_row,
)

DEDUP_CANDIDATES: Final = 16
"""Live records of one content a dedup lookup compares keys among."""


class SharedStatements:
    placeholder: ClassVar[str]
    """How the driver marks a positional parameter; statements here are written with ``?``."""

    async def _rows(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[Any]:
        raise NotImplementedError

    async def _write(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> int:
        raise NotImplementedError

    def _record_from_row(self, row: Any) -> MemoryRecord:
        raise NotImplementedError

    def _q(self, sql: str) -> str:
        return sql.replace("?", self.placeholder)

    async def record(self, scope_hash: str, record_id: str) -> MemoryRecord | None:
        rows = await self._rows(self._q(
            f"SELECT {SELECT_RECORD} FROM memory_records AS r WHERE r.id = ? AND r.scope_hash = ?"
        ), (record_id, scope_hash))
        return self._record_from_row(rows[0]) if rows else None

    async def list_pending(self, scope_hash: str, after_id: str | None, limit: int,
                           now: float) -> list[MemoryRecord]:
        rows = await self._rows(self._q(
            f"SELECT {SELECT_RECORD} FROM memory_records AS r"
            " WHERE r.scope_hash = ? AND r.status = 'pending_review'"
            " AND (r.expires_at IS NULL OR r.expires_at > ?) AND r.id > ?"
            " ORDER BY r.id LIMIT ?"
        ), (scope_hash, now, after_id or "", limit))
        return [self._record_from_row(row) for row in rows]

    async def canonical_by_content(self, scope_hash: str, content_hash: str,
                                   key: str | None, now: float) -> MemoryRecord | None:
        # The key is compared on decoded records (each dialect stores free text its own
        # way). Live records sharing one content under different keys are few; past
        # DEDUP_CANDIDATES of them, an add is simply not deduplicated.
        rows = await self._rows(self._q(
            f"SELECT {SELECT_RECORD} FROM memory_records AS r"
            " WHERE r.scope_hash = ? AND r.content_hash = ?"
            " AND r.status IN ('active', 'pending_review')"
            " AND (r.expires_at IS NULL OR r.expires_at > ?)"
            " AND (r.valid_from IS NULL OR r.valid_from <= ?)"
            " AND (r.invalid_at IS NULL OR r.invalid_at > ?)"
            " ORDER BY r.id LIMIT ?"
        ), (scope_hash, content_hash, now, now, now, DEDUP_CANDIDATES))
        return next((record for record in map(self._record_from_row, rows)
                     if record.key == key), None)

    async def scan_scope(
        self, scope_hash: str, after_id: str | None, limit: int
    ) -> list[MemoryRecord]:
        rows = await self._rows(self._q(
            f"SELECT {SELECT_RECORD} FROM memory_records AS r"
            " WHERE r.scope_hash = ? AND r.id > ? ORDER BY r.id LIMIT ?"
        ), (scope_hash, after_id or "", limit))
        return [self._record_from_row(row) for row in rows]

    async def record_ids_of_user(self, tenant_id: str, user_id: str, limit: int) -> list[str]:
        rows = await self._rows(self._q(
            "SELECT id FROM memory_records WHERE tenant_id = ? AND user_id = ? ORDER BY id LIMIT ?"
        ), (tenant_id, user_id, limit))
        return [str(row["id"]) for row in rows]

    async def record_ids_in_scope(
        self, scope_hash: str, after_id: str | None, limit: int
    ) -> list[str]:
        rows = await self._rows(self._q(
            "SELECT id FROM memory_records WHERE scope_hash = ? AND id > ? ORDER BY id LIMIT ?"
        ), (scope_hash, after_id or "", limit))
        return [str(row["id"]) for row in rows]

    async def live_record_count(self, now: float) -> int:
        rows = await self._rows(self._q(
            "SELECT count(*) AS n FROM memory_records WHERE status <> 'deleted'"
            " AND (expires_at IS NULL OR expires_at > ?)"
        ), (now,))
        return int(rows[0]["n"])

    async def vector_counts(self) -> dict[str, int]:
        rows = await self._rows(
            "SELECT identity, count(*) AS n FROM memory_vectors GROUP BY identity")
        return {str(row["identity"]): int(row["n"]) for row in rows}

    async def index_job_counts(self) -> tuple[dict[str, int], float | None]:
        rows = await self._rows("SELECT state, count(*) AS n FROM index_jobs GROUP BY state")
        pending = await self._rows(
            "SELECT min(created_at) AS oldest FROM index_jobs WHERE state = 'pending'")
        oldest = pending[0]["oldest"] if pending else None
        return ({str(row["state"]): int(row["n"]) for row in rows},
                None if oldest is None else float(oldest))

    async def vector_of(self, record_id: str,
                        identity: EmbedderIdentity) -> StoredVector | None:
        rows = await self._rows(self._q(
            f"SELECT {VECTOR_COLUMNS} FROM memory_vectors WHERE record_id = ? AND identity = ?"
        ), (record_id, str(identity)))
        return vector_from_row(rows[0], identity) if rows else None

    async def index_jobs(self, state: JobState, limit: int) -> list[IndexJob]:
        rows = await self._rows(self._q(
            f"SELECT {JOB_COLUMNS} FROM index_jobs WHERE state = ? ORDER BY seq LIMIT ?"
        ), (state.value, limit))
        return [job_from_row(row) for row in rows]

    async def put_event(self, event: MemoryEvent) -> None:
        await self._write(self._q(
            "INSERT INTO event_outbox (event_id, tenant_id, body) VALUES (?, ?, ?)"
            " ON CONFLICT (event_id) DO NOTHING"
        ), (event.event_id, event.tenant_id, event.to_json()))

    async def put_vector(self, vector: StoredVector) -> None:
        identity = vector.identity
        await self._write(self._q(
            "DELETE FROM memory_vectors WHERE record_id = ? AND identity <> ?"
        ), (vector.record_id, str(identity)))
        await self._write(self._q(
            "INSERT INTO memory_vectors (record_id, identity, embedder_id, model_revision,"
            " dimension, scope_hash, version, content_hash, vector, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (record_id, identity) DO UPDATE SET scope_hash = excluded.scope_hash,"
            " version = excluded.version, content_hash = excluded.content_hash,"
            " vector = excluded.vector, created_at = excluded.created_at"
        ), (vector.record_id, str(identity), identity.id, identity.model_revision,
            identity.dimension, vector.scope_hash, vector.version, vector.content_hash,
            vector.vector, vector.created_at))

    async def mark_indexed(self, record_id: str, version: int) -> None:
        await self._write(self._q(
            "UPDATE memory_records SET index_state = 'indexed'"
            " WHERE id = ? AND version = ? AND index_state <> 'indexed'"
        ), (record_id, version))
