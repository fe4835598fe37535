"""Records as JSON text (the storage form of version snapshots), and detached copies.

A record is frozen, and so is everything it holds (a scope, provenance, tuples,
strings, numbers) except what sits *inside* its metadata: the top-level mapping is a
read-only view, but a nested list or dict stays mutable. So a record handed to a
caller is shared as it is unless its metadata nests a container, and only then is the
metadata copied: a caller can never reach storage's state, and a get no longer pays a
JSON round trip of the whole record.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs
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
    """``record`` as a caller may hold it: nothing in it can change what storage keeps.

    Frozen values need no copy; metadata nesting a list or dict gets a private copy
    (``MemoryRecord`` deep-copies a plain mapping it is given)."""
    metadata = record.metadata
    if not any(isinstance(value, Mapping | list | tuple) for value in metadata.values()):
        return record
    return attrs.evolve(record, metadata=dict(metadata))


def detach_version(version: MemoryVersion) -> MemoryVersion:
    return MemoryVersion(
        record=detach(version.record),
        operation=version.operation,
        recorded_at=version.recorded_at,
        operation_id=version.operation_id,
    )
