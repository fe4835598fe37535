"""The event envelope and the sinks that receive it.

An event says who did what to which scope, with which decision and outcome, and
which record versions were touched, by id and hash. It never carries content, query
text, metadata values, embeddings or credentials, so a trail can be handed to an
auditor as it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import hashlib
import json
import logging
import os
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final, Protocol, runtime_checkable

import attrs

from governed_memory.canonical import canonical_json
from governed_memory.converter import unstructure
from governed_memory.errors import (
    GovernedMemoryError,
    MemoryConfigurationError,
    MemoryUnavailableError,
)
from governed_memory.ids import new_id

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


@attrs.frozen(slots=True, kw_only=True)
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


@runtime_checkable
class CheckableEventSink(Protocol):
    """An event sink that can say whether it could record an event now. Optional: a
    sink need not offer it, and ``EventSink`` does not require it.

    ``check`` makes a real round trip to where the sink records (its file or directory,
    its database, its broker) without recording anything, and raises when that fails
    (the library's errors say what failed and nothing private). Readiness probes call it
    (the service's ``/readyz`` answers 503 while a sink's check fails) and name the
    sinks that do not offer it as unchecked."""

    async def check(self) -> None: ...


@runtime_checkable
class StoredEventSink(Protocol):
    """An event sink that is told which events a provider stored in its event outbox
    (in the transaction of the write they record) before they were delivered. Optional:
    the outbox dispatcher calls ``emit_stored`` instead of ``emit`` for those events on
    a sink that offers it.

    A sink whose store already holds what the provider stored (a trail in the
    provider's own database, whose intake took the event in that same transaction)
    need not record it a second time; any other sink records it as ``emit`` would.
    Delivery stays at least once, and the dispatcher acknowledges an event only after
    ``emit_stored`` returned, so it may return only once the event is durable in the
    sink's keeping."""

    async def emit_stored(self, event: MemoryEvent) -> None: ...


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
    before ``emit`` returns, at the cost of a disk flush per event.

    Opening, writing and fsync run on one worker thread per sink, never on the event
    loop. A single-thread executor is a FIFO queue, so lines land in the order ``emit``
    was called, and ``emit`` returns only once its line is written (and synced). An
    ``emit`` that is cancelled does not cancel its write: the line keeps its place, so
    the file never skips an event that a later one follows.
    """

    name = "jsonl"

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.path = Path(path)
        self._fsync = fsync
        self._fd: int | None = None
        self._executor: ThreadPoolExecutor | None = None

    async def emit(self, event: MemoryEvent) -> None:
        await self._in_worker(self._write, (event.to_json() + "\n").encode("utf-8"))

    async def check(self) -> None:
        """The file can be appended to (opened for append and closed, nothing written),
        or, before the first event, its nearest existing directory is writable."""
        await asyncio.to_thread(_check_appendable, self.path)

    async def close(self) -> None:
        if self._executor is None:
            return
        await self._in_worker(self._close)
        executor, self._executor = self._executor, None
        executor.shutdown(wait=False)  # idle: the close job was the last one

    async def _in_worker(self, work: Callable[..., None], *args: bytes) -> None:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1,
                                                thread_name_prefix="governed-memory-jsonl")
        future = self._executor.submit(work, *args)
        await asyncio.shield(asyncio.wrap_future(future))

    def _write(self, line: bytes) -> None:
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o640)
        before = os.fstat(self._fd).st_size
        try:
            written = 0
            while written < len(line):
                written += os.write(self._fd, line[written:])
            if self._fsync:
                os.fsync(self._fd)
        except OSError as exc:
            # A full disk must not leave half a line for the next event to follow.
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, before)
            raise MemoryUnavailableError(
                f"event log write failed: {errno.errorcode.get(exc.errno or 0, 'error')}"
            ) from None

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _check_appendable(path: Path) -> None:
    try:
        if path.exists():
            os.close(os.open(path, os.O_WRONLY | os.O_APPEND))
            return
        parent = path.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
            raise MemoryUnavailableError(f"event log {path}: {parent} is not a writable "
                                         "directory")
    except OSError as exc:
        raise MemoryUnavailableError(
            f"event log check failed: {errno.errorcode.get(exc.errno or 0, 'error')}"
        ) from None


def read_events(path: str | os.PathLike[str]) -> list[MemoryEvent]:
    """Load a JSON lines trail back into events (strictly: unknown keys, duplicate keys
    and non-canonical numbers are errors, as for every document the audit tools read).

    A last line without its newline is what a crash mid-append leaves; its ``emit``
    never returned, so it is no event and is passed over."""
    from governed_memory.audit.strict_json import read_json
    from governed_memory.converter import structure

    events = []
    with open(path, "rb") as handle:
        for raw in handle:
            if not raw.endswith(b"\n"):
                break
            line = raw.decode("utf-8")
            if line.strip():
                events.append(structure(read_json(line, document=str(path)), MemoryEvent))
    return events


class AuditUnavailableError(MemoryUnavailableError):
    """A fail-closed trail could not record an event, so the operation was refused
    (or, after a write, its outcome is unrecorded: see ``docs/compliance.md``).

    The message names the cause: which sink failed and what failed (a library error's
    own message, an OS error's errno, else the exception's type: never a third-party
    message, which may carry anything), or that there was no sink at all. ``sinks``
    names the sinks that failed; the first failure is the ``__cause__``."""

    code = "audit_unavailable"

    def __init__(self, message: str, *, sinks: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.sinks = tuple(sinks)


def _sink_name(sink: object) -> str:
    name = getattr(sink, "name", None)
    return name if isinstance(name, str) and name else type(sink).__name__


def _failure_reason(exc: BaseException) -> str:
    """What failed, in words safe to show a caller: a library error's message (written
    without content or private detail), an OS error's errno name, else only the type."""
    if isinstance(exc, GovernedMemoryError):
        return f"{type(exc).__name__}: {exc}"
    if isinstance(exc, OSError) and exc.errno:
        return (f"{type(exc).__name__} ({errno.errorcode.get(exc.errno, str(exc.errno))}: "
                f"{os.strerror(exc.errno)})")
    return type(exc).__name__


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
        failures = await self._deliver(event)
        if not self.strict:
            return
        if not self.sinks:
            raise AuditUnavailableError(
                f"the audit trail could not record {event.type}: the audit is fail-closed "
                "and the manager has no event sink to record to (name a trail in the "
                "profile's [audit] path, or pass sinks)")
        if failures:
            raise AuditUnavailableError(
                f"the audit trail could not record {event.type}: "
                + "; ".join(f"sink {name!r} failed: {_failure_reason(exc)}"
                            for name, exc in failures),
                sinks=tuple(name for name, _ in failures)) from failures[0][1]

    async def deliver(self, event: MemoryEvent, *, stored: bool = False) -> bool:
        """Hand ``event`` to every sink; True only if every sink took it (and there is
        at least one, when strict). Failures are logged by type, never by content.
        ``stored``: the event comes from a provider's event outbox, and a sink that
        offers ``emit_stored`` (:class:`StoredEventSink`) gets it there."""
        failures = await self._deliver(event, stored=stored)
        return not failures and (bool(self.sinks) or not self.strict)

    async def _deliver(self, event: MemoryEvent, *,
                       stored: bool = False) -> list[tuple[str, Exception]]:
        """Every sink gets the event, whatever the others did; the failures, by sink."""
        failures: list[tuple[str, Exception]] = []
        for sink in self.sinks:
            try:
                emit_stored = getattr(sink, "emit_stored", None) if stored else None
                if emit_stored is not None:
                    await emit_stored(event)
                else:
                    await sink.emit(event)
            except Exception as exc:
                failures.append((_sink_name(sink), exc))
                log.error("event sink %s failed on %s: %s", _sink_name(sink), event.type,
                          type(exc).__name__)
        return failures

    async def emit_all(self, events: Iterable[MemoryEvent]) -> None:
        for event in events:
            await self.emit(event)

    async def close(self) -> None:
        for sink in self.sinks:
            try:
                await sink.close()
            except Exception:
                log.exception("event sink %s failed to close", getattr(sink, "name", sink))


def jsonl_sink_from_config(config: Mapping[str, Any]) -> EventSink:
    """The ``jsonl`` event-sink plugin's factory: ``{"path": ..., "fsync": false}``."""
    unknown = sorted(set(config) - {"path", "fsync"})
    if unknown:
        raise MemoryConfigurationError(f"jsonl sink: unknown config key(s) {unknown}; "
                                       "known: ['fsync', 'path']")
    path, fsync = config.get("path"), config.get("fsync", False)
    if not isinstance(path, str | os.PathLike) or not str(path).strip():
        raise MemoryConfigurationError("jsonl sink: config needs a path")
    if not isinstance(fsync, bool):
        raise MemoryConfigurationError("jsonl sink: fsync must be true or false")
    return JsonLinesEventSink(path, fsync=fsync)
