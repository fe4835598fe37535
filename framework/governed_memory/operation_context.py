"""What every provider call is told about the operation it serves."""

from __future__ import annotations

from typing import Protocol

import attrs

from governed_memory.events import MemoryEvent
from governed_memory.principal import Principal


class Fingerprinted(Protocol):
    """A request, as far as idempotency needs one."""

    def fingerprint(self) -> str: ...


@attrs.frozen(slots=True)
class ProfileRef:
    """A versioned profile reference (``id@version``) and its content revision."""

    id: str = "default"
    version: str = "0.0.0"
    revision: str = "unversioned"

    def __str__(self) -> str:
        return f"{self.id}@{self.version}"


@attrs.frozen(slots=True)
class OperationNotes:
    """What a provider did besides the operation's own effect, for the trail to say.

    A provider appends a short, content-free line (ids, counts) when an operation had a
    side effect the caller did not name, e.g. an add that erased an expired record to
    free its key. The activity port puts the lines into the outcome event's
    ``reasons``, and a provider storing its committed event (the event outbox) adds
    them itself before it stores it. The one mutable part of a context, and only ever
    appended to by the provider serving the operation.
    """

    lines: list[str] = attrs.field(factory=list)

    def add(self, line: str) -> None:
        self.lines.append(line)


@attrs.frozen(slots=True, kw_only=True)
class OperationContext:
    """Built by the manager for one operation; providers read it and only ever append
    to its ``notes``.

    ``now`` is fixed once per operation so that every expiry check and timestamp within
    one operation agrees.
    """

    operation_id: str
    principal: Principal
    now: float
    profile: ProfileRef = attrs.field(factory=ProfileRef)
    decision_id: str | None = None
    policy_revision: str | None = None
    """The revision of the policies that decided this operation (set with
    ``decision_id``); a provider that records a search's snapshot stores it."""
    trace_id: str | None = None
    span_id: str | None = None
    request_fingerprint: str | None = None
    """The caller's request as it was before any policy transformed it. Providers key
    idempotency on this when set, so a retry matches even if a policy stamps something
    time-dependent (a TTL) onto the request it hands on."""
    committed_event: MemoryEvent | None = None
    """Set only for a write to a provider that declares ``event_outbox``: the drafted
    ``committed`` event, which the provider completes with
    ``governed_memory.outbox.finish_committed_event`` and stores in the write's own
    transaction (see ``governed_memory.outbox``)."""

    notes: OperationNotes = attrs.field(factory=OperationNotes, eq=False, repr=False)
    """Side effects the provider reports (:class:`OperationNotes`); shared by every
    evolved copy of this context."""

    def fingerprint_of(self, request: Fingerprinted) -> str:
        """The idempotency fingerprint to store or compare for ``request``."""
        if self.request_fingerprint is not None:
            return self.request_fingerprint
        return request.fingerprint()
