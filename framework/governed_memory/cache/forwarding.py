"""The optional operations a wrapped provider may offer, forwarded one by one.

``CachedMemoryProvider`` is built as a class that has exactly the optional
operations its inner provider has: review (``approve``, ``reject``), usage, the
indexing outbox, replay and snapshot retention (and, on every wrapper, the event
outbox, gated by its capability). Each is a real method with
the protocol's own signature, so ``hasattr``, ``isinstance(cached, ReviewingProvider)`` and the
activity port's capability checks tell the truth, and a call with the wrong arguments
fails where it is made, not deep inside a generic delegate. An operation not listed
here is not reachable through the wrapper: a provider that grows one gets it
forwarded here (reads straight through; writes through ``_write``, which invalidates).

Why not ``__getattr__``: a delegate that guesses ``(request, ctx)`` for every unknown
name turned ``outbox_status()`` and ``process_index_jobs(worker_id=...)`` into
``TypeError`` (issue 14, defect 9), and made every structural check pass whatever the
inner provider offered.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar

from governed_memory.errors import MemoryCapabilityUnsupportedError
from governed_memory.events import MemoryEvent
from governed_memory.indexing import (
    IndexingProvider,
    IndexingSettings,
    IndexJob,
    JobState,
    OutboxStatus,
    ReindexPage,
    WorkerReport,
)
from governed_memory.maintenance import SnapshotKeeping
from governed_memory.operation_context import OperationContext
from governed_memory.outbox import EventOutboxProvider
from governed_memory.provider import ReviewingProvider, UsageReportingProvider
from governed_memory.records import DeleteResult, MemoryRecord, Page, SearchResult
from governed_memory.replay import ReplayingProvider, ReplayRequest, ReplayResult, SnapshotHeader
from governed_memory.requests import (
    ApproveRequest,
    ListPendingRequest,
    RejectRequest,
    SearchRequest,
)
from governed_memory.usage import Usage, UsageQuery

T = TypeVar("T")


class _Forwarding:
    """What every forwarding mixin relies on from ``CachedMemoryProvider``."""

    _inner: Any
    name: str

    if TYPE_CHECKING:
        async def _write(self, operation: str, call: Callable[[], Awaitable[T]],
                         request: Any, ctx: OperationContext) -> T: ...


class ReviewForwarding(_Forwarding):
    """``review``: approving makes a record searchable, rejecting erases it; both bump
    the record's scope after the provider commits."""

    async def approve(self, request: ApproveRequest, ctx: OperationContext) -> MemoryRecord:
        result: MemoryRecord = await self._write(
            "approve", lambda: self._inner.approve(request, ctx), request, ctx)
        return result

    async def reject(self, request: RejectRequest, ctx: OperationContext) -> DeleteResult:
        result: DeleteResult = await self._write(
            "reject", lambda: self._inner.reject(request, ctx), request, ctx)
        return result

    async def list_pending(self, request: ListPendingRequest,
                           ctx: OperationContext) -> Page[MemoryRecord]:
        """The review queue is read from the provider, never from cached pages."""
        result: Page[MemoryRecord] = await self._inner.list_pending(request, ctx)
        return result


class UsageForwarding(_Forwarding):
    """``usage``: always read from the provider (quotas must never see a cached count)."""

    async def usage(self, query: UsageQuery, ctx: OperationContext) -> Usage:
        result: Usage = await self._inner.usage(query, ctx)
        return result


class OutboxForwarding(_Forwarding):
    """``event_outbox``: the committed events the provider stored with its writes.

    Unlike the others, these two are on every wrapper (as they always were) and refuse
    with ``MemoryCapabilityUnsupportedError`` unless the inner provider declares
    ``event_outbox`` and has them: the activity port asks the capability first."""

    async def pending_events(self, limit: int) -> Sequence[MemoryEvent]:
        events: Sequence[MemoryEvent] = await self._declared_outbox().pending_events(limit)
        return events

    async def acknowledge_events(self, event_ids: Sequence[str]) -> None:
        await self._declared_outbox().acknowledge_events(event_ids)

    def _declared_outbox(self) -> EventOutboxProvider:
        inner = self._inner
        if not (inner.capabilities().event_outbox and isinstance(inner, EventOutboxProvider)):
            raise MemoryCapabilityUnsupportedError(
                f"provider {self.name} has no event outbox (capability event_outbox)")
        outbox: EventOutboxProvider = inner
        return outbox


class IndexingForwarding(_Forwarding):
    """The indexing outbox (``governed_memory.indexing.IndexingProvider``).

    None of these invalidates: configuring, enqueueing, requeueing and inspecting jobs
    change no record, and the vectors a worker stores arrive after the write by design
    (an entry filled before them is the answer the provider gave at that time; it
    lives until the next write to its scope or its TTL, see ``docs/search-cache.md``).
    """

    def configure_indexing(self, settings: IndexingSettings) -> None:
        self._inner.configure_indexing(settings)

    async def outbox_status(self) -> OutboxStatus:
        status: OutboxStatus = await self._inner.outbox_status()
        return status

    async def index_jobs(self, state: JobState, limit: int) -> Sequence[IndexJob]:
        jobs: Sequence[IndexJob] = await self._inner.index_jobs(state, limit)
        return jobs

    async def process_index_jobs(self, *, worker_id: str, limit: int = 32,
                                 lease_s: float = 60.0) -> WorkerReport:
        report: WorkerReport = await self._inner.process_index_jobs(
            worker_id=worker_id, limit=limit, lease_s=lease_s)
        return report

    async def retry_dead_jobs(self, job_ids: Sequence[str] | None = None) -> int:
        count: int = await self._inner.retry_dead_jobs(job_ids)
        return count

    async def reindex(self, *, cursor: str | None = None, limit: int = 500) -> ReindexPage:
        page: ReindexPage = await self._inner.reindex(cursor=cursor, limit=limit)
        return page


class ReplayForwarding(_Forwarding):
    """Replay of stored retrieval snapshots (``governed_memory.replay``): reads of what
    the provider stored, never of the cache."""

    async def snapshot_header(self, snapshot_id: str, tenant_id: str) -> SnapshotHeader:
        header: SnapshotHeader = await self._inner.snapshot_header(snapshot_id, tenant_id)
        return header

    async def replay(self, request: ReplayRequest, ctx: OperationContext) -> ReplayResult:
        result: ReplayResult = await self._inner.replay(request, ctx)
        return result

    async def record_snapshot(self, request: SearchRequest, ctx: OperationContext,
                              result: SearchResult) -> str | None:
        """A wrapper further out (another cache) records a hit's snapshot through this
        one, in the provider that stores snapshots."""
        recorder = getattr(self._inner, "record_snapshot", None)
        if recorder is None:
            raise MemoryCapabilityUnsupportedError(
                f"provider {self.name} cannot record a retrieval snapshot")
        recorded: str | None = await recorder(request, ctx, result)
        return recorded


class SnapshotKeepingForwarding(_Forwarding):
    """Retention of retrieval snapshots (``governed_memory.maintenance``): snapshots are
    what replay reads, never a search answer, so removing old ones invalidates nothing."""

    async def purge_snapshots(self, *, limit: int) -> int:
        removed: int = await self._inner.purge_snapshots(limit=limit)
        return removed


FORWARDINGS: Final[tuple[tuple[type, type[_Forwarding]], ...]] = (
    (ReviewingProvider, ReviewForwarding),
    (UsageReportingProvider, UsageForwarding),
    (IndexingProvider, IndexingForwarding),
    (ReplayingProvider, ReplayForwarding),
    (SnapshotKeeping, SnapshotKeepingForwarding),
)
"""(protocol, mixin): the wrapper gets the mixin exactly when the inner provider
implements the protocol (``OutboxForwarding`` is part of every wrapper)."""


def forwardings_for(inner: object) -> tuple[type[_Forwarding], ...]:
    return tuple(mixin for protocol, mixin in FORWARDINGS if isinstance(inner, protocol))


_variants: dict[tuple[type, ...], type] = {}


def variant_for(cls: type[T], inner: object) -> type[T]:
    """``cls`` with the forwarding mixins ``inner`` calls for, one class per combination
    (a wrapper's ``__new__`` instantiates it), named ``Wrapper[review+usage]``."""
    mixins = tuple(mixin for mixin in forwardings_for(inner) if not issubclass(cls, mixin))
    if not mixins:
        return cls
    key = (cls, *mixins)
    variant = _variants.get(key)
    if variant is None:
        label = "+".join(mixin.__name__.removesuffix("Forwarding").lower() for mixin in mixins)
        variant = type(f"{cls.__name__}[{label}]", (cls, *mixins),
                       {"__module__": cls.__module__,
                        "__qualname__": f"{cls.__qualname__}[{label}]"})
        _variants[key] = variant
    return variant
