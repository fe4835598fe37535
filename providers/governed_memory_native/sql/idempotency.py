"""Idempotency entries on SQL: what a keyed write produced, so a retry gets it back."""

from __future__ import annotations

from typing import cast

from governed_memory_native.sql.dialect import SqlDialect
from governed_memory_native.sql.rows import IDEMPOTENCY_COLUMNS, idempotency_from_row
from governed_memory_native.storage.values import IdempotencyEntry, Removal


class SqlIdempotency:
    __slots__ = ("_db",)

    def __init__(self, db: SqlDialect) -> None:
        self._db = db

    async def get(self, scope_hash: str, operation: str, key: str) -> IdempotencyEntry | None:
        db = self._db
        rows = await db.rows(db.q(
            f"SELECT {IDEMPOTENCY_COLUMNS} FROM memory_idempotency"
            " WHERE scope_hash = ? AND operation = ? AND idem_key = ?"
        ), (scope_hash, operation, db.text(key)))
        if not rows:
            return None
        return idempotency_from_row(rows[0], cast(str, db.untext(rows[0]["idem_key"])))

    async def put(self, entry: IdempotencyEntry) -> None:
        db = self._db
        await db.queue(db.q(
            "INSERT INTO memory_idempotency (scope_hash, operation, idem_key, fingerprint,"
            " record_id, tenant_id, user_id, version, revision, hard, erased, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (scope_hash, operation, idem_key) DO UPDATE SET"
            " fingerprint = excluded.fingerprint, record_id = excluded.record_id,"
            " tenant_id = excluded.tenant_id, user_id = excluded.user_id,"
            " version = excluded.version, revision = excluded.revision,"
            " hard = excluded.hard, erased = excluded.erased,"
            " created_at = excluded.created_at"
        ), (entry.scope_hash, entry.operation, db.text(entry.key), entry.fingerprint,
            entry.record_id, entry.tenant_id, entry.user_id, entry.version, entry.revision,
            entry.hard, entry.erased, entry.created_at))

    async def erase(self, *, scope_hash: str | None = None,
                    tenant_user: tuple[str, str] | None = None) -> Removal:
        if scope_hash is not None:
            where, params = "scope_hash = ?", [scope_hash]
        elif tenant_user is not None:
            where, params = "tenant_id = ? AND user_id = ?", list(tenant_user)
        else:
            return Removal()
        db = self._db
        rows = await db.tuples(db.q(
            f"DELETE FROM memory_idempotency WHERE {where} RETURNING scope_hash"), params)
        return Removal(idempotency_entries=len(rows),
                       scope_hashes=frozenset(str(row[0]) for row in rows))
