"""Mapping between ``memory_records`` rows and ``MemoryRecord`` values on SQLite.

SQLite stores any string as ``TEXT`` (U+0000 included), so free-form text needs no
encoding and the shared mapping in :mod:`sql.rows` applies as is.
"""

from __future__ import annotations

import sqlite3

from governed_memory.records import MemoryRecord

from governed_memory_native.sql import rows as shared_rows
from governed_memory_native.sql.rows import RECORD_COLUMNS, SELECT_RECORD, record_params

__all__ = ["RECORD_COLUMNS", "SELECT_RECORD", "record_from_row", "record_params"]


def record_from_row(row: sqlite3.Row) -> MemoryRecord:
    return shared_rows.record_from_row(row)
