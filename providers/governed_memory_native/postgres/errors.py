"""Turning psycopg exceptions into governed-memory errors that leak nothing.

PostgreSQL messages quote SQL, constraint names, host names and sometimes values; callers
get a fixed, safe message and an error class that says what to do (retry later, fix the
config, report), while the original goes to the debug log for whoever runs the database.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from governed_memory.errors import (
    GovernedMemoryError,
    MemoryConfigurationError,
    MemoryConflictError,
    MemoryStorageError,
    MemoryUnavailableError,
)
from psycopg import errors as pg_errors
from psycopg_pool import PoolTimeout

logger = logging.getLogger("governed_memory_native.postgres")

LIVE_KEY_INDEX = "memory_records_live_key"
STALE_REVISION = "GM409"
"""The SQLSTATE of ``compare_and_set_applied`` (schema v12): a queued compare-and-set
found the record no longer at the revision the unit read."""


def translate(exc: Exception, action: str) -> GovernedMemoryError:
    if isinstance(exc, pg_errors.UniqueViolation) and (
        exc.diag.constraint_name == LIVE_KEY_INDEX
    ):
        return MemoryConflictError("the key is already used by a record in this scope")
    if isinstance(exc, psycopg.Error) and exc.sqlstate == STALE_REVISION:
        return MemoryConflictError("the record changed concurrently; re-read and retry")
    if isinstance(exc, PoolTimeout):
        return MemoryUnavailableError(f"postgres {action}: no connection available in time")
    if isinstance(exc, pg_errors.InvalidPassword | pg_errors.InvalidAuthorizationSpecification
                  | pg_errors.InvalidCatalogName):
        return MemoryConfigurationError(f"dsn: postgres {action} refused the connection")
    if isinstance(exc, pg_errors.InsufficientPrivilege):
        return MemoryConfigurationError(f"postgres {action}: the role lacks a privilege")
    if isinstance(exc, pg_errors.QueryCanceled | pg_errors.LockNotAvailable
                  | pg_errors.SerializationFailure | pg_errors.DeadlockDetected
                  | pg_errors.AdminShutdown | pg_errors.CannotConnectNow
                  | pg_errors.TooManyConnections):
        return MemoryUnavailableError(f"postgres {action} was interrupted; retry later")
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return MemoryUnavailableError(f"postgres {action}: the database is unreachable")
    if isinstance(exc, pg_errors.CharacterNotInRepertoire | pg_errors.UntranslatableCharacter):
        return MemoryStorageError(f"postgres {action}: text PostgreSQL cannot store")
    return MemoryStorageError(f"postgres {action} failed")


@contextmanager
def translated(action: str) -> Iterator[None]:
    try:
        yield
    except (psycopg.Error, PoolTimeout) as exc:
        logger.debug("postgres %s failed", action, exc_info=True)
        raise translate(exc, action) from None
