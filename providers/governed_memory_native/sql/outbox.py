"""The event outbox on SQL: a write's ``committed`` event, stored in the write's own
transaction, until a dispatcher acknowledges it."""

from __future__ import annotations

from collections.abc import Sequence

from governed_memory.events import MemoryEvent

from governed_memory_native.sql.dialect import SqlDialect, chunks
from governed_memory_native.sql.rows import event_from_json


class SqlOutbox:
    __slots__ = ("_db",)

    def __init__(self, db: SqlDialect) -> None:
        self._db = db

    async def pending(self, limit: int) -> list[MemoryEvent]:
        db = self._db
        rows = await db.tuples(db.q("SELECT body FROM event_outbox ORDER BY seq LIMIT ?"),
                               (limit,))
        return [event_from_json(str(row[0])) for row in rows]

    async def put(self, event: MemoryEvent) -> None:
        db = self._db
        await db.queue(db.q(
            "INSERT INTO event_outbox (event_id, tenant_id, body) VALUES (?, ?, ?)"
            " ON CONFLICT (event_id) DO NOTHING"
        ), (event.event_id, event.tenant_id, event.to_json()))

    async def acknowledge(self, event_ids: Sequence[str]) -> None:
        """Queued without the writer lock (deletions by id): on PostgreSQL the deletes
        travel with the write's next round trip, never in one of their own."""
        db = self._db
        for chunk in chunks(sorted(set(event_ids)), db.chunk):
            ids, params = db.member("event_id", chunk)
            await db.queue(db.q(f"DELETE FROM event_outbox WHERE {ids}"), params,
                           lock_free=True)
