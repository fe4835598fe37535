"""Comparisons and probes on records that several areas share."""

from __future__ import annotations

import contextlib
from typing import Any, Final

import attrs
from governed_memory.records import MemoryRecord

IGNORED: Final = frozenset({"index_state"})
"""Fields a provider may legitimately change between two reads of one version
(asynchronous indexing moves ``index_state`` on its own)."""


def record_fields(record: MemoryRecord) -> dict[str, Any]:
    """Every stored field of ``record`` in plain form, for readable diffs."""
    values = {field.name: getattr(record, field.name) for field in attrs.fields(MemoryRecord)
              if field.name not in IGNORED}
    values["metadata"] = _plain(values["metadata"])
    values["scope"] = record.scope.dimensions()
    return values


def assert_same_record(actual: MemoryRecord, expected: MemoryRecord, what: str) -> None:
    assert_fields(actual, record_fields(expected), what)


def assert_fields(actual: MemoryRecord, right: dict[str, Any], what: str) -> None:
    """``actual`` holds exactly the fields of a snapshot taken with :func:`record_fields`."""
    left = record_fields(actual)
    differing = sorted(name for name in left if left[name] != right[name])
    assert not differing, (
        f"{what}: fields differ: "
        + "; ".join(f"{name}: {left[name]!r} != {right[name]!r}" for name in differing)
    )


def _plain(value: Any) -> Any:
    if hasattr(value, "items"):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def vandalize(record: MemoryRecord) -> None:
    """Try every way a caller could change a record it was handed.

    A provider that returns its stored objects (or shares nested lists with them) lets
    these changes reach storage; one that returns detached copies does not care.
    Immutable values refuse the change, which is just as good.
    """
    metadata = record.metadata
    for value in list(metadata.values()):
        if isinstance(value, list):
            value.append("vandalized")
        elif isinstance(value, dict):
            value["vandalized"] = True
    with contextlib.suppress(TypeError):
        metadata["vandalized"] = True  # type: ignore[index]
    for name, value in (("content", "vandalized"), ("version", 999), ("revision", "r-vandal"),
                        ("entity_ids", ("vandal",))):
        with contextlib.suppress(AttributeError, TypeError):
            object.__setattr__(record, name, value)
