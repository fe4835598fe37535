"""Mapping between ``memory_records`` rows and ``MemoryRecord`` values.

Every record field has a column (structured ones as JSON text), so a round trip is
exact; rows are rebuilt through the strict converter, which turns a corrupted row
into a storage error instead of a half-valid record.
"""

from __future__ import annotations

import json
import sqlite3
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
SELECT_RECORD: Final = ", ".join(f"r.{name}" for name in RECORD_COLUMNS)


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
            params[column] = record.key
        elif column in _JSON_COLUMNS:
            params[column] = dumps(data[column])
        else:
            params[column] = data[column]
    return params


def record_from_row(row: sqlite3.Row) -> MemoryRecord:
    data: dict[str, Any] = {}
    try:
        for column in RECORD_COLUMNS:
            if column in ("tenant_id", "user_id"):
                continue
            value = row[column]
            name = "key" if column == "record_key" else column
            data[name] = json.loads(value) if column in _JSON_COLUMNS else value
        return structure(data, MemoryRecord)
    except (ValueError, KeyError, IndexError, MemoryValidationError):
        raise MemoryStorageError("a stored record could not be read") from None
