"""What a wrapper (the search cache, the read fallback) forwards to its inner provider:
the optional features, and the writes.

Each feature is an accessor on the provider (``review``, ``indexing``, ``outbox``,
``replay``: an object or ``None``), so a wrapper answers each one explicitly. Most are
forwarded as they are: indexing, the event outbox and replay neither change records a
cached page could hold nor need the wrapper. Review does (approving makes a record
searchable, rejecting erases it), so the cache answers ``review`` with itself and bumps
the record's scope after the provider commits; usage (``usage_meter``) is always read
from the provider. Every write, review's included, goes to the inner provider through
the wrapper's ``_write``: the cache invalidates there, the fallback does nothing more.

Why not ``__getattr__``: a delegate that guesses ``(request, ctx)`` for every unknown
name turned ``outbox_status()`` and ``process_index_jobs(worker_id=...)`` into
``TypeError`` (issue 14, defect 9), and made every structural check pass whatever the
inner provider offered.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from governed_memory.capabilities import Capabilities, offered
from governed_memory.maintenance import ExpiredPurge, ExpiredRecordsPurger, PurgeExpiredAllRequest
from governed_memory.operation_context import OperationContext
from governed_memory.provider import MemoryProvider, ReviewingProvider
from governed_memory.records import CleanupPage, DeleteResult, ErasureReceipt, MemoryRecord, Page
from governed_memory.requests import (
    AddRequest,
    ApproveRequest,
    DeleteAllRequest,
    DeleteRequest,
    DeleteUserRequest,
    ListPendingRequest,
    PurgeExpiredRequest,
    RejectRequest,
    UpdateRequest,
)
from governed_memory.usage import Usage, UsageMeter, UsageQuery

if TYPE_CHECKING:
    from governed_memory.extraction_jobs import ExtractionJobStore
    from governed_memory.indexing import IndexingProvider
    from governed_memory.outbox import EventOutboxProvider
    from governed_memory.rates import RateWindows
    from governed_memory.replay import SnapshotReplay
    from governed_memory.scope_revisions import ScopeRevisions

T = TypeVar("T")


class _Forwarding:
    """What every forwarding mixin relies on from its wrapper."""

    _inner: MemoryProvider
    name: str

    if TYPE_CHECKING:
        async def _write(self, operation: str, call: Callable[[], Awaitable[T]],
                         request: Any, ctx: OperationContext) -> T: ...


class ForwardedFeatures(_Forwarding):
    """Capabilities, indexing, the event outbox, replay, scope revisions, rate windows
    and the extraction queue: the inner provider's own."""

    @property
    def inner(self) -> MemoryProvider:
        """The wrapped provider (a fallback's primary)."""
        return self._inner

    def capabilities(self) -> Capabilities:
        return self._inner.capabilities()

    @property
    def indexing(self) -> IndexingProvider | None:
        return self._inner.indexing

    @property
    def outbox(self) -> EventOutboxProvider | None:
        return self._inner.outbox

    @property
    def replay(self) -> SnapshotReplay | None:
        return self._inner.replay

    @property
    def revisions(self) -> ScopeRevisions | None:
        """The inner provider's scope revisions: a page cached above this wrapper is
        checked against the same storage the writes advance."""
        return self._inner.revisions

    @property
    def rate_windows(self) -> RateWindows | None:
        """The inner provider's write-rate windows: rates are counted where its writes
        are, never in a wrapper."""
        return self._inner.rate_windows

    @property
    def extraction_jobs(self) -> ExtractionJobStore | None:
        """The inner provider's extraction queue: its jobs change no record a cached
        page holds (a job's facts are ordinary writes, through the wrapper)."""
        return self._inner.extraction_jobs


class WriteForwarding(_Forwarding):
    """The writes, each on the inner provider through the wrapper's ``_write``."""

    async def add(self, request: AddRequest, ctx: OperationContext) -> MemoryRecord:
        return await self._write("add", lambda: self._inner.add(request, ctx), request, ctx)

    async def update(self, request: UpdateRequest, ctx: OperationContext) -> MemoryRecord:
        return await self._write("update", lambda: self._inner.update(request, ctx), request, ctx)

    async def delete(self, request: DeleteRequest, ctx: OperationContext) -> DeleteResult:
        return await self._write("delete", lambda: self._inner.delete(request, ctx), request, ctx)

    async def delete_all(self, request: DeleteAllRequest, ctx: OperationContext) -> int:
        return await self._write("delete_all", lambda: self._inner.delete_all(request, ctx),
                                 request, ctx)

    async def delete_user(self, request: DeleteUserRequest,
                          ctx: OperationContext) -> ErasureReceipt:
        return await self._write("delete_user",
                                 lambda: self._inner.delete_user(request, ctx), request, ctx)

    async def purge_expired(self, request: PurgeExpiredRequest,
                            ctx: OperationContext) -> CleanupPage:
        return await self._write("purge_expired",
                                 lambda: self._inner.purge_expired(request, ctx), request, ctx)

    async def purge_expired_all(self, request: PurgeExpiredAllRequest,
                                ctx: OperationContext) -> ExpiredPurge:
        """Store-wide: the scopes to invalidate are the ones the result names (the
        request names none). The port sends it only when the inner provider declares
        ``purge_expired_all``, which the wrapper's capabilities forward."""
        inner = cast(ExpiredRecordsPurger, self._inner)
        return await self._write("purge_expired_all",
                                 lambda: inner.purge_expired_all(request, ctx), request, ctx)


class ReviewForwarding(_Forwarding):
    """``review``, through the wrapper's ``_write`` (the cache invalidates there)."""

    @property
    def review(self) -> ReviewingProvider | None:
        return self if self._inner.review is not None else None

    def _reviewer(self) -> ReviewingProvider:
        return offered(self._inner.review, self,
                       "does not support review (capability 'review')")

    async def approve(self, request: ApproveRequest, ctx: OperationContext) -> MemoryRecord:
        review = self._reviewer()
        return await self._write("approve", lambda: review.approve(request, ctx), request, ctx)

    async def reject(self, request: RejectRequest, ctx: OperationContext) -> DeleteResult:
        review = self._reviewer()
        return await self._write("reject", lambda: review.reject(request, ctx), request, ctx)

    async def list_pending(self, request: ListPendingRequest,
                           ctx: OperationContext) -> Page[MemoryRecord]:
        """The review queue is read from the provider, never from cached pages."""
        return await self._reviewer().list_pending(request, ctx)


class UsageForwarding(_Forwarding):
    """``usage_meter``: the inner provider's own meter, so usage is always read from
    the provider (quotas must never see a cached count). ``usage`` on the wrapper reads
    it the same way, for callers holding the wrapper."""

    @property
    def usage_meter(self) -> UsageMeter | None:
        return self._inner.usage_meter

    async def usage(self, query: UsageQuery, ctx: OperationContext) -> Usage:
        meter = offered(self._inner.usage_meter, self, "reports no usage (capability 'usage')")
        return await meter.usage(query, ctx)
