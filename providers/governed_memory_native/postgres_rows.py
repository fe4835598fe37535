"""Mapping between ``memory_records`` rows and ``MemoryRecord`` values on PostgreSQL.

Every record field has a column, so a round trip is exact. Structured fields are JSON
*text* (not ``jsonb``, which would reorder keys and turn ``1e300`` into an integer on the
way back); filters cast them to ``json`` where needed. ``content`` and ``record_key`` are
UTF-8 ``bytea``: the API allows any string there, and PostgreSQL ``text`` cannot hold
U+0000. Rows are rebuilt through the strict converter, so a corrupted row becomes a
storage error instead of a half-valid record.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from governed_memory.converter import structure, unstructure
from governed_memory.errors import MemoryStorageError, MemoryValidationError
from governed_memory.records import MemoryRecord

from governed_memory_native.snapshots import dumps

RECORD_COLUMNS: Final = (
    "id", "scope_hash", "tenant_id", "user_id", "scope", "record_key", "content",
    "memory_type", "status", "version", "revision", "content_hash", "metadata",
    "provenance", "visibility", "importance", "entity_ids", "valid_from", "invalid_at",
    "supersedes", "superseded_by", "expires_at", "created_at", "updated_at", "index_state",
)
_JSON_COLUMNS: Final = frozenset({"scope", "metadata", "provenance", "entity_ids"})
_BYTES_COLUMNS: Final = frozenset({"content", "record_key"})
SELECT_RECORD: Final = ", ".join(f"r.{name}" for name in RECORD_COLUMNS)


def encode_text(value: str | None) -> bytes | None:
    return None if value is None else value.encode("utf-8")


def decode_text(value: bytes | memoryview | None) -> str | None:
    return None if value is None else bytes(value).decode("utf-8")


def record_params(record: MemoryRecord) -> dict[str, Any]:
    """Named parameters for every record column."""
    data = unstructure(record)
    params: dict[str, Any] = {}
    for column in RECORD_COLUMNS:
        if column == "tenant_id":
            params[column] = record.scope.tenant_id
        elif column == "user_id":
            params[column] = record.scope.user_id
        elif column == "record_key":
            params[column] = encode_text(record.key)
        elif column == "content":
            params[column] = encode_text(record.content)
        elif column in _JSON_COLUMNS:
            params[column] = dumps(data[column])
        else:
            params[column] = data[column]
    return params


def record_from_row(row: Mapping[str, Any]) -> MemoryRecord:
    data: dict[str, Any] = {}
    try:
        for column in RECORD_COLUMNS:
            if column in ("tenant_id", "user_id"):
                continue
            value = row[column]
            name = "key" if column == "record_key" else column
            if column in _JSON_COLUMNS:
                value = json.loads(value)
            elif column in _BYTES_COLUMNS:
                value = decode_text(value)
            data[name] = value
        return structure(data, MemoryRecord)
    except (ValueError, KeyError, IndexError, TypeError, MemoryValidationError):
        raise MemoryStorageError("a stored record could not be read") from None
