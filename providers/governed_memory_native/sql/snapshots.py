"""Retrieval snapshots on SQL: what a search returned (ids, versions, scores), for replay.

Storing and purging them are lock-free on PostgreSQL: appends and deletions by id that
row locks alone keep safe, so a search's snapshot never waits for memory writes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from governed_memory_native.sql.dialect import SqlDialect
from governed_memory_native.sql.rows import snapshot_body
from governed_memory_native.storage.copies import dumps


class SqlSnapshots:
    __slots__ = ("_db",)

    def __init__(self, db: SqlDialect) -> None:
        self._db = db

    async def get(self, snapshot_id: str) -> Mapping[str, Any] | None:
        db = self._db
        rows = await db.tuples(db.q(
            "SELECT body FROM retrieval_snapshots WHERE snapshot_id = ?"), (snapshot_id,))
        return snapshot_body(rows[0][0]) if rows else None

    async def put(self, snapshot_id: str, tenant_id: str, body: Mapping[str, Any], *,
                  created_at: float, subjects: Sequence[str]) -> None:
        db = self._db
        await db.queue(db.q(
            "INSERT INTO retrieval_snapshots (snapshot_id, tenant_id, body, created_at)"
            " VALUES (?, ?, ?, ?)"), (snapshot_id, tenant_id, dumps(body), created_at),
            lock_free=True)
        users = sorted(set(subjects))
        if users:
            await db.queue(db.q(
                "INSERT INTO retrieval_snapshot_subjects (tenant_id, user_id, snapshot_id)"
                " VALUES " + ", ".join(["(?, ?, ?)"] * len(users))),
                [value for user_id in users for value in (tenant_id, user_id, snapshot_id)],
                lock_free=True)

    async def erase_of_user(self, tenant_id: str, user_id: str,
                            tombstone: Mapping[str, Any]) -> int:
        db = self._db
        rows = await db.tuples(db.q(
            "SELECT snapshot_id FROM retrieval_snapshot_subjects"
            " WHERE tenant_id = ? AND user_id = ? ORDER BY snapshot_id"), (tenant_id, user_id))
        for (snapshot_id,) in rows:
            await db.queue(db.q(
                "DELETE FROM retrieval_snapshot_subjects WHERE snapshot_id = ?"), (snapshot_id,))
            await db.queue(db.q(
                "UPDATE retrieval_snapshots SET body = ? WHERE snapshot_id = ?"),
                (dumps({**tombstone, "snapshot_id": str(snapshot_id)}), snapshot_id))
        return len(rows)

    async def purge(self, before: float, limit: int) -> int:
        """A concurrent purge of the same snapshots waits on their row locks, then finds
        them gone."""
        db = self._db
        rows = await db.rows(db.q(
            "SELECT snapshot_id FROM retrieval_snapshots WHERE created_at < ?"
            " ORDER BY created_at, snapshot_id LIMIT ?"), (before, limit), lock_free=True)
        if not rows:
            return 0
        ids, params = db.member("snapshot_id", [str(row["snapshot_id"]) for row in rows])
        await db.queue(db.q(f"DELETE FROM retrieval_snapshot_subjects WHERE {ids}"), params,
                       lock_free=True)
        return await db.write(db.q(f"DELETE FROM retrieval_snapshots WHERE {ids}"), params,
                              lock_free=True)
