"""Write checks every provider makes the same way, offered to provider authors.

Providers never import each other, yet each one must refuse a reused idempotency key, a
stale ``expected_revision`` and a write to a missing record with the same typed errors
and the same words, or a caller would see different failures for the same mistake
depending on the backend. These helpers are that one wording.
"""

from __future__ import annotations

from typing import Any, NoReturn, Protocol

from governed_memory.context import OperationContext
from governed_memory.errors import (
    MemoryConflictError,
    MemoryNotFoundError,
    MemoryValidationError,
)
from governed_memory.records import MemoryRecord
from governed_memory.request import Request

__all__ = [
    "StoredFingerprint",
    "check_fingerprint",
    "check_revision",
    "idempotency_fingerprint",
    "raise_missing",
]


class StoredFingerprint(Protocol):
    """A provider's stored idempotency entry: only its fingerprint is compared."""

    @property
    def fingerprint(self) -> str: ...


def idempotency_fingerprint(ctx: OperationContext, request: Request[Any]) -> str:
    """The idempotency fingerprint, or a validation error if it cannot be computed.

    The context's fingerprint wins when the manager set one: it hashes the request as
    the caller sent it, before a policy transformed it (a TTL stamped from the clock),
    so a retry still matches its first attempt. ``validate()`` lets an infinite time
    through, which canonical JSON refuses.
    """
    try:
        return ctx.fingerprint_of(request)
    except ValueError:
        raise MemoryValidationError(
            "the request holds a value JSON cannot represent (a non-finite number?)",
            field="idempotency_key",
        ) from None


def check_fingerprint(entry: StoredFingerprint, fingerprint: str) -> None:
    """Refuse a reused idempotency key whose request differs from the first one."""
    if entry.fingerprint != fingerprint:
        raise MemoryConflictError("the idempotency key was already used for a different request")


def check_revision(current: MemoryRecord, expected: str | None) -> None:
    """Refuse a write whose ``expected_revision`` is no longer the record's revision."""
    if expected is not None and current.revision != expected:
        raise MemoryConflictError("expected_revision is stale; re-read and retry")


def raise_missing(expected_revision: str | None) -> NoReturn:
    """The error for a write to a deleted or missing record: a conflict when the caller
    expected a revision (it saw the record once), else not-found."""
    if expected_revision is not None:
        raise MemoryConflictError("expected_revision refers to a deleted or missing record")
    raise MemoryNotFoundError("no live record with that id in this scope")
