"""Decoding of the rows both SQL backends store the same way.

SQLite and PostgreSQL keep index jobs, vectors, versions, outbox events and retrieval
snapshots in tables of one shape, and both drivers hand rows back addressable by column
name. The decoding (and what a corrupted row turns into) therefore lives here once, so the
two backends cannot drift apart in what they accept; the dialects keep only their SQL and
the few columns they encode differently (PostgreSQL stores free-form text as ``bytea``),
which they pass in already decoded.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from governed_memory.converter import structure
from governed_memory.embedding import EmbedderIdentity
from governed_memory.errors import MemoryStorageError, MemoryValidationError
from governed_memory.events import MemoryEvent
from governed_memory.indexing import IndexJob, JobAction, JobState
from governed_memory.records import MemoryVersion, VersionOperation

from governed_memory_native.record_copies import record_from_json
from governed_memory_native.storage_values import IdempotencyEntry, Removal, StoredVector

JOB_FIELDS: Final = ("job_id", "record_id", "scope_hash", "version", "action", "state",
                     "attempts", "next_attempt_at", "created_at", "lease_owner",
                     "lease_expires_at", "last_error_code")
JOB_COLUMNS: Final = ", ".join(JOB_FIELDS)
VECTOR_COLUMNS: Final = "record_id, scope_hash, version, content_hash, vector, created_at"
VERSION_COLUMNS: Final = "operation, recorded_at, operation_id, snapshot"
IDEMPOTENCY_COLUMNS: Final = ("scope_hash, operation, idem_key, fingerprint, record_id,"
                              " tenant_id, user_id, version, revision, hard, erased,"
                              " created_at")
PROGRESS_COLUMNS: Final = ("records, versions, index_entries, idempotency_entries,"
                           " scope_hashes, started_at")


def job_value(job: IndexJob, name: str) -> Any:
    value = getattr(job, name)
    return value.value if isinstance(value, JobAction | JobState) else value


def job_from_row(row: Any) -> IndexJob:
    try:
        return IndexJob(
            job_id=row["job_id"], record_id=row["record_id"], scope_hash=row["scope_hash"],
            version=int(row["version"]), action=JobAction(row["action"]),
            state=JobState(row["state"]), attempts=int(row["attempts"]),
            next_attempt_at=float(row["next_attempt_at"]),
            created_at=float(row["created_at"]), lease_owner=row["lease_owner"],
            lease_expires_at=row["lease_expires_at"], last_error_code=row["last_error_code"],
        )
    except (ValueError, KeyError, TypeError):
        raise MemoryStorageError("a stored index job could not be read") from None


def vector_from_row(row: Any, identity: EmbedderIdentity) -> StoredVector:
    """A row of :data:`VECTOR_COLUMNS`; ``identity`` is the one the lookup asked for."""
    return StoredVector(record_id=row["record_id"], scope_hash=row["scope_hash"],
                        version=int(row["version"]), content_hash=row["content_hash"],
                        identity=identity, vector=bytes(row["vector"]),
                        created_at=float(row["created_at"]))


def event_from_json(text: str) -> MemoryEvent:
    try:
        return structure(json.loads(text), MemoryEvent)
    except (ValueError, MemoryValidationError):
        raise MemoryStorageError("a stored outbox event could not be read") from None


def version_from_row(row: Any, operation_id: str | None) -> MemoryVersion:
    """A row of :data:`VERSION_COLUMNS`; ``operation_id`` comes decoded by the dialect."""
    try:
        operation = structure(row["operation"], VersionOperation)
    except MemoryValidationError:
        raise MemoryStorageError("a stored version could not be read") from None
    return MemoryVersion(
        record=record_from_json(row["snapshot"]),
        operation=operation,
        recorded_at=float(row["recorded_at"]),
        operation_id=operation_id,
    )


def snapshot_body(text: str) -> Mapping[str, Any]:
    try:
        body = json.loads(text)
    except ValueError:
        raise MemoryStorageError("a stored retrieval snapshot could not be read") from None
    if not isinstance(body, dict):
        raise MemoryStorageError("a stored retrieval snapshot could not be read")
    return body


def idempotency_from_row(row: Any, key: str) -> IdempotencyEntry:
    """A row of :data:`IDEMPOTENCY_COLUMNS`; ``key`` comes decoded by the dialect."""
    return IdempotencyEntry(
        scope_hash=row["scope_hash"], operation=row["operation"], key=key,
        fingerprint=row["fingerprint"], record_id=row["record_id"],
        tenant_id=row["tenant_id"], user_id=row["user_id"], created_at=row["created_at"],
        version=row["version"], revision=row["revision"], hard=bool(row["hard"]),
        erased=bool(row["erased"]),
    )


def progress_from_row(row: Any, scope_hashes: Iterable[Any]) -> tuple[Removal, float]:
    """A row of :data:`PROGRESS_COLUMNS`; ``scope_hashes`` comes decoded by the dialect
    (a JSON list on SQLite, an array on PostgreSQL)."""
    return Removal(records=int(row["records"]), versions=int(row["versions"]),
                   index_entries=int(row["index_entries"]),
                   idempotency_entries=int(row["idempotency_entries"]),
                   scope_hashes=frozenset(str(h) for h in scope_hashes),
                   ), float(row["started_at"])
