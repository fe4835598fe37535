"""Errors as ``application/problem+json`` (RFC 9457), both ways.

The server turns every library error into a problem whose ``code`` is the error's
stable code (``field`` for a validation error; ``decision_id``, ``policy`` and
``reasons`` for a policy denial, which policies write to be shown); the client turns
the problem back into the same class. Only the error's own message goes out: the
library keeps content, query text and provider detail out of those.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from governed_memory.errors import (
    GovernedMemoryError,
    MemoryCapabilityUnsupportedError,
    MemoryConfigurationError,
    MemoryConflictError,
    MemoryNotFoundError,
    MemoryPolicyDeniedError,
    MemoryScopeError,
    MemoryStorageError,
    MemoryUnavailableError,
    MemoryValidationError,
)

from governed_memory_service.errors import (
    AuthenticationError,
    PayloadTooLargeError,
    PreconditionFailedError,
)

__all__ = ["PROBLEM_JSON", "TYPE_PREFIX", "error_from_problem", "problem_for", "status_for"]

PROBLEM_JSON = "application/problem+json"
TYPE_PREFIX = "urn:governed-memory:problem:"
"""Problem types are URNs (``urn:governed-memory:problem:not_found``): stable names,
not links to pages that might move."""

# Most specific first: PreconditionFailedError is a conflict, PayloadTooLarge a validation.
_STATUS: tuple[tuple[type[GovernedMemoryError], int, str], ...] = (
    (AuthenticationError, 401, "Unauthorized"),
    (PreconditionFailedError, 412, "Precondition failed"),
    (PayloadTooLargeError, 413, "Payload too large"),
    (MemoryValidationError, 422, "Invalid request"),
    (MemoryScopeError, 403, "Scope denied"),
    (MemoryPolicyDeniedError, 403, "Denied by policy"),
    (MemoryConflictError, 409, "Conflict"),
    (MemoryNotFoundError, 404, "Not found"),
    (MemoryCapabilityUnsupportedError, 501, "Not supported by this provider"),
    (MemoryUnavailableError, 503, "Unavailable"),
    (MemoryStorageError, 503, "Storage failure"),
    (MemoryConfigurationError, 500, "Server misconfigured"),
)

_BY_CODE: dict[str, type[GovernedMemoryError]] = {kind.code: kind for kind, _, _ in _STATUS}


def status_for(error: GovernedMemoryError) -> tuple[int, str]:
    for kind, status, title in _STATUS:
        if isinstance(error, kind):
            return status, title
    return 500, "Internal error"


def problem_for(error: GovernedMemoryError) -> dict[str, Any]:
    """The problem document for a library (or service) error."""
    status, title = status_for(error)
    problem: dict[str, Any] = {"type": TYPE_PREFIX + error.code, "title": title,
                               "status": status, "detail": str(error), "code": error.code}
    if isinstance(error, MemoryValidationError) and error.field is not None:
        problem["field"] = error.field
    if isinstance(error, MemoryPolicyDeniedError):
        problem.update(decision_id=error.decision_id, policy=error.policy,
                       reasons=list(error.reasons))
    return problem


def error_from_problem(status: int, problem: Mapping[str, Any]) -> GovernedMemoryError:
    """The typed error a problem document stands for (the client's side)."""
    code = problem.get("code")
    detail = str(problem.get("detail") or problem.get("title") or f"HTTP {status}")
    kind = _BY_CODE.get(code) if isinstance(code, str) else None
    if kind is AuthenticationError:
        return AuthenticationError(detail, credentials_given=True)
    if kind is PayloadTooLargeError:
        return PayloadTooLargeError(None, detail)
    if kind is not None and issubclass(kind, MemoryValidationError):
        field = problem.get("field")
        return kind(detail, field=field if isinstance(field, str) else None)
    if kind is MemoryPolicyDeniedError:
        reasons = problem.get("reasons") or ()
        decision, policy = problem.get("decision_id"), problem.get("policy")
        return MemoryPolicyDeniedError(
            detail, decision_id=decision if isinstance(decision, str) else None,
            policy=policy if isinstance(policy, str) else None,
            reasons=tuple(str(r) for r in reasons if isinstance(r, str)))
    if kind is not None:
        return kind(detail)
    if status == 404:
        return MemoryNotFoundError(detail)
    if status in (502, 503, 504):
        return MemoryUnavailableError(detail)
    return GovernedMemoryError(detail)
