"""The rows both SQL backends store the same way: the ``memory_records`` column layout
and the decoding of every other table.

SQLite and PostgreSQL give every record field a column (structured fields as JSON text),
so a round trip is exact and the mapping is the same on both; index jobs, vectors,
versions, outbox events and retrieval snapshots are kept in tables of one shape too, and
both drivers hand rows back addressable by column name. The mapping (and what a corrupted
row turns into) therefore lives here once, so the two backends cannot drift apart in what
they accept; the dialects keep only their SQL and the few columns they encode differently
(PostgreSQL stores free-form text as UTF-8 ``bytea``), which they supply as an
encode/decode pair or pass in already decoded. Rows are rebuilt through the strict
converter, so a corrupted row becomes a storage error instead of a half-valid record.
"""

from __future__ import annotations

import functools
import json
import types
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from governed_memory.converter import structure
from governed_memory.embedding import EmbedderIdentity
from governed_memory.errors import MemoryStorageError, MemoryValidationError
from governed_memory.events import MemoryEvent
from governed_memory.indexing import IndexJob, JobAction, JobState
from governed_memory.records import (
    IndexState,
    MemoryRecord,
    MemoryType,
    MemoryVersion,
    Provenance,
    RecordStatus,
    VersionOperation,
    Visibility,
    json_copy,
)
from governed_memory.scope import Scope

from governed_memory_native.storage.copies import dumps, record_from_json
from governed_memory_native.storage.values import IdempotencyEntry, Removal, StoredVector

RECORD_COLUMNS: Final = (
    "id", "scope_hash", "tenant_id", "user_id", "scope", "record_key", "content",
    "memory_type", "status", "version", "revision", "content_hash", "metadata",
    "provenance", "visibility", "importance", "entity_ids", "valid_from", "invalid_at",
    "supersedes", "superseded_by", "expires_at", "created_at", "updated_at", "index_state",
    "occurred_at",
)
JSON_COLUMNS: Final = frozenset({"scope", "metadata", "provenance", "entity_ids"})
TEXT_COLUMNS: Final = frozenset({"content", "record_key"})
"""Free-form strings the API lets hold anything, stored as the dialect's encoding says."""
SELECT_RECORD: Final = ", ".join(f"r.{name}" for name in RECORD_COLUMNS)


def _same(value: Any) -> Any:
    return value


def record_params(record: MemoryRecord,
                  encode_text: Callable[[str | None], Any] = _same) -> dict[str, Any]:
    """Named parameters for every record column: a write's hot path, so each field is
    read directly rather than through the converter's generic unstructuring."""
    scope = record.scope
    metadata = record.metadata
    return {
        "id": record.id, "scope_hash": record.scope_hash, "tenant_id": scope.tenant_id,
        "user_id": scope.user_id, "scope": _scope_json(scope),
        "record_key": encode_text(record.key), "content": encode_text(record.content),
        "memory_type": record.memory_type.value, "status": record.status.value,
        "version": record.version, "revision": record.revision,
        "content_hash": record.content_hash,
        "metadata": dumps(json_copy(metadata)) if metadata else "{}",
        "provenance": dumps(record.provenance.as_dict()),
        "visibility": record.visibility.value, "importance": record.importance,
        "entity_ids": dumps(list(record.entity_ids)), "valid_from": record.valid_from,
        "invalid_at": record.invalid_at, "supersedes": record.supersedes,
        "superseded_by": record.superseded_by, "expires_at": record.expires_at,
        "created_at": record.created_at, "updated_at": record.updated_at,
        "index_state": record.index_state.value, "occurred_at": record.occurred_at,
    }


@functools.lru_cache(maxsize=4096)
def _scope_json(scope: Scope) -> str:
    return dumps(scope.dimensions())


@functools.lru_cache(maxsize=4096)
def _scope(text: str) -> Scope:
    """A stored scope, decoded once per distinct value: a store holds few scopes and
    each read would otherwise validate and hash the same dimensions again."""
    return Scope.from_dimensions(json.loads(text))


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("expected a string")
    return value


def _optional_text(value: Any) -> str | None:
    return None if value is None else _text(value)


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError("expected a number")
    return float(value)


def _optional_number(value: Any) -> float | None:
    return None if value is None else _number(value)


def _provenance(text: Any) -> Provenance:
    fields = json.loads(text)
    if not isinstance(fields, dict) or not all(
            value is None or isinstance(value, str) for value in fields.values()):
        raise TypeError("provenance holds string fields only")
    return Provenance(**fields)  # an unknown field is a TypeError


def _entity_ids(text: Any) -> tuple[str, ...]:
    ids = json.loads(text)
    if not isinstance(ids, list) or not all(isinstance(item, str) for item in ids):
        raise TypeError("entity ids are an array of strings")
    return tuple(ids)


def record_from_row(row: Any, decode_text: Callable[[Any], Any] = _same) -> MemoryRecord:
    """The record a row holds, as strictly as the converter would rebuild it (every
    type checked, unknown values refused), without its generic machinery: a read's
    hot path decodes one record per get and up to a hundred per page."""
    try:
        scope = row["scope"]
        version = row["version"]
        if isinstance(version, bool) or not isinstance(version, int):
            raise TypeError("version is an integer")
        metadata = json.loads(row["metadata"])
        if not isinstance(metadata, dict):
            raise TypeError("metadata is an object")
        return MemoryRecord(
            id=_text(row["id"]),
            scope=_scope(scope) if isinstance(scope, str) else structure(scope, Scope),
            scope_hash=_text(row["scope_hash"]),
            content=_text(decode_text(row["content"])),
            memory_type=MemoryType(row["memory_type"]),
            version=version,
            revision=_text(row["revision"]),
            content_hash=_text(row["content_hash"]),
            status=RecordStatus(row["status"]),
            created_at=_number(row["created_at"]),
            updated_at=_number(row["updated_at"]),
            key=_optional_text(decode_text(row["record_key"])),
            # Freshly parsed, so already private: no second deep copy on the way in.
            metadata=types.MappingProxyType(metadata),
            provenance=_provenance(row["provenance"]),
            visibility=Visibility(row["visibility"]),
            importance=_number(row["importance"]),
            entity_ids=_entity_ids(row["entity_ids"]),
            valid_from=_optional_number(row["valid_from"]),
            invalid_at=_optional_number(row["invalid_at"]),
            supersedes=_optional_text(row["supersedes"]),
            superseded_by=_optional_text(row["superseded_by"]),
            expires_at=_optional_number(row["expires_at"]),
            index_state=IndexState(row["index_state"]),
            occurred_at=_optional_number(row["occurred_at"]),
        )
    except (ValueError, KeyError, IndexError, TypeError, MemoryValidationError):
        raise MemoryStorageError("a stored record could not be read") from None

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
