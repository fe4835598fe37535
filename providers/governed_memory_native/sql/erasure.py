"""Physical erasure on SQL: a record with everything derived from it, in one transaction.

The statement list is shared; taking records out of the lexical index is the dialects'
own (:meth:`SqlErasure.unindexed`): SQLite walks its delta, tombstones and main tables,
PostgreSQL does it in one statement sent with the deletions. Erasure progress is the
dialects' own too: its scope hashes are a JSON list on SQLite and an array on
PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence

from governed_memory_native.sql.dialect import Params, SqlDialect, chunks
from governed_memory_native.storage.values import Removal


class SqlErasure:
    __slots__ = ("_db",)

    def __init__(self, db: SqlDialect) -> None:
        self._db = db

    async def unindexed(self, docs: Sequence[int],
                        then: Sequence[tuple[str, Params]]) -> tuple[int, list[int]]:
        """Take the records ``docs`` (their ``seq``) out of the lexical index, then run
        ``then``: how many of them were indexed, and each statement's count."""
        raise NotImplementedError

    async def erase(self, record_ids: Sequence[str], *,
                    tombstone_idempotency: bool = False) -> Removal:
        db = self._db
        removal = Removal()
        for chunk in chunks(sorted(set(record_ids)), db.chunk):
            ids, params = db.member("id", chunk)
            rows = await db.tuples(db.q(
                f"SELECT seq, scope_hash FROM memory_records WHERE {ids}"), params)
            if not rows:
                continue
            of, _ = db.member("record_id", chunk)
            idempotency = (f"UPDATE memory_idempotency SET erased = true WHERE {of}"
                           if tombstone_idempotency else
                           f"DELETE FROM memory_idempotency WHERE {of}")
            indexed, (vectors, _jobs, versions, entries, records) = await self.unindexed(
                [int(row[0]) for row in rows], [
                    (db.q(sql), params) for sql in (
                        f"DELETE FROM memory_vectors WHERE {of}",
                        f"DELETE FROM index_jobs WHERE {of}",
                        f"DELETE FROM memory_versions WHERE {of}",
                        idempotency,
                        f"DELETE FROM memory_records WHERE {ids}")])
            removal += Removal(
                records=records, versions=versions, index_entries=indexed + vectors,
                idempotency_entries=0 if tombstone_idempotency else entries,
                scope_hashes=frozenset(str(row[1]) for row in rows))
        return removal

    async def add_progress(self, tenant_id: str, user_id: str, removal: Removal,
                           started_at: float) -> None:
        raise NotImplementedError

    async def take_progress(self, tenant_id: str,
                            user_id: str) -> tuple[Removal, float | None]:
        raise NotImplementedError
