"""The event-outbox contract between the activity port and a transactional provider.

A write's ``committed`` event must not be lost between the provider's commit and the
sinks. A provider that declares ``event_outbox`` receives the event, drafted before the
call, in ``OperationContext.committed_event``; it completes it from its own result with
:func:`finish_committed_event` and stores it in the same transaction as the record. The
activity port then does not emit that event itself: a dispatcher reads
``pending_events`` and delivers them to the sinks at least once, then acknowledges
them, and sinks deduplicate by ``event_id``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import attrs

from governed_memory.events import MemoryEvent
from governed_memory.records import CleanupPage, DeleteResult, ErasureReceipt, MemoryRecord


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
    counts. Pure, so a provider can call it inside its transaction."""
    if isinstance(result, MemoryRecord):
        return attrs.evolve(draft, record_ids=(result.id,), versions=(result.version,),
                            content_hashes=(result.content_hash,) if content_hashes else (),
                            count=1)
    if isinstance(result, DeleteResult):
        return attrs.evolve(draft, record_ids=(result.record_id,),
                            versions=() if result.version is None else (result.version,),
                            count=1)
    if isinstance(result, ErasureReceipt):
        return attrs.evolve(draft, count=result.total, scope_hashes=result.scope_hashes,
                            reasons=(f"receipt {result.receipt_hash}",))
    if isinstance(result, CleanupPage):
        return attrs.evolve(draft, count=result.deleted)
    if isinstance(result, int) and not isinstance(result, bool):
        return attrs.evolve(draft, count=result)
    raise TypeError(f"no committed event for a {type(result).__name__} result")
