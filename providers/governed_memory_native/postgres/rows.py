"""Mapping between ``memory_records`` rows and ``MemoryRecord`` values on PostgreSQL.

Every record field has a column, so a round trip is exact. Structured fields are JSON
*text* (not ``jsonb``, which would reorder keys and turn ``1e300`` into an integer on the
way back); filters cast them to ``json`` where needed. ``content`` and ``record_key`` are
UTF-8 ``bytea``: the API allows any string there, and PostgreSQL ``text`` cannot hold
U+0000. Rows are rebuilt through the strict converter, so a corrupted row becomes a
storage error instead of a half-valid record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from governed_memory.records import MemoryRecord

from governed_memory_native.sql import rows as shared_rows
from governed_memory_native.sql.rows import RECORD_COLUMNS, SELECT_RECORD

__all__ = ["RECORD_COLUMNS", "SELECT_RECORD", "decode_text", "encode_text",
           "record_from_row", "record_params"]


def encode_text(value: str | None) -> bytes | None:
    return None if value is None else value.encode("utf-8")


def decode_text(value: bytes | memoryview | None) -> str | None:
    return None if value is None else bytes(value).decode("utf-8")


def record_params(record: MemoryRecord) -> dict[str, Any]:
    """Named parameters for every record column, free-form text as UTF-8 bytes."""
    return shared_rows.record_params(record, encode_text)


def record_from_row(row: Mapping[str, Any]) -> MemoryRecord:
    return shared_rows.record_from_row(row, decode_text)
