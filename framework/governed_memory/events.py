"""The event envelope and the sinks that receive it.

An event says who did what to which scope, with which decision and outcome, and
which record versions were touched, by id and hash. It never carries content, query
text, metadata values, embeddings or credentials, so a trail can be handed to an
auditor as it is.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol, TextIO, runtime_checkable

import attrs

from governed_memory.converter import unstructure
from governed_memory.ids import new_id

log = logging.getLogger(__name__)


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


class EventBus:
    """Fans an event out to every sink. A failing sink is logged and skipped here;
    profiles that require a fail-closed audit trail check the audit sink themselves."""

    def __init__(self, sinks: Sequence[EventSink] = ()) -> None:
        self.sinks = tuple(sinks)

    async def emit(self, event: MemoryEvent) -> None:
        for sink in self.sinks:
            try:
                await sink.emit(event)
            except Exception:
                log.exception("event sink %s failed on %s", getattr(sink, "name", sink),
                              event.type)

    async def emit_all(self, events: Iterable[MemoryEvent]) -> None:
        for event in events:
            await self.emit(event)

    async def close(self) -> None:
        for sink in self.sinks:
            try:
                await sink.close()
            except Exception:
                log.exception("event sink %s failed to close", getattr(sink, "name", sink))
