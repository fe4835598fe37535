"""Turning sqlite3 exceptions into governed-memory errors that leak nothing.

SQLite messages can quote SQL, constraint names or file paths; callers get a fixed,
safe message and an error class that says what to do (retry later, fix config, report),
while the original goes to the debug log for whoever operates the datastore.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from governed_memory.errors import (
    GovernedMemoryError,
    MemoryConfigurationError,
    MemoryConflictError,
    MemoryStorageError,
    MemoryUnavailableError,
)

logger = logging.getLogger("governed_memory_native.sqlite")

_BUSY: Final = 5
_LOCKED: Final = 6
_NOT_A_DATABASE: Final = 26


def translate(exc: sqlite3.Error, action: str) -> GovernedMemoryError:
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    if primary in (_BUSY, _LOCKED):
        return MemoryUnavailableError(f"sqlite {action} timed out waiting for a lock")
    if primary == _NOT_A_DATABASE:
        return MemoryConfigurationError("path: the file is not a SQLite database")
    if isinstance(exc, sqlite3.IntegrityError) and "record_key" in str(exc):
        return MemoryConflictError("the key is already used by a record in this scope")
    return MemoryStorageError(f"sqlite {action} failed")


@contextmanager
def translated(action: str) -> Iterator[None]:
    try:
        yield
    except sqlite3.Error as exc:
        logger.debug("sqlite %s failed", action, exc_info=True)
        raise translate(exc, action) from None
