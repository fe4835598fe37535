"""What every provider call is told about the operation it serves."""

from __future__ import annotations

import attrs

from governed_memory.principal import Principal


@attrs.frozen(slots=True)
class ProfileRef:
    """A versioned profile reference (``id@version``) and its content revision."""

    id: str = "default"
    version: str = "0.0.0"
    revision: str = "unversioned"

    def __str__(self) -> str:
        return f"{self.id}@{self.version}"


@attrs.frozen(slots=True)
class OperationContext:
    """Built by the manager for one operation; providers read, never mutate it.

    ``now`` is fixed once per operation so that every expiry check and timestamp within
    one operation agrees.
    """

    operation_id: str
    principal: Principal
    now: float
    profile: ProfileRef = attrs.field(factory=ProfileRef)
    decision_id: str | None = None
    trace_id: str | None = None
    span_id: str | None = None
