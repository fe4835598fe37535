"""The ``memory_records`` column layout and row mapping both SQL backends share.

SQLite and PostgreSQL give every record field a column (structured fields as JSON text),
so a round trip is exact and the mapping is the same on both; only how free-form text
columns are stored differs (PostgreSQL keeps them as UTF-8 ``bytea``), which each
dialect supplies as an encode/decode pair. Rows are rebuilt through the strict
converter, so a corrupted row becomes a storage error instead of a half-valid record.
"""

from __future__ import annotations

import functools
import json
import types
from collections.abc import Callable
from typing import Any, Final

from governed_memory.converter import structure
from governed_memory.errors import MemoryStorageError, MemoryValidationError
from governed_memory.records import (
    IndexState,
    MemoryRecord,
    MemoryType,
    Provenance,
    RecordStatus,
    Visibility,
    json_copy,
)
from governed_memory.scope import Scope

from governed_memory_native.record_copies import dumps

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
