"""``NativeMemoryProvider``: the provider semantics, written once over a storage port.

Every rule a caller can observe (idempotency replay, compare-and-set, key ownership,
expiry, tombstones, erasure receipts) is kept by the provider, not by a backend, so each
backend stays a dumb but transactional row store and they all behave alike. This class
is the table of contents: it wires the pieces and hands each operation to the object
that keeps its rules:

- :mod:`units`: every unit of work and its bookkeeping (events, idempotency, copies);
- :mod:`writes`: add, update, delete; :mod:`review`: the review queue;
- :mod:`searching`: search; :mod:`replaying`: retrieval snapshots and replay;
- :mod:`erasing`: a scope, a user, or what expired;
- :mod:`event_outbox`: committed events until the sinks acknowledge them;
- :mod:`retrieval.indexer`: vectors, the indexing outbox and its worker;
- :mod:`extraction`: the extraction queue (turns whose facts a worker extracts later).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Final

import attrs
from governed_memory.capabilities import Capabilities, HealthStatus
from governed_memory.clock import Clock
from governed_memory.errors import MemoryNotFoundError
from governed_memory.events import MemoryEvent
from governed_memory.extraction_jobs import ExtractionJobStore
from governed_memory.indexing import (
    IndexingProvider,
    IndexingSettings,
    IndexJob,
    JobState,
    OutboxStatus,
    ReindexPage,
    WorkerReport,
)
from governed_memory.maintenance import ExpiredPurge, PurgeExpiredAllRequest
from governed_memory.operation_context import OperationContext
from governed_memory.outbox import EventOutboxProvider
from governed_memory.provider import ReviewingProvider
from governed_memory.rates import ProcessRateWindows, RateWindows
from governed_memory.records import (
    CleanupPage,
    DeleteResult,
    ErasureReceipt,
    MemoryRecord,
    MemoryVersion,
    Page,
    SearchResult,
)
from governed_memory.replay import ReplayRequest, ReplayResult, SnapshotHeader, SnapshotReplay
from governed_memory.requests import (
    AddRequest,
    ApproveRequest,
    DeleteAllRequest,
    DeleteRequest,
    DeleteUserRequest,
    GetRequest,
    HistoryRequest,
    ListPendingRequest,
    ListRequest,
    PurgeExpiredRequest,
    RejectRequest,
    SearchRequest,
    UpdateRequest,
)
from governed_memory.scope_revisions import ScopeRevisions
from governed_memory.usage import Usage, UsageMeter, UsageQuery

from governed_memory_native.config import IndexingConfig
from governed_memory_native.erasing import NativeErasure
from governed_memory_native.event_outbox import NativeEventOutbox
from governed_memory_native.extraction.memory import MemoryExtractionJobs
from governed_memory_native.extraction.queue import ClosableJobStore, NativeExtractionJobs
from governed_memory_native.replaying import NativeReplay
from governed_memory_native.retrieval.indexer import Indexer, NativeIndexing
from governed_memory_native.retrieval.merger import LexicalMerger
from governed_memory_native.retrieval.numeric import require_numpy
from governed_memory_native.retrieval.ranking.pool import RankingPool, default_processes
from governed_memory_native.retrieval.vector_engines import faiss_module
from governed_memory_native.retrieval.vector_index import VectorIndexes
from governed_memory_native.review import NativeReview
from governed_memory_native.searching import NativeSearch
from governed_memory_native.storage.copies import detach_version
from governed_memory_native.storage.port import ReadTransaction, StorageBackend
from governed_memory_native.storage.revisions import StoredScopeRevisions
from governed_memory_native.units import Units
from governed_memory_native.writes import RecordWrites

logger = logging.getLogger("governed_memory_native")

NATIVE_FEATURES: Final = {
    "compare_and_set": True, "idempotency": True, "history": True, "soft_delete": True,
    "hard_delete": True, "lexical_search": True, "metadata_filters": True, "expiry": True,
    "purge_expired": True, "purge_expired_all": True, "delete_all": True,
    "delete_user": True, "review": True, "dedup": True, "scope_revisions": True,
}
"""What the provider core implements over any backend; the backend adds what depends on
the storage (durable, transactional, multi_process, usage, event_outbox)."""


class NativeMemoryProvider:
    """The built-in provider; ``backend`` decides where (and how durably) data lives."""

    name = "native"

    def __init__(self, backend: StorageBackend, clock: Clock,
                 indexing: IndexingConfig | None = None,
                 rate_windows: RateWindows | None = None,
                 extraction_jobs: ClosableJobStore | None = None) -> None:
        self._backend = backend
        self._clock = clock
        self._config = config = indexing or IndexingConfig()
        # Write-rate windows beside the backend's storage (sqlite.rates, postgres.rates;
        # the factory picks them), so every process sharing it counts alike.
        self._rate_windows: RateWindows = rate_windows or ProcessRateWindows()
        self._events = NativeEventOutbox(backend, self._require_open)
        self._units = units = Units(backend, self._events)
        self._indexer = Indexer(backend, clock, config)
        self._indexing = NativeIndexing(self._indexer, self._require_open)
        self._replay = NativeReplay(units, self._indexer, config, clock)
        self._search = NativeSearch(units, self._indexer, self._replay, config)
        self._writes = RecordWrites(units, self._indexer, self._search)
        self._review = NativeReview(units)
        self._erasure = NativeErasure(units, self._replay, clock)
        # Full lexical deltas (SQLite) merged in the background; None for other backends.
        self._merger = LexicalMerger.attach(backend, config.lexical_delta_max)
        self._revisions = StoredScopeRevisions(backend, self._require_open)
        # The extraction queue beside the backend's storage (extraction.sqlite,
        # extraction.postgres; the factory picks it), in this process by default.
        self._extraction_jobs = NativeExtractionJobs(
            extraction_jobs or MemoryExtractionJobs(), self._require_open)

    @property
    def backend(self) -> StorageBackend:
        return self._backend

    def capabilities(self) -> Capabilities:
        # Review lives in the core, over any backend; usage needs the backend's counts;
        # vector search needs an embedder (the profile's [stores.embedder]).
        return attrs.evolve(self._backend.capabilities(), **NATIVE_FEATURES,
                            vector_search=self._indexer.embedder is not None)

    # -- optional features, each its own object --------------------------------------

    @property
    def review(self) -> ReviewingProvider | None:
        return self._review

    @property
    def indexing(self) -> IndexingProvider | None:
        return self._indexing

    @property
    def outbox(self) -> EventOutboxProvider | None:
        return self._events if self._backend.capabilities().event_outbox else None

    @property
    def replay(self) -> SnapshotReplay | None:
        return self._replay

    @property
    def usage_meter(self) -> UsageMeter | None:
        return self if self._backend.capabilities().usage else None

    @property
    def revisions(self) -> ScopeRevisions | None:
        return self._revisions

    @property
    def rate_windows(self) -> RateWindows | None:
        return self._rate_windows

    @property
    def extraction_jobs(self) -> ExtractionJobStore | None:
        return self._extraction_jobs

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        await self._backend.open()
        self._search.start_ranking(default_processes() if self._config.ranking_processes
                                   is None else self._config.ranking_processes)
        self._events.reopened()  # a previous run may have left events undelivered
        self._units.open = True
        if self._indexer.embedder is not None:
            require_numpy()  # vectors need it: say so at start, not at the first write
            if faiss_module() is None:
                logger.warning("%s", self._search.vector_indexes.describe())

    async def close(self) -> None:
        self._units.open = False
        try:
            await self._replay.writer.close()
            await self._events.flush_acks()
        finally:
            if self._merger is not None:
                await self._merger.close()
            await self._search.close()
            try:
                await self._rate_windows.close()
            except Exception as exc:  # the backend still closes
                logger.error("closing the rate windows failed: %s", type(exc).__name__)
            try:
                await self._extraction_jobs.close()
            except Exception as exc:  # the backend still closes
                logger.error("closing the extraction queue failed: %s", type(exc).__name__)
            await self._backend.close()
        embedder = self._indexer.embedder
        if embedder is not None:
            await embedder.close()

    async def health(self) -> HealthStatus:
        if not self._units.open:
            return HealthStatus(ok=False, provider=self.name, detail="not started")
        began = time.perf_counter()
        try:
            detail = await self._backend.check()
        except Exception as exc:  # health reports failure, it never raises
            code = getattr(exc, "code", "error")
            return HealthStatus(ok=False, provider=self.name, detail=f"check failed: {code}",
                                latency_ms=_elapsed_ms(began))
        if self._indexer.embedder is not None:  # which engine ranks vectors, and from when
            detail = f"{detail}; {self._search.vector_indexes.describe()}"
        return HealthStatus(ok=True, provider=self.name, detail=detail,
                            latency_ms=_elapsed_ms(began))

    # -- what benchmarks and tests look at ------------------------------------------------

    @property
    def lexical_merger(self) -> LexicalMerger | None:
        """The background merger of lexical deltas (SQLite)."""
        return self._merger

    @property
    def vector_indexes(self) -> VectorIndexes:
        """The in-process vector indexes (status, counters)."""
        return self._search.vector_indexes

    @property
    def ranking_pool(self) -> RankingPool | None:
        """The worker processes ranking lexical searches, while the provider is open
        and its backend allows them (status, counters)."""
        return self._search.ranking

    # -- the operations (``governed_memory.requests.Operations``) -----------------------

    async def add(self, request: AddRequest, ctx: OperationContext) -> MemoryRecord:
        return await self._writes.add(request, ctx)

    async def update(self, request: UpdateRequest, ctx: OperationContext) -> MemoryRecord:
        return await self._writes.update(request, ctx)

    async def delete(self, request: DeleteRequest, ctx: OperationContext) -> DeleteResult:
        return await self._writes.delete(request, ctx)

    async def search(self, request: SearchRequest, ctx: OperationContext) -> SearchResult:
        return await self._search.search(request, ctx)

    async def delete_all(self, request: DeleteAllRequest, ctx: OperationContext) -> int:
        return await self._erasure.delete_all(request, ctx)

    async def delete_user(self, request: DeleteUserRequest,
                          ctx: OperationContext) -> ErasureReceipt:
        # Queued extractions of the user first (they hold the user's identifiers), so
        # no job of theirs is leased once their memories are being erased.
        await self._extraction_jobs.erase_user(request.tenant_id, request.user_id)
        return await self._erasure.delete_user(request, ctx)

    async def purge_expired(self, request: PurgeExpiredRequest,
                            ctx: OperationContext) -> CleanupPage:
        return await self._erasure.purge_expired(request, ctx)

    async def purge_expired_all(self, request: PurgeExpiredAllRequest,
                                ctx: OperationContext) -> ExpiredPurge:
        return await self._erasure.purge_expired_all(request, ctx)

    async def get(self, request: GetRequest, ctx: OperationContext) -> MemoryRecord:
        self._require_open()
        scope_hash = request.scope.scope_hash
        record_id, key = request.record_id, request.key

        async def unit(tx: ReadTransaction) -> MemoryRecord | None:
            if record_id is not None:
                return await tx.records.get(scope_hash, record_id)
            assert key is not None  # validate() guarantees exactly one
            return await tx.records.by_key(scope_hash, key)

        found = await self._backend.run_read(unit, point=True)
        if found is None or not found.is_visible(ctx.now):
            raise MemoryNotFoundError("no live record with that id or key in this scope")
        return self._units.owned(found)

    async def list(self, request: ListRequest, ctx: OperationContext) -> Page[MemoryRecord]:
        self._require_open()
        scope_hash = request.scope.scope_hash
        return await self._units.id_page(
            "list", scope_hash, request.cursor, request.limit,
            lambda tx, after: tx.records.visible(scope_hash, after, request.limit,
                                                 request.memory_types, ctx.now))

    async def history(
        self, request: HistoryRequest, ctx: OperationContext
    ) -> tuple[MemoryVersion, ...]:
        self._require_open()

        async def unit(tx: ReadTransaction) -> Sequence[MemoryVersion]:
            current = await tx.records.get(request.scope.scope_hash, request.record_id)
            # A tombstone's history stays readable (that is how a soft delete is seen);
            # an expired record is gone for every read, its history included.
            if current is None or current.is_expired(ctx.now):
                raise MemoryNotFoundError("no record with that id in this scope")
            return await tx.versions.of(current.id)

        versions = await self._backend.run_read(unit)
        if not self._backend.shares_records:
            return tuple(versions)
        return tuple(detach_version(version) for version in versions)

    async def usage(self, query: UsageQuery, ctx: OperationContext) -> Usage:
        """Records neither deleted nor expired (pending included) and their content bytes."""
        self._require_open()
        scope_hash = None if query.scope is None else query.scope.scope_hash

        async def unit(tx: ReadTransaction) -> tuple[int, int]:
            return await tx.records.usage(query.tenant_id, scope_hash, ctx.now)

        records, size = await self._backend.run_read(unit)
        return Usage(records=records, bytes=size)

    # -- the features' operations, also callable on the provider itself ------------------

    async def approve(self, request: ApproveRequest, ctx: OperationContext) -> MemoryRecord:
        return await self._review.approve(request, ctx)

    async def reject(self, request: RejectRequest, ctx: OperationContext) -> DeleteResult:
        return await self._review.reject(request, ctx)

    async def list_pending(self, request: ListPendingRequest,
                           ctx: OperationContext) -> Page[MemoryRecord]:
        return await self._review.list_pending(request, ctx)

    async def pending_events(self, limit: int) -> Sequence[MemoryEvent]:
        return await self._events.pending_events(limit)

    async def acknowledge_events(self, event_ids: Sequence[str]) -> None:
        await self._events.acknowledge_events(event_ids)

    def configure_indexing(self, settings: IndexingSettings) -> None:
        self._indexing.configure_indexing(settings)

    @property
    def indexing_settings(self) -> IndexingSettings:
        return self._indexing.indexing_settings

    async def outbox_status(self) -> OutboxStatus:
        return await self._indexing.outbox_status()

    async def index_jobs(self, state: JobState, limit: int) -> Sequence[IndexJob]:
        return await self._indexing.index_jobs(state, limit)

    async def process_index_jobs(self, *, worker_id: str, limit: int = 32,
                                 lease_s: float = 60.0) -> WorkerReport:
        return await self._indexing.process_index_jobs(worker_id=worker_id, limit=limit,
                                                       lease_s=lease_s)

    async def retry_dead_jobs(self, job_ids: Sequence[str] | None = None) -> int:
        return await self._indexing.retry_dead_jobs(job_ids)

    async def reindex(self, *, cursor: str | None = None, limit: int = 500) -> ReindexPage:
        return await self._indexing.reindex(cursor=cursor, limit=limit)

    async def snapshot_header(self, snapshot_id: str, tenant_id: str) -> SnapshotHeader:
        return await self._replay.snapshot_header(snapshot_id, tenant_id)

    async def replay_snapshot(self, request: ReplayRequest,
                              ctx: OperationContext) -> ReplayResult:
        return await self._replay.replay_snapshot(request, ctx)

    async def record_snapshot(self, request: SearchRequest, ctx: OperationContext,
                              result: SearchResult) -> str | None:
        return await self._replay.record_snapshot(request, ctx, result)

    async def purge_snapshots(self, *, limit: int) -> int:
        return await self._replay.purge_snapshots(limit=limit)

    async def flush_snapshots(self) -> None:
        await self._replay.flush_snapshots()

    def _require_open(self) -> None:
        self._units.require_open()


def _elapsed_ms(began: float) -> float:
    return (time.perf_counter() - began) * 1000.0
