"""The adapter's ledger: what Mem0 cannot keep for the governed contract.

Mem0 stores the text, its vector and its metadata. It has no revisions, no version
history the contract can replay, no idempotency, no ordering a cursor can trust
(``get_all`` truncates) and no way to find every namespace of one user. This SQLite
file keeps exactly that, keyed by record id:

- ``records``: one row per record Mem0 holds for us (scope, Mem0 id, key, status,
  expiry, revision) with the record's fields except its text, which stays in Mem0;
- ``versions``: full snapshots for ``history`` (erased with the record);
- ``idempotency``: first results of keyed writes;
- ``namespaces``: every scope (and so every Mem0 namespace) a user ever wrote to,
  kept until that user is erased, so ``delete_user`` finds them all;
- ``intents``: a Mem0 write about to be sent, so a timeout can be reconciled.

All access happens under the store lock in one worker thread at a time; each method
commits its own transaction, and ``transaction()`` groups several.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import attrs
from governed_memory.converter import structure, unstructure
from governed_memory.errors import MemoryStorageError, MemoryValidationError
from governed_memory.records import (
    MemoryRecord,
    MemoryType,
    MemoryVersion,
    RecordStatus,
    VersionOperation,
)
from governed_memory.scope_revisions import ScopeState, epoch_name

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS records (
    id TEXT PRIMARY KEY,
    scope_hash TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    user_id TEXT,
    mem0_id TEXT NOT NULL,
    key TEXT,
    status TEXT NOT NULL,
    memory_type TEXT NOT NULL,
    expires_at REAL,
    revision TEXT NOT NULL,
    body TEXT NOT NULL,
    stray INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS records_scope ON records (scope_hash, id);
CREATE INDEX IF NOT EXISTS records_user ON records (tenant_id, user_id);
CREATE INDEX IF NOT EXISTS records_mem0 ON records (mem0_id);
CREATE TABLE IF NOT EXISTS versions (
    record_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (record_id, version)
);
CREATE TABLE IF NOT EXISTS idempotency (
    scope_hash TEXT NOT NULL,
    operation TEXT NOT NULL,
    key TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    record_id TEXT NOT NULL,
    tenant_id TEXT NOT NULL,
    user_id TEXT,
    version INTEGER,
    revision TEXT,
    hard INTEGER NOT NULL DEFAULT 0,
    erased INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (scope_hash, operation, key)
);
CREATE INDEX IF NOT EXISTS idempotency_record ON idempotency (record_id);
CREATE INDEX IF NOT EXISTS idempotency_user ON idempotency (tenant_id, user_id);
CREATE TABLE IF NOT EXISTS namespaces (
    scope_hash TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    user_id TEXT,
    namespace TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS namespaces_user ON namespaces (tenant_id, user_id);
CREATE INDEX IF NOT EXISTS records_expiry ON records (scope_hash, expires_at)
    WHERE expires_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS records_expiring ON records (expires_at, id)
    WHERE expires_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS scope_revisions (
    name TEXT PRIMARY KEY,
    revision INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS scope_revision_insert AFTER INSERT ON records BEGIN
    INSERT INTO scope_revisions (name, revision) VALUES (NEW.scope_hash, 1)
    ON CONFLICT (name) DO UPDATE SET revision = revision + 1;
END;
CREATE TRIGGER IF NOT EXISTS scope_revision_update AFTER UPDATE ON records BEGIN
    INSERT INTO scope_revisions (name, revision) VALUES (NEW.scope_hash, 1)
    ON CONFLICT (name) DO UPDATE SET revision = revision + 1;
END;
CREATE TRIGGER IF NOT EXISTS scope_revision_delete AFTER DELETE ON records BEGIN
    INSERT INTO scope_revisions (name, revision) VALUES (OLD.scope_hash, 1)
    ON CONFLICT (name) DO UPDATE SET revision = revision + 1;
END;
CREATE TABLE IF NOT EXISTS intents (
    record_id TEXT PRIMARY KEY,
    scope_hash TEXT NOT NULL,
    namespace TEXT NOT NULL,
    operation TEXT NOT NULL,
    idempotency_key TEXT,
    fingerprint TEXT,
    body TEXT NOT NULL
);
"""


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def record_to_json(record: MemoryRecord) -> str:
    try:
        return dumps(unstructure(record))
    except (ValueError, TypeError):
        raise MemoryValidationError(
            "the record holds a value JSON cannot represent (a non-finite number?)",
            field="record") from None


def record_from_json(text: str) -> MemoryRecord:
    try:
        return structure(json.loads(text), MemoryRecord)
    except (ValueError, MemoryValidationError):
        raise MemoryStorageError("a ledger record could not be read") from None


@attrs.frozen(slots=True)
class LedgerRow:
    """A record as the ledger knows it; ``record.content`` is empty (Mem0 holds it)."""

    record: MemoryRecord
    mem0_id: str
    stray: bool = False
    """A write to this record timed out once, so Mem0 may hold a second copy of it;
    erasing the record then sweeps its namespace for copies."""


@attrs.frozen(slots=True)
class Screen:
    """The columns a search screens candidates on, without reading the record."""

    record_id: str
    scope_hash: str
    status: str
    memory_type: str
    expires_at: float | None


@attrs.frozen(slots=True)
class IdempotencyEntry:
    scope_hash: str
    operation: str
    key: str
    fingerprint: str
    record_id: str
    tenant_id: str
    user_id: str | None
    version: int | None = None
    revision: str | None = None
    hard: bool = False
    erased: bool = False


@attrs.frozen(slots=True)
class Intent:
    """A Mem0 write that was sent and whose outcome is not yet known."""

    record_id: str
    scope_hash: str
    namespace: str
    operation: str
    idempotency_key: str | None
    fingerprint: str | None
    record: MemoryRecord
    """The record the write would produce (content included, for the retry)."""


@attrs.frozen(slots=True)
class Namespace:
    scope_hash: str
    tenant_id: str
    user_id: str | None
    namespace: str


class Ledger:
    def __init__(self, path: str) -> None:
        self._path = path
        self._db: sqlite3.Connection | None = None
        self._lock = threading.RLock()
        self._depth = 0

    def open(self) -> None:
        if self._db is not None:
            return
        if self._path != ":memory:":
            Path(self._path).parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self._path, check_same_thread=False, isolation_level=None)
        if self._path != ":memory:":
            db.execute("PRAGMA journal_mode = WAL")
        # Erased text must not linger in freed pages of the file.
        db.execute("PRAGMA secure_delete = ON")
        db.executescript(_SCHEMA)
        self._db = db

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    @property
    def db(self) -> sqlite3.Connection:
        if self._db is None:
            raise MemoryStorageError("the Mem0 adapter's ledger is not open")
        return self._db

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """All-or-nothing for the ledger writes inside (nesting joins the outer one)."""
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            self.db.execute("BEGIN IMMEDIATE")
            self._depth = 1
            try:
                yield
            except BaseException:
                self._depth = 0
                self.db.execute("ROLLBACK")
                raise
            self._depth = 0
            self.db.execute("COMMIT")

    # -- scope revisions (governed_memory.scope_revisions) --------------------------

    def scope_state(self, tenant_id: str, scope_hashes: Sequence[str],
                    now: float) -> ScopeState:
        """The revisions the triggers on ``records`` keep (the ledger decides what a
        search may return, so a change Mem0 holds but the ledger has not committed is
        invisible anyway) and the earliest expiry after ``now`` in those scopes."""
        names = [*dict.fromkeys(scope_hashes), epoch_name(tenant_id)]
        marks = ", ".join("?" * len(names))
        with self._lock:
            stored = {str(name): int(revision) for name, revision in self.db.execute(
                f"SELECT name, revision FROM scope_revisions WHERE name IN ({marks})", names)}
            instants = [row[0] for scope_hash in names[:-1] for row in self.db.execute(
                "SELECT expires_at FROM records WHERE scope_hash = ? AND expires_at > ?"
                " ORDER BY expires_at LIMIT 1", (scope_hash, now))]
        return ScopeState(
            (*(stored.get(scope_hash, 0) for scope_hash in scope_hashes),
             stored.get(names[-1], 0)),
            min(instants) if instants else None)

    def advance_epoch(self, tenant_id: str, forget: Sequence[str]) -> None:
        """After a user's erasure: the tenant's epoch moves and the user's scope hashes
        are forgotten (safe together: every cached page is keyed by the epoch too)."""
        with self.transaction():
            self.db.executemany("DELETE FROM scope_revisions WHERE name = ?",
                                [(scope_hash,) for scope_hash in sorted(set(forget))])
            self.db.execute(
                "INSERT INTO scope_revisions (name, revision) VALUES (?, 1)"
                " ON CONFLICT (name) DO UPDATE SET revision = revision + 1",
                (epoch_name(tenant_id),))

    def settle_erasure(self) -> None:
        """Fold the write-ahead log into the file and truncate it: WAL frames written
        before an erasure still hold the erased rows until they are checkpointed."""
        if self._path != ":memory:":
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    # -- records ----------------------------------------------------------------

    def record(self, scope_hash: str, record_id: str) -> LedgerRow | None:
        row = self.db.execute(
            "SELECT body, mem0_id, stray FROM records WHERE id = ? AND scope_hash = ?",
            (record_id, scope_hash)).fetchone()
        return None if row is None else LedgerRow(record_from_json(row[0]), row[1], bool(row[2]))

    def record_anywhere(self, record_id: str) -> LedgerRow | None:
        """The record with that id in whatever scope holds it (erasing a user's records
        whose namespace row is missing); every read for a caller names the scope."""
        row = self.db.execute("SELECT body, mem0_id, stray FROM records WHERE id = ?",
                              (record_id,)).fetchone()
        return None if row is None else LedgerRow(record_from_json(row[0]), row[1], bool(row[2]))

    def record_by_key(self, scope_hash: str, key: str) -> LedgerRow | None:
        row = self.db.execute(
            "SELECT body, mem0_id, stray FROM records WHERE scope_hash = ? AND key = ? "
            "AND status != 'deleted' ORDER BY id LIMIT 1", (scope_hash, key)).fetchone()
        return None if row is None else LedgerRow(record_from_json(row[0]), row[1], bool(row[2]))

    def visible_page(self, scope_hash: str, after: str | None, limit: int,
                     types: Sequence[MemoryType], now: float) -> list[LedgerRow]:
        sql = ("SELECT body, mem0_id, stray FROM records WHERE scope_hash = ? AND status = ? "
               "AND (expires_at IS NULL OR expires_at > ?) AND id > ?")
        params: list[Any] = [scope_hash, RecordStatus.ACTIVE.value, now, after or ""]
        if types:
            sql += f" AND memory_type IN ({','.join('?' * len(types))})"
            params += [t.value for t in types]
        sql += " ORDER BY id LIMIT ?"
        params.append(limit)
        return [LedgerRow(record_from_json(b), m, bool(s))
                for b, m, s in self.db.execute(sql, params)]

    def scan(self, scope_hash: str, after: str | None, limit: int) -> list[LedgerRow]:
        rows = self.db.execute(
            "SELECT body, mem0_id, stray FROM records WHERE scope_hash = ? AND id > ? "
            "ORDER BY id LIMIT ?", (scope_hash, after or "", limit))
        return [LedgerRow(record_from_json(b), m, bool(s)) for b, m, s in rows]

    def expired(self, now: float, limit: int) -> list[LedgerRow]:
        """Up to ``limit`` records of any scope expired at ``now``, earliest expiry first
        (the store-wide purge; ``records_expiring`` serves it, and is created on the
        next open of a ledger written before it)."""
        rows = self.db.execute(
            "SELECT body, mem0_id, stray FROM records WHERE expires_at IS NOT NULL "
            "AND expires_at <= ? ORDER BY expires_at, id LIMIT ?", (now, limit))
        return [LedgerRow(record_from_json(b), m, bool(s)) for b, m, s in rows]

    def screen(self, mem0_ids: Sequence[str]) -> dict[str, Screen]:
        found: dict[str, Screen] = {}
        for start in range(0, len(mem0_ids), 500):
            chunk = list(mem0_ids[start:start + 500])
            rows = self.db.execute(
                "SELECT mem0_id, id, scope_hash, status, memory_type, expires_at FROM records "
                f"WHERE mem0_id IN ({','.join('?' * len(chunk))})", chunk)
            for mem0_id, record_id, scope_hash, status, memory_type, expires_at in rows:
                found[mem0_id] = Screen(record_id, scope_hash, status, memory_type, expires_at)
        return found

    def held_in_scope(self, scope_hash: str, now: float) -> tuple[int, int]:
        """``(held, hidden)``: records of the scope Mem0 holds (every one not deleted),
        and how many of them no read may show (pending review or expired)."""
        row = self.db.execute(
            "SELECT COUNT(*), COALESCE(SUM(status != 'active' OR (expires_at IS NOT NULL "
            "AND expires_at <= ?)), 0) FROM records WHERE scope_hash = ? "
            "AND status != 'deleted'", (now, scope_hash)).fetchone()
        return int(row[0]), int(row[1])

    def usage(self, tenant_id: str, scope_hash: str | None, now: float) -> tuple[int, int]:
        """``(records, bytes)`` for quotas: the tenant's (or one scope's) records that
        are neither deleted nor expired, pending ones included, and the UTF-8 bytes of
        their content. The text stays in Mem0; each record's current version snapshot
        here holds it, so the count never asks Mem0."""
        row = self.db.execute(
            "SELECT COUNT(*), COALESCE(SUM(LENGTH(CAST(json_extract(v.body, "
            "'$.record.content') AS BLOB))), 0) FROM records AS r JOIN versions AS v "
            "ON v.record_id = r.id AND v.version = json_extract(r.body, '$.version') "
            "WHERE r.tenant_id = ? AND (? IS NULL OR r.scope_hash = ?) "
            "AND r.status != 'deleted' AND (r.expires_at IS NULL OR r.expires_at > ?)",
            (tenant_id, scope_hash, scope_hash, now)).fetchone()
        return int(row[0]), int(row[1])

    def put_record(self, record: MemoryRecord, mem0_id: str, *, stray: bool = False) -> None:
        """Insert or replace the row; the text is left out (Mem0 holds it)."""
        body = record_to_json(attrs.evolve(record, content=""))
        self.db.execute(
            "INSERT INTO records (id, scope_hash, tenant_id, user_id, mem0_id, key, status, "
            "memory_type, expires_at, revision, body, stray) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
            "mem0_id = excluded.mem0_id, key = excluded.key, status = excluded.status, "
            "memory_type = excluded.memory_type, expires_at = excluded.expires_at, "
            "revision = excluded.revision, body = excluded.body, "
            "stray = MAX(records.stray, excluded.stray)",
            (record.id, record.scope_hash, record.scope.tenant_id, record.scope.user_id,
             mem0_id, record.key, record.status.value, record.memory_type.value,
             record.expires_at, record.revision, body, int(stray)))

    def user_record_ids(self, tenant_id: str, user_id: str) -> list[str]:
        return [r[0] for r in self.db.execute(
            "SELECT id FROM records WHERE tenant_id = ? AND user_id = ? ORDER BY id",
            (tenant_id, user_id))]

    def erase_record(self, record_id: str, *, tombstone_idempotency: bool) -> tuple[int, int]:
        """Remove the row and its versions; returns (versions removed, idempotency removed)."""
        versions = self.db.execute("DELETE FROM versions WHERE record_id = ?",
                                   (record_id,)).rowcount
        self.db.execute("DELETE FROM records WHERE id = ?", (record_id,))
        self.db.execute("DELETE FROM intents WHERE record_id = ?", (record_id,))
        if tombstone_idempotency:
            self.db.execute("UPDATE idempotency SET erased = 1 WHERE record_id = ?",
                            (record_id,))
            return versions, 0
        removed = self.db.execute("DELETE FROM idempotency WHERE record_id = ?",
                                  (record_id,)).rowcount
        return versions, removed

    # -- versions ---------------------------------------------------------------

    def append_version(self, version: MemoryVersion) -> None:
        body = dumps(unstructure(version))
        self.db.execute("INSERT INTO versions (record_id, version, body) VALUES (?, ?, ?)",
                        (version.record.id, version.record.version, body))

    def versions(self, record_id: str) -> list[MemoryVersion]:
        rows = self.db.execute("SELECT body FROM versions WHERE record_id = ? ORDER BY version",
                               (record_id,))
        return [_version_from_json(body) for (body,) in rows]

    def version(self, record_id: str, version: int) -> MemoryVersion | None:
        row = self.db.execute("SELECT body FROM versions WHERE record_id = ? AND version = ?",
                              (record_id, version)).fetchone()
        return None if row is None else _version_from_json(row[0])

    # -- idempotency ------------------------------------------------------------

    def idempotency(self, scope_hash: str, operation: str, key: str) -> IdempotencyEntry | None:
        row = self.db.execute(
            "SELECT fingerprint, record_id, tenant_id, user_id, version, revision, hard, erased "
            "FROM idempotency WHERE scope_hash = ? AND operation = ? AND key = ?",
            (scope_hash, operation, key)).fetchone()
        if row is None:
            return None
        return IdempotencyEntry(scope_hash, operation, key, row[0], row[1], row[2], row[3],
                                row[4], row[5], bool(row[6]), bool(row[7]))

    def put_idempotency(self, entry: IdempotencyEntry) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO idempotency (scope_hash, operation, key, fingerprint, "
            "record_id, tenant_id, user_id, version, revision, hard, erased) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (entry.scope_hash, entry.operation, entry.key, entry.fingerprint, entry.record_id,
             entry.tenant_id, entry.user_id, entry.version, entry.revision, int(entry.hard),
             int(entry.erased)))

    def erase_idempotency_of_scope(self, scope_hash: str) -> int:
        return self.db.execute("DELETE FROM idempotency WHERE scope_hash = ?",
                               (scope_hash,)).rowcount

    def erase_idempotency_of_user(self, tenant_id: str, user_id: str) -> int:
        return self.db.execute("DELETE FROM idempotency WHERE tenant_id = ? AND user_id = ?",
                               (tenant_id, user_id)).rowcount

    # -- namespaces -------------------------------------------------------------

    def remember_namespace(self, ns: Namespace) -> None:
        self.db.execute(
            "INSERT OR IGNORE INTO namespaces (scope_hash, tenant_id, user_id, namespace) "
            "VALUES (?, ?, ?, ?)", (ns.scope_hash, ns.tenant_id, ns.user_id, ns.namespace))

    def namespaces_of_user(self, tenant_id: str, user_id: str) -> list[Namespace]:
        rows = self.db.execute(
            "SELECT scope_hash, namespace FROM namespaces WHERE tenant_id = ? AND user_id = ? "
            "ORDER BY scope_hash", (tenant_id, user_id))
        return [Namespace(h, tenant_id, user_id, n) for h, n in rows]

    def forget_namespace(self, scope_hash: str) -> None:
        self.db.execute("DELETE FROM namespaces WHERE scope_hash = ?", (scope_hash,))

    # -- intents ----------------------------------------------------------------

    def put_intent(self, intent: Intent) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO intents (record_id, scope_hash, namespace, operation, "
            "idempotency_key, fingerprint, body) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (intent.record_id, intent.scope_hash, intent.namespace, intent.operation,
             intent.idempotency_key, intent.fingerprint, record_to_json(intent.record)))

    def intent_for_key(self, scope_hash: str, operation: str, key: str) -> Intent | None:
        row = self.db.execute(
            "SELECT record_id, namespace, fingerprint, body FROM intents WHERE scope_hash = ? "
            "AND operation = ? AND idempotency_key = ?", (scope_hash, operation, key)).fetchone()
        if row is None:
            return None
        return Intent(row[0], scope_hash, row[1], operation, key, row[2],
                      record_from_json(row[3]))

    def intent_of(self, record_id: str) -> Intent | None:
        """The unconfirmed write of ``record_id``, if there is one."""
        found = self._intents("WHERE record_id = ?", (record_id,))
        return found[0] if found else None

    def intents(self) -> list[Intent]:
        return self._intents("ORDER BY record_id", ())

    def _intents(self, where: str, params: tuple[Any, ...]) -> list[Intent]:
        rows = self.db.execute(
            "SELECT record_id, scope_hash, namespace, operation, idempotency_key, fingerprint, "
            f"body FROM intents {where}", params)
        return [Intent(r[0], r[1], r[2], r[3], r[4], r[5], record_from_json(r[6])) for r in rows]

    def drop_intent(self, record_id: str) -> None:
        self.db.execute("DELETE FROM intents WHERE record_id = ?", (record_id,))

    def intents_in_scope(self, scope_hash: str) -> list[str]:
        return [r[0] for r in self.db.execute(
            "SELECT record_id FROM intents WHERE scope_hash = ?", (scope_hash,))]


def _version_from_json(text: str) -> MemoryVersion:
    try:
        data = json.loads(text)
        return MemoryVersion(
            record=structure(data["record"], MemoryRecord),
            operation=VersionOperation(data["operation"]),
            recorded_at=float(data["recorded_at"]),
            operation_id=data.get("operation_id"),
        )
    except (ValueError, KeyError, TypeError, MemoryValidationError):
        raise MemoryStorageError("a ledger version could not be read") from None
