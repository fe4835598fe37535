"""Scope revisions on SQL: read in one statement, advanced by triggers.

Triggers on ``memory_records`` and ``memory_vectors`` (SQLite schema v14, PostgreSQL
v10) advance ``scope_revisions`` in the transaction of every statement that changes a
scope's records or vectors, whoever runs it: this provider in any process, the
indexing worker, erasure's cascades, a later migration. Only the tenant epoch is
advanced by a statement here, by ``delete_user``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from governed_memory.scope_revisions import ScopeState, epoch_name

from governed_memory_native.sql.dialect import Params, SqlDialect, chunks

_INSTANT_COLUMNS: Final = ("expires_at", "valid_from", "invalid_at")
"""The record fields whose instants change what a search returns without a write."""


class SqlScopeRevisions:
    __slots__ = ("_db",)

    def __init__(self, db: SqlDialect) -> None:
        self._db = db

    async def read(self, tenant_id: str, scope_hashes: Sequence[str],
                   now: float) -> ScopeState:
        """The revisions and the horizon in one statement (so one snapshot, and on
        PostgreSQL one round trip). Each instant is the first entry of a partial index
        on ``(scope_hash, column)``: a seek per scope and column, never a scan."""
        db = self._db
        names = [*dict.fromkeys(scope_hashes), epoch_name(tenant_id)]
        member, params = db.member("name", names)
        instants: list[str] = []
        bound: list[Any] = list(params)
        for scope_hash in dict.fromkeys(scope_hashes):
            for column in _INSTANT_COLUMNS:
                instants.append(
                    f"SELECT (SELECT {column} FROM memory_records WHERE scope_hash = ?"
                    f" AND {column} > ? ORDER BY {column} LIMIT 1) AS at")
                bound += [scope_hash, now]
        if not instants:
            instants.append("SELECT NULL AS at")
        sql = (f"SELECT name, revision, NULL AS horizon FROM scope_revisions WHERE {member}"
               " UNION ALL SELECT NULL, NULL, min(at) FROM ("
               + " UNION ALL ".join(instants) + ") AS instants")
        stored: dict[str, int] = {}
        horizon: float | None = None
        for name, revision, at in await db.tuples(db.q(sql), bound):
            if name is not None:
                stored[str(name)] = int(revision)
            elif at is not None:
                horizon = float(at)
        revisions = tuple(stored.get(scope_hash, 0) for scope_hash in scope_hashes)
        return ScopeState((*revisions, stored.get(names[-1], 0)), horizon)

    async def advance_epoch(self, tenant_id: str, forget: Sequence[str]) -> None:
        db = self._db
        statements: list[tuple[str, Params]] = []
        for chunk in chunks(sorted(set(forget)), db.chunk):
            member, params = db.member("name", chunk)
            statements.append((db.q(f"DELETE FROM scope_revisions WHERE {member}"), params))
        statements.append((db.q(
            "INSERT INTO scope_revisions (name, revision) VALUES (?, 1)"
            " ON CONFLICT (name) DO UPDATE SET revision = scope_revisions.revision + 1"),
            (epoch_name(tenant_id),)))
        await db.write_many(statements)
