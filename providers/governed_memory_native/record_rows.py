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
from collections.abc import Callable
from typing import Any, Final

from governed_memory.converter import structure, unstructure
from governed_memory.errors import MemoryStorageError, MemoryValidationError
from governed_memory.records import MemoryRecord
from governed_memory.scope import Scope

from governed_memory_native.snapshots import dumps

RECORD_COLUMNS: Final = (
    "id", "scope_hash", "tenant_id", "user_id", "scope", "record_key", "content",
    "memory_type", "status", "version", "revision", "content_hash", "metadata",
    "provenance", "visibility", "importance", "entity_ids", "valid_from", "invalid_at",
    "supersedes", "superseded_by", "expires_at", "created_at", "updated_at", "index_state",
)
JSON_COLUMNS: Final = frozenset({"scope", "metadata", "provenance", "entity_ids"})
TEXT_COLUMNS: Final = frozenset({"content", "record_key"})
"""Free-form strings the API lets hold anything, stored as the dialect's encoding says."""
SELECT_RECORD: Final = ", ".join(f"r.{name}" for name in RECORD_COLUMNS)


def _same(value: Any) -> Any:
    return value


def record_params(record: MemoryRecord,
                  encode_text: Callable[[str | None], Any] = _same) -> dict[str, Any]:
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
        elif column in JSON_COLUMNS:
            params[column] = dumps(data[column])
        else:
            params[column] = data[column]
    return params


@functools.lru_cache(maxsize=4096)
def _scope(text: str) -> Scope:
    """A stored scope, decoded once per distinct value: a store holds few scopes and
    each read would otherwise validate and hash the same dimensions again."""
    return Scope.from_dimensions(json.loads(text))


def record_from_row(row: Any, decode_text: Callable[[Any], Any] = _same) -> MemoryRecord:
    data: dict[str, Any] = {}
    try:
        for column in RECORD_COLUMNS:
            if column in ("tenant_id", "user_id"):
                continue
            value = row[column]
            name = "key" if column == "record_key" else column
            if column == "scope" and isinstance(value, str):
                value = _scope(value)
            elif column in JSON_COLUMNS:
                value = json.loads(value)
            elif column in TEXT_COLUMNS:
                value = decode_text(value)
            data[name] = value
        return structure(data, MemoryRecord)
    except (ValueError, KeyError, IndexError, TypeError, MemoryValidationError):
        raise MemoryStorageError("a stored record could not be read") from None
