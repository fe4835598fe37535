"""Mem0 and Platform failures mapped onto the governed error tree.

Mem0's exceptions carry the request URL (so the host), the server's response text and
sometimes the payload; none of that may reach a caller, an event or a log line of ours.
Every translated error therefore gets a fixed message of our own and drops its cause
(``from None``), keeping only the classification.
"""

from __future__ import annotations

from typing import Final

from governed_memory.errors import (
    GovernedMemoryError,
    MemoryConfigurationError,
    MemoryStorageError,
    MemoryUnavailableError,
    MemoryValidationError,
)

UNCERTAIN_STATUSES: Final = frozenset({408, 500, 502, 503, 504})
"""Statuses after which a write may or may not have been applied."""


def status_of(exc: BaseException) -> int | None:
    """The HTTP status a mem0 client exception came from, if any."""
    code = getattr(exc, "error_code", None)
    if isinstance(code, str) and code.startswith("HTTP_"):
        try:
            return int(code.removeprefix("HTTP_"))
        except ValueError:
            return None
    return None


def is_not_found(exc: BaseException) -> bool:
    return type(exc).__name__ == "MemoryNotFoundError" or status_of(exc) == 404


def outcome_unknown(exc: BaseException) -> bool:
    """Whether a write that raised this may still have happened (and must be reconciled,
    never replayed blindly)."""
    if isinstance(exc, GovernedMemoryError):
        return isinstance(exc, MemoryUnavailableError)
    status = status_of(exc)
    if status is not None:
        return status in UNCERTAIN_STATUSES
    # A network error, a timeout, or a local failure half-way through Mem0's own steps
    # (vector store written, history not): all may have left something behind.
    return not _is_refusal(exc)


def _is_refusal(exc: BaseException) -> bool:
    name = type(exc).__name__
    status = status_of(exc)
    return (name in ("ValidationError", "AuthenticationError", "RateLimitError",
                     "MemoryQuotaExceededError", "Mem0ValidationError")
            or (status is not None and 400 <= status < 500 and status != 408))


def translate(exc: BaseException) -> GovernedMemoryError:
    """A governed error for a Mem0 failure, with no Mem0 detail in it."""
    if isinstance(exc, GovernedMemoryError):
        return exc
    name = type(exc).__name__
    status = status_of(exc)
    if name == "AuthenticationError" or status in (401, 403):
        return MemoryConfigurationError("Mem0 refused the adapter's credentials")
    if name == "RateLimitError" or status == 429:
        return MemoryUnavailableError("Mem0 is rate limiting requests; retry later")
    if name == "MemoryQuotaExceededError" or status == 413:
        return MemoryStorageError("Mem0 refused the write: quota or size limit reached")
    if name in ("ValidationError", "Mem0ValidationError") or status in (400, 409, 422):
        return MemoryValidationError("Mem0 refused the request as invalid")
    if name == "NetworkError" or status in UNCERTAIN_STATUSES or "Timeout" in name:
        return MemoryUnavailableError("Mem0 could not be reached or did not answer in time")
    return MemoryStorageError("Mem0 failed to complete the operation")
