"""Records as JSON text: the storage form of version snapshots and detached copies.

Going through JSON (not ``copy``) guarantees that a value handed to a caller shares no
nested list or dict with storage, and that what the SQLite and in-memory backends keep
is the same thing.
"""

from __future__ import annotations

import json
from typing import Any

from governed_memory.converter import structure, unstructure
from governed_memory.errors import MemoryStorageError, MemoryValidationError
from governed_memory.records import MemoryRecord, MemoryVersion


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def record_to_json(record: MemoryRecord) -> str:
    """The record as JSON; refuses values JSON cannot carry (an infinite ``expires_at``).

    Every write serializes its record before touching storage, so this refusal doubles
    as a last validation step that leaves nothing half-written.
    """
    try:
        return dumps(unstructure(record))
    except (ValueError, TypeError):
        raise MemoryValidationError(
            "the record holds a value JSON cannot represent (a non-finite number?)",
            field="record",
        ) from None


def record_from_json(text: str) -> MemoryRecord:
    try:
        return structure(json.loads(text), MemoryRecord)
    except (ValueError, MemoryValidationError):
        raise MemoryStorageError("a stored record could not be read") from None


def detach(record: MemoryRecord) -> MemoryRecord:
    """A deep, independent copy of ``record``."""
    return record_from_json(record_to_json(record))


def detach_version(version: MemoryVersion) -> MemoryVersion:
    return MemoryVersion(
        record=detach(version.record),
        operation=version.operation,
        recorded_at=version.recorded_at,
        operation_id=version.operation_id,
    )
