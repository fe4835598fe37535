"""Stored vectors on SQL, and the change log that lets a vector index kept in process
memory catch up on exactly what changed (:class:`repositories.VectorChangeLog`).

The log itself is kept by triggers on ``memory_vectors`` (each dialect's schema), so every
writer in any process feeds it; this module only reads it. Which records are candidates
under a search's filters is the dialects' own (:meth:`SqlVectors.candidates`): their
filters are written in their own SQL, and each keeps its planner off a scope-wide walk
its own way.
"""

from __future__ import annotations

from collections.abc import Sequence

from governed_memory.embedding import EmbedderIdentity

from governed_memory_native.sql.dialect import SqlDialect, chunks, unique
from governed_memory_native.sql.rows import VECTOR_COLUMNS, vector_from_row
from governed_memory_native.storage.values import StoredVector, VectorQuery, VectorScopeState


class SqlVectors:
    __slots__ = ("_db",)

    def __init__(self, db: SqlDialect) -> None:
        self._db = db

    async def candidates(self, query: VectorQuery) -> list[tuple[str, bytes]]:
        raise NotImplementedError

    async def of(self, record_id: str, identity: EmbedderIdentity) -> StoredVector | None:
        db = self._db
        rows = await db.rows(db.q(
            f"SELECT {VECTOR_COLUMNS} FROM memory_vectors WHERE record_id = ? AND identity = ?"
        ), (record_id, str(identity)))
        return vector_from_row(rows[0], identity) if rows else None

    async def counts(self) -> dict[str, int]:
        rows = await self._db.tuples(
            "SELECT identity, count(*) FROM memory_vectors GROUP BY identity")
        return {str(identity): int(n) for identity, n in rows}

    async def missing(
        self, identity: EmbedderIdentity, after_id: str | None, limit: int, now: float,
    ) -> tuple[list[tuple[str, str, int]], int, str | None]:
        db = self._db
        rows = await db.tuples(db.q(
            "SELECT r.id, r.scope_hash, r.version, v.record_id IS NULL AS missing"
            " FROM memory_records AS r LEFT JOIN memory_vectors AS v"
            " ON v.record_id = r.id AND v.identity = ? AND v.content_hash = r.content_hash"
            " WHERE r.id > ? AND r.status <> 'deleted'"
            " AND (r.expires_at IS NULL OR r.expires_at > ?) ORDER BY r.id LIMIT ?"
        ), (str(identity), after_id or "", now, limit))
        missing = [(str(row[0]), str(row[1]), int(row[2])) for row in rows if row[3]]
        return missing, len(rows), (str(rows[-1][0]) if rows else None)

    async def put(self, vector: StoredVector) -> None:
        db = self._db
        identity = vector.identity
        await db.queue(db.q(
            "DELETE FROM memory_vectors WHERE record_id = ? AND identity <> ?"
        ), (vector.record_id, str(identity)))
        await db.queue(db.q(
            "INSERT INTO memory_vectors (record_id, identity, embedder_id, model_revision,"
            " dimension, scope_hash, version, content_hash, vector, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (record_id, identity) DO UPDATE SET scope_hash = excluded.scope_hash,"
            " version = excluded.version, content_hash = excluded.content_hash,"
            " vector = excluded.vector, created_at = excluded.created_at"
        ), (vector.record_id, str(identity), identity.id, identity.model_revision,
            identity.dimension, vector.scope_hash, vector.version, vector.content_hash,
            vector.vector, vector.created_at))

    async def remove(self, record_id: str) -> int:
        db = self._db
        return await db.write(db.q("DELETE FROM memory_vectors WHERE record_id = ?"),
                              (record_id,))

    # -- the change log (repositories.VectorChangeLog) -------------------------------------

    async def scope_states(self, identity: EmbedderIdentity,
                           scope_hashes: Sequence[str]) -> dict[str, VectorScopeState]:
        db = self._db
        states: dict[str, VectorScopeState] = {}
        for chunk in chunks(unique(scope_hashes), db.chunk):
            scopes, params = db.member("scope_hash", chunk)
            rows = await db.tuples(db.q(
                f"SELECT scope_hash, seq, vectors FROM vector_scopes WHERE identity = ?"
                f" AND {scopes}"), [str(identity), *params])
            states.update((str(scope_hash), VectorScopeState(int(seq), int(vectors)))
                          for scope_hash, seq, vectors in rows)
        return states

    async def changes(self, identity: EmbedderIdentity, scope_hash: str,
                      after_seq: int, limit: int) -> list[tuple[int, str]]:
        db = self._db
        rows = await db.tuples(db.q(
            "SELECT seq, record_id FROM vector_changes WHERE identity = ? AND scope_hash = ?"
            " AND seq > ? ORDER BY seq LIMIT ?"), (str(identity), scope_hash, after_seq, limit))
        return [(int(seq), str(record_id)) for seq, record_id in rows]

    async def in_scope(self, identity: EmbedderIdentity, scope_hash: str,
                       after_id: str | None, limit: int) -> list[tuple[str, bytes]]:
        """A page of the scope's vectors in record id order, through the index on
        ``(identity, scope_hash, record_id)``."""
        db = self._db
        return await db.vector_pairs(db.q(
            "SELECT record_id, vector FROM memory_vectors WHERE identity = ? AND scope_hash = ?"
            " AND record_id > ? ORDER BY record_id LIMIT ?"),
            (str(identity), scope_hash, after_id or "", limit))

    async def by_ids(self, identity: EmbedderIdentity, scope_hash: str,
                     record_ids: Sequence[str]) -> list[tuple[str, bytes]]:
        db = self._db
        found: list[tuple[str, bytes]] = []
        for chunk in chunks(unique(record_ids), db.chunk):
            ids, params = db.member("record_id", chunk)
            found += await db.vector_pairs(db.q(
                "SELECT record_id, vector FROM memory_vectors WHERE identity = ?"
                f" AND scope_hash = ? AND {ids}"), [str(identity), scope_hash, *params])
        return found
