"""One error tree, so callers can catch by meaning instead of by provider.

Every error carries a stable ``code`` that events and the CLI report; messages never
contain memory content, query text or private provider detail.
"""

from __future__ import annotations

__all__ = [
    "REFUSALS",
    "GovernedMemoryError",
    "MemoryCapabilityUnsupportedError",
    "MemoryConfigurationError",
    "MemoryConflictError",
    "MemoryNotFoundError",
    "MemoryPolicyDeniedError",
    "MemoryScopeError",
    "MemoryStorageError",
    "MemoryUnavailableError",
    "MemoryValidationError",
]


class GovernedMemoryError(Exception):
    """Root of every error governed-memory raises on purpose."""

    code = "memory_error"


class MemoryConfigurationError(GovernedMemoryError):
    """A profile, plugin or provider configuration cannot be used."""

    code = "configuration"


class MemoryValidationError(GovernedMemoryError, ValueError):
    """A request breaks a limit or a type rule; nothing was written.

    ``field`` names the offending input (``content``, ``scope.tenant_id``, ``limit``)
    so a caller can point at it without parsing the message.
    """

    code = "validation"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class MemoryScopeError(GovernedMemoryError, PermissionError):
    """The principal may not act on the requested scope."""

    code = "scope_denied"


class MemoryPolicyDeniedError(GovernedMemoryError, PermissionError):
    """A registered policy denied the operation (or failed, which counts as a deny).

    ``reasons`` are the decision's ``"policy: reason"`` lines. Policies write reasons to
    be shown (they name a detector or a limit, never content), so a caller may pass them
    on to its user; ``decision_id`` finds the decision in the event trail.
    """

    code = "policy_denied"

    def __init__(self, message: str, *, decision_id: str | None = None,
                 policy: str | None = None, reasons: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.decision_id = decision_id
        self.policy = policy
        self.reasons = tuple(reasons)


class MemoryConflictError(GovernedMemoryError):
    """Stale ``expected_revision``, a duplicate key, or an idempotency key reused
    with a different request."""

    code = "conflict"


class MemoryNotFoundError(GovernedMemoryError, LookupError):
    """No live record with that id or key in the requested scope."""

    code = "not_found"


class MemoryCapabilityUnsupportedError(GovernedMemoryError):
    """The provider does not declare the capability the operation needs."""

    code = "capability_unsupported"


class MemoryStorageError(GovernedMemoryError):
    """The datastore failed; the message is safe to show and hides provider internals."""

    code = "storage"


class MemoryUnavailableError(GovernedMemoryError):
    """The provider cannot be reached or timed out; a write's outcome may be unknown."""

    code = "unavailable"


REFUSALS: tuple[type[GovernedMemoryError], ...] = (
    MemoryValidationError,
    MemoryScopeError,
    MemoryPolicyDeniedError,
    MemoryConflictError,
    MemoryNotFoundError,
    MemoryCapabilityUnsupportedError,
)
"""Errors that mean "the request was refused" rather than "the system failed": a
refused request leaves storage unchanged, so events call it rejected, not failed."""
