"""The event-outbox contract between the activity port and a transactional provider.

A write's ``committed`` event must not be lost between the provider's commit and the
sinks. A provider that declares ``event_outbox`` receives the event, drafted before the
call, in ``OperationContext.committed_event``; it completes it from its own result with
:func:`finish_committed_event` and stores it in the same transaction as the record. The
activity port then does not emit that event itself: a dispatcher reads
``pending_events`` and delivers them to the sinks at least once, then acknowledges
them, and sinks deduplicate by ``event_id``. What the stored event says about the
result is what the port's own event would say: both come from the request kind that
answers with it (``Request.summarize``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Sequence
from typing import Final, Protocol, runtime_checkable

import attrs

from governed_memory.events import EventBus, MemoryEvent
from governed_memory.requests import committed_summary
from governed_memory.requests import erasure_evidence as erasure_evidence  # its old home

log = logging.getLogger(__name__)

DEFAULT_BATCH: Final = 100
DEFAULT_REMEMBERED: Final = 10_000


@runtime_checkable
class EventOutboxProvider(Protocol):
    """What a provider declaring ``Capabilities.event_outbox`` offers besides writes."""

    async def pending_events(self, limit: int) -> Sequence[MemoryEvent]:
        """Stored, unacknowledged events, oldest first, at most ``limit``."""
        ...

    async def acknowledge_events(self, event_ids: Sequence[str]) -> None:
        """Forget delivered events; unknown ids are ignored (delivery is at least once)."""
        ...


def finish_committed_event(draft: MemoryEvent, result: object,
                           *, content_hashes: bool = True) -> MemoryEvent:
    """The draft with what only the provider's result can say: ids, versions, hashes,
    counts, an erasure's receipt (``requests.committed_summary``). Pure, so a provider
    can call it inside its transaction."""
    summary = committed_summary(result)
    return attrs.evolve(
        draft, record_ids=summary.record_ids, versions=summary.versions,
        content_hashes=summary.content_hashes if content_hashes else (), count=summary.count,
        scope_hashes=summary.scope_hashes or draft.scope_hashes,
        reasons=summary.reasons or draft.reasons, erasure=summary.erasure or draft.erasure)


@attrs.frozen(slots=True)
class Drain:
    """One drain: the ids it delivered, and the event it stopped at, if a sink failed."""

    delivered: tuple[str, ...] = ()
    stuck_on: str | None = None


@attrs.frozen(slots=True)
class Settled:
    """Where a write's committed event stands after the drain that follows the write:
    ``delivered`` (as it went out), ``waiting`` in the outbox (a sink refused it or an
    event before it: a later drain delivers it), or neither (the provider did not store
    it, or its outbox could not be read), when the caller emits it itself."""

    delivered: MemoryEvent | None = None
    waiting: bool = False


class OutboxDispatcher:
    """Delivers a provider's stored events to the sinks, then acknowledges them.

    An event is acknowledged only once every sink took it (``EventBus.deliver``), so a
    sink that fails leaves it stored, and the next drain offers it again: delivery is
    at least once, and sinks deduplicate by ``event_id`` (the audit sink does). Events
    go out in the order stored; a drain stops at the first one a sink refused, so a
    later event never overtakes it. One drain runs at a time per dispatcher.

    ``content_hashes=False`` (a profile's minimal event detail) strips content hashes
    before delivery, whatever the provider stored.

    Sinks that offer ``emit_stored`` (``events.StoredEventSink``) receive these events
    there: a trail in the provider's own store took them in with the write, and only
    has to let the acknowledgement go ahead.
    """

    def __init__(self, provider: EventOutboxProvider, events: EventBus, *,
                 batch: int = DEFAULT_BATCH, content_hashes: bool = True,
                 remembered: int = DEFAULT_REMEMBERED) -> None:
        if batch < 1 or remembered < 1:
            raise ValueError("batch and remembered must be positive")
        self.provider = provider
        self.events = events
        self.batch = batch
        self.content_hashes = content_hashes
        self._lock = asyncio.Lock()
        self._delivered: OrderedDict[str, MemoryEvent] = OrderedDict()
        self._remembered = remembered
        self._pending: set[str] = set()
        self._task: asyncio.Task[None] | None = None

    def delivered(self, event_id: str) -> MemoryEvent | None:
        """The event as this dispatcher delivered it recently, else ``None``."""
        return self._delivered.get(event_id)

    def pending(self, event_id: str) -> bool:
        """Seen in the outbox and not yet delivered (a sink refused it or one before it)."""
        return event_id in self._pending

    async def drain(self) -> Drain:
        """Deliver everything stored now; returns what went out and where it stopped."""
        delivered: list[str] = []
        async with self._lock:
            while True:
                events = await self.provider.pending_events(self.batch)
                if not events:
                    self._pending.clear()  # whatever was seen, someone delivered it
                    return Drain(tuple(delivered))
                self._pending.update(event.event_id for event in events)
                done: list[str] = []
                stuck: str | None = None
                for stored in events:
                    event = (stored if self.content_hashes
                             else attrs.evolve(stored, content_hashes=()))
                    if not await self.events.deliver(event, stored=True):
                        stuck = stored.event_id
                        break
                    done.append(stored.event_id)
                    self._remember(event)
                if done:
                    await self.provider.acknowledge_events(done)
                    self._pending.difference_update(done)
                    delivered.extend(done)
                if stuck is not None:
                    log.warning("event outbox: a sink refused an event; %d delivered, the "
                                "rest stays stored for the next drain", len(done))
                    return Drain(tuple(delivered), stuck)
                if len(events) < self.batch:
                    # A short page was everything stored when it was read: no second read
                    # on every write. Anything stored since is drained by its own write.
                    return Drain(tuple(delivered))

    async def settle(self, event_id: str, provider: str) -> Settled:
        """Drain now, then say where the committed event ``event_id`` stands
        (:class:`Settled`); a drain that fails is logged as ``provider``'s."""
        try:
            delivery: Drain | None = await self.drain()
        except Exception as exc:
            log.error("event outbox of %s failed: %s", provider, type(exc).__name__)
            delivery = None
        delivered = self.delivered(event_id)
        if delivered is not None:
            return Settled(delivered)
        waiting = delivery is not None and (delivery.stuck_on is not None
                                            or self.pending(event_id))
        return Settled(waiting=waiting)

    def _remember(self, event: MemoryEvent) -> None:
        self._delivered[event.event_id] = event
        if len(self._delivered) > self._remembered:
            self._delivered.popitem(last=False)

    # -- periodic delivery ----------------------------------------------------------------

    def start(self, interval_s: float) -> None:
        """Drain every ``interval_s`` seconds in the background (events other processes
        or earlier failures left) until ``stop``."""
        if not interval_s > 0:
            raise ValueError("interval_s must be positive")
        if self._task is None:
            self._task = asyncio.create_task(self._run(interval_s),
                                             name="governed-memory-event-outbox")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.drain()
            except Exception as exc:  # the loop must outlive any one failure
                log.error("event outbox: drain failed: %s", type(exc).__name__)
