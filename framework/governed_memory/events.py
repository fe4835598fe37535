"""The event envelope and the sinks that receive it.

An event says who did what to which scope, with which decision and outcome, and
which record versions were touched, by id and hash. It never carries content, query
text, metadata values, embeddings or credentials, so a trail can be handed to an
auditor as it is.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import os
import types
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Final, Protocol, TextIO, runtime_checkable

import attrs

from governed_memory.converter import unstructure
from governed_memory.errors import MemoryUnavailableError
from governed_memory.ids import new_id
from governed_memory.limits import canonical_json

log = logging.getLogger(__name__)

SUBJECT_HASH_PREFIX: Final = "su1:"
RECEIPT_EVENT: Final = "memory.erasure.receipt"
"""The event that records ``delete_user``'s final receipt (after every layer, such as
the search cache, has added its count)."""
_SUBJECT_DOMAIN: Final = b"governed-memory/subject\x00"


@functools.lru_cache(maxsize=4096)
def subject_hash(tenant_id: str, user_id: str) -> str:
    """The data subject (a user of a tenant) as events name it: ``su1:`` + a SHA-256 of
    the pair, so ``audit report --tenant T --user U`` finds every event about U without
    the trail holding U's id. It is as guessable as a scope hash (which already hashes
    the same ids); a trail is evidence for auditors, not a place to hide identities."""
    body = canonical_json({"tenant_id": tenant_id, "user_id": user_id}).encode("utf-8")
    return SUBJECT_HASH_PREFIX + hashlib.sha256(_SUBJECT_DOMAIN + body).hexdigest()


def _counts(value: Mapping[str, int] | None) -> Mapping[str, int]:
    return types.MappingProxyType(dict(sorted((value or {}).items())))


@attrs.frozen(slots=True)
class ErasureEvidence:
    """An erasure receipt as the trail keeps it: everything but the user id, whose
    place the event's ``subject_hashes`` take. With the user id an auditor recomputes
    ``receipt_hash`` from these fields (``ErasureReceipt.body``), so the trail proves
    which receipt the provider issued."""

    request_id: str
    counts: Mapping[str, int] = attrs.field(factory=dict, converter=_counts)
    started_at: float = 0.0
    completed_at: float = 0.0
    receipt_hash: str = ""

    @property
    def removed(self) -> int:
        """Everything the erasure removed, across stores."""
        return sum(self.counts.values())


@attrs.frozen(slots=True)
class MemoryEvent:
    event_id: str
    type: str
    occurred_at: float
    operation_id: str
    operation: str
    principal_id: str
    tenant_id: str
    scope_hash: str | None = None
    scope_hashes: tuple[str, ...] = ()
    profile_id: str | None = None
    profile_version: str | None = None
    profile_revision: str | None = None
    provider: str | None = None
    provider_revision: str | None = None
    decision_id: str | None = None
    policy_revision: str | None = None
    outcome: str | None = None
    reasons: tuple[str, ...] = ()
    record_ids: tuple[str, ...] = ()
    versions: tuple[int, ...] = ()
    content_hashes: tuple[str, ...] = ()
    count: int | None = None
    duration_ms: float | None = None
    error_code: str | None = None
    trace_id: str | None = None
    span_id: str | None = None
    subject_hashes: tuple[str, ...] = ()
    """The data subjects (``subject_hash``) the operation concerned: the users of its
    scopes, or the user an erasure named."""
    erasure: ErasureEvidence | None = None
    """Set on the events of ``delete_user`` that carry its receipt."""

    def to_json(self) -> str:
        return json.dumps(unstructure(self), sort_keys=True, separators=(",", ":"))


def event_id(operation_id: str | None = None, sequence: int = 0) -> str:
    """Unique per event: derived from the operation's id and the event's place in it
    (an operation emits a handful), else a fresh id."""
    if operation_id is None:
        return "evt_" + new_id()
    return f"evt_{operation_id.removeprefix('op_')}.{sequence}"


@runtime_checkable
class EventSink(Protocol):
    name: str

    async def emit(self, event: MemoryEvent) -> None: ...

    async def close(self) -> None: ...


class InMemoryEventSink:
    """Keeps every event in a list; for tests and the demo."""

    name = "memory"

    def __init__(self) -> None:
        self.events: list[MemoryEvent] = []

    async def emit(self, event: MemoryEvent) -> None:
        self.events.append(event)

    async def close(self) -> None:
        return None

    def types(self) -> list[str]:
        return [event.type for event in self.events]

    def for_operation(self, operation_id: str) -> list[MemoryEvent]:
        return [event for event in self.events if event.operation_id == operation_id]

    def clear(self) -> None:
        self.events.clear()


class JsonLinesEventSink:
    """Appends one JSON object per line. ``fsync=True`` makes each event durable
    before the operation returns, at the cost of a disk flush per event."""

    name = "jsonl"

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.path = Path(path)
        self._fsync = fsync
        self._file: TextIO | None = None
        self._lock = asyncio.Lock()

    def _open(self) -> TextIO:
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115
        return self._file

    async def emit(self, event: MemoryEvent) -> None:
        line = event.to_json() + "\n"
        async with self._lock:
            handle = self._open()
            handle.write(line)
            handle.flush()
            if self._fsync:
                os.fsync(handle.fileno())

    async def close(self) -> None:
        async with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def read_events(path: str | os.PathLike[str]) -> list[MemoryEvent]:
    """Load a JSON lines trail back into events (strictly: unknown keys are errors)."""
    from governed_memory.converter import structure

    events = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                events.append(structure(json.loads(line), MemoryEvent))
    return events


class AuditUnavailableError(MemoryUnavailableError):
    """A fail-closed trail could not record an event, so the operation was refused
    (or, after a write, its outcome is unrecorded: see ``docs/compliance.md``)."""

    code = "audit_unavailable"


class EventBus:
    """Fans an event out to every sink.

    Lenient (the default): a failing sink is logged and skipped, so a broken metrics
    pipe never takes memory down. Strict (a profile's ``[audit] fail_closed``): every
    sink must record the event, and ``emit`` raises ``AuditUnavailableError`` when one
    cannot, or when there is no sink at all, since an unrecorded operation is exactly
    what a fail-closed trail forbids.
    """

    def __init__(self, sinks: Sequence[EventSink] = (), *, strict: bool = False) -> None:
        self.sinks = tuple(sinks)
        self.strict = strict

    @property
    def listening(self) -> bool:
        """Whether an event emitted now could be recorded or refused by anyone: with no
        sink and a lenient bus, emitting is a no-op, so the hot path skips building the
        event at all."""
        return bool(self.sinks) or self.strict

    async def emit(self, event: MemoryEvent) -> None:
        if await self.deliver(event) or not self.strict:
            return
        raise AuditUnavailableError(f"the audit trail could not record {event.type}")

    async def deliver(self, event: MemoryEvent) -> bool:
        """Hand ``event`` to every sink; True only if every sink took it (and there is
        at least one, when strict). Failures are logged by type, never by content."""
        delivered = bool(self.sinks) or not self.strict
        for sink in self.sinks:
            try:
                await sink.emit(event)
            except Exception as exc:
                delivered = False
                log.error("event sink %s failed on %s: %s", getattr(sink, "name", sink),
                          event.type, type(exc).__name__)
        return delivered

    async def emit_all(self, events: Iterable[MemoryEvent]) -> None:
        for event in events:
            await self.emit(event)

    async def close(self) -> None:
        for sink in self.sinks:
            try:
                await sink.close()
            except Exception:
                log.exception("event sink %s failed to close", getattr(sink, "name", sink))
