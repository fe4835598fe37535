"""The native event outbox (``governed_memory.outbox.EventOutboxProvider``): every
write's ``committed`` event, stored in the write's own transaction, handed to the sinks
until they acknowledge it.

This process keeps what it committed in memory, so a drain costs no read; what storage
may hold beyond that (an earlier run's undelivered events, a write whose outcome was
unknown) is read once, then never again until another such doubt. Removing delivered
events rides along with the next write (sinks deduplicate by event id, so a crash
before then only means a second delivery); past ``ACK_BATCH`` of them they are removed
in a write of their own.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Final

from governed_memory.errors import MemoryValidationError
from governed_memory.events import MemoryEvent

from governed_memory_native.storage.port import ReadTransaction, StorageBackend, WriteTransaction

MAX_EVENTS: Final = 1000
"""Outbox events read per ``pending_events`` call, at most."""

ACK_BATCH: Final = 256
"""Delivered events whose removal from storage may wait for a later write; past this
many they are removed in a write of their own."""


class NativeEventOutbox:
    """The outbox as this process knows it, over the backend that stores it."""

    def __init__(self, backend: StorageBackend, require_open: Callable[[], None]) -> None:
        self._backend = backend
        self._require_open = require_open
        self._committed: deque[MemoryEvent] = deque()
        self._committed_ids: set[str] = set()
        self._acks: list[str] = []
        self._stored_unknown = True

    def reopened(self) -> None:
        """A previous run may have left events undelivered: the next drain looks."""
        self._stored_unknown = True

    async def pending_events(self, limit: int) -> Sequence[MemoryEvent]:
        """Committed events not yet acknowledged, oldest first (``governed_memory.outbox``)."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_EVENTS:
            raise MemoryValidationError(f"limit must be an integer from 1 to {MAX_EVENTS}",
                                        field="limit")
        self._require_open()
        if self._stored_unknown:
            await self._absorb_stored_events(limit)
        return tuple(event for _, event in zip(range(limit), self._committed, strict=False))

    async def _absorb_stored_events(self, limit: int) -> None:
        """Read what storage holds that this process does not know: events an earlier
        run (or a write whose outcome was unknown) left undelivered. Once a read comes
        back short, storage holds nothing more of ours, and later drains read nothing."""
        acked = set(self._acks)
        wanted = limit + len(acked)

        async def unit(tx: ReadTransaction) -> Sequence[MemoryEvent]:
            return await tx.outbox.pending(wanted)

        stored = [event for event in await self._backend.run_read(unit)
                  if event.event_id not in acked and event.event_id not in self._committed_ids]
        # Stored events are older than any this process has not yet seen committed.
        self._committed.extendleft(reversed(stored))
        self._committed_ids.update(event.event_id for event in stored)
        if len(stored) + len(acked) < wanted:
            self._stored_unknown = False

    async def acknowledge_events(self, event_ids: Sequence[str]) -> None:
        """Forget delivered events; unknown (already acknowledged) ids are ignored."""
        if isinstance(event_ids, str) or not all(isinstance(i, str) for i in event_ids):
            raise MemoryValidationError("event_ids must be a sequence of event id strings",
                                        field="event_ids")
        self._require_open()
        if not event_ids:
            return
        done = set(event_ids) & self._committed_ids
        if done:
            self._committed = deque(event for event in self._committed
                                    if event.event_id not in done)
            self._committed_ids -= done
        self._acks.extend(event_ids)
        if len(self._acks) >= ACK_BATCH:
            await self.flush_acks()

    async def flush_acks(self) -> None:
        """Remove every acknowledged event from storage now, in a write of its own."""
        acks, self._acks = self._acks, []
        if not acks:
            return

        async def unit(tx: WriteTransaction) -> None:
            await tx.outbox.acknowledge(acks)

        try:
            await self._backend.run_write(unit)
        except BaseException:
            self._acks = acks + self._acks
            raise

    # -- what a write's unit of work tells the outbox (``units.Units.write``) -------

    def take_acks(self) -> list[str]:
        """The acknowledged events the next write removes from storage."""
        acks, self._acks = self._acks, []
        return acks

    def rolled_back(self, acks: list[str], *, uncertain: bool) -> None:
        """The write did not commit: its acknowledgements wait for the next one. An
        ``uncertain`` failure (cancelled, storage failed) may have committed after all,
        so the next drain looks at what storage holds."""
        self._acks = acks + self._acks
        if uncertain:
            self._stored_unknown = True

    def committed(self, events: Sequence[MemoryEvent]) -> None:
        """The write committed with ``events`` stored: they are pending from now on."""
        for event in events:
            if event.event_id not in self._committed_ids:
                self._committed.append(event)
                self._committed_ids.add(event.event_id)
