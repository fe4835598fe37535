"""The errors the service adds to the library's tree: what only HTTP can go wrong.

Each keeps a stable ``code`` like the library's, so a problem document names it and the
remote client raises the same class on its side.
"""

from __future__ import annotations

from governed_memory.errors import (
    GovernedMemoryError,
    MemoryConflictError,
    MemoryValidationError,
)

__all__ = ["AuthenticationError", "PayloadTooLargeError", "PreconditionFailedError"]


class AuthenticationError(GovernedMemoryError):
    """No credentials, or credentials that do not verify (HTTP 401).

    One class and one message for every cause (unknown key, revoked key, wrong secret,
    bad signature, expired token) so a caller learns nothing about which keys exist.
    """

    code = "unauthenticated"

    def __init__(self, message: str = "valid credentials are required", *,
                 credentials_given: bool = False) -> None:
        super().__init__(message)
        self.credentials_given = credentials_given


class PreconditionFailedError(MemoryConflictError):
    """``If-Match`` named a revision that is no longer the record's (HTTP 412).

    A subclass of the library's conflict, because that is what it is: code that
    catches ``MemoryConflictError`` around a compare-and-set keeps working remotely.
    """

    code = "precondition_failed"


class PayloadTooLargeError(MemoryValidationError):
    """The request body passed the service's byte limit (HTTP 413); nothing was read
    past the limit and nothing was written."""

    code = "payload_too_large"

    def __init__(self, limit: int | None, message: str | None = None) -> None:
        super().__init__(message or f"the request body exceeds {limit} bytes", field="body")
        self.limit = limit
        """The server's limit in bytes (``None`` where the client only has the message)."""
