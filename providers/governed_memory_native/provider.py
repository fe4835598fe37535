"""``NativeMemoryProvider``: the provider semantics, written once over a storage port.

Every rule a caller can observe lives here (idempotency replay, compare-and-set, key
ownership, expiry, tombstones, erasure receipts), so each backend stays a dumb but
transactional row store and they all behave alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Final, TypeVar

import attrs
from governed_memory.capabilities import Capabilities, HealthStatus
from governed_memory.clock import Clock
from governed_memory.cursor import decode_cursor, encode_cursor
from governed_memory.errors import (
    GovernedMemoryError,
    MemoryConflictError,
    MemoryNotFoundError,
    MemoryUnavailableError,
    MemoryValidationError,
)
from governed_memory.events import MemoryEvent
from governed_memory.ids import new_revision
from governed_memory.indexing import (
    IndexingProvider,
    IndexingSettings,
    IndexJob,
    JobState,
    OutboxStatus,
    RankingConfig,
    ReindexPage,
    SnapshotMode,
    WorkerReport,
)
from governed_memory.limits import check_metadata_budget
from governed_memory.operation_context import OperationContext
from governed_memory.outbox import EventOutboxProvider, finish_committed_event
from governed_memory.provider import ReviewingProvider
from governed_memory.provider_kit import apply_update as _apply_update
from governed_memory.provider_kit import check_fingerprint as _check_fingerprint
from governed_memory.provider_kit import (
    check_key_holder,
    check_link,
    erased_key_holder,
    new_record,
    stamped_provenance,
)
from governed_memory.provider_kit import check_revision as _check_revision
from governed_memory.provider_kit import idempotency_fingerprint as _fingerprint
from governed_memory.provider_kit import raise_missing as _raise_missing
from governed_memory.rates import ProcessRateWindows, RateWindows
from governed_memory.records import (
    CleanupPage,
    DeleteResult,
    ErasureReceipt,
    IndexState,
    MemoryRecord,
    MemoryVersion,
    Page,
    RecordStatus,
    SearchHit,
    SearchResult,
    SignalScore,
    VersionOperation,
    content_hash,
)
from governed_memory.replay import (
    ReplayRequest,
    ReplayResult,
    SnapshotErasedError,
    SnapshotHeader,
    SnapshotReplay,
)
from governed_memory.requests import (
    AddRequest,
    ApproveRequest,
    DedupMode,
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
from governed_memory.scope import Scope
from governed_memory.scope_revisions import ScopeRevisions
from governed_memory.usage import Usage, UsageMeter, UsageQuery

from governed_memory_native import retrieval
from governed_memory_native.indexer import Indexer
from governed_memory_native.indexing_config import IndexingConfig
from governed_memory_native.lexical_merger import LexicalMerger
from governed_memory_native.numeric import require_numpy
from governed_memory_native.port import (
    IdempotencyEntry,
    ReadTransaction,
    Removal,
    SearchQuery,
    StorageBackend,
    VectorQuery,
    WriteTransaction,
)
from governed_memory_native.ranking_pool import (
    WAKE_CANDIDATES,
    RankableBackend,
    RankingPool,
    RemotePage,
    default_processes,
)
from governed_memory_native.record_copies import detach, detach_version
from governed_memory_native.retrieval_snapshots import header as snapshot_header
from governed_memory_native.retrieval_snapshots import replay as replay_snapshot
from governed_memory_native.retrieval_snapshots import snapshot_body, tombstone
from governed_memory_native.snapshot_writer import (
    PendingSnapshot,
    SnapshotWriter,
    batched_snapshot_id,
    sync_snapshot_id,
)
from governed_memory_native.snapshot_writer import raise_missing as raise_missing_snapshot
from governed_memory_native.snapshot_writer import store as store_snapshots
from governed_memory_native.stored_revisions import StoredScopeRevisions
from governed_memory_native.tokens import query_tokens
from governed_memory_native.vector_engines import faiss_module
from governed_memory_native.vector_index import REFRESH_S, VectorIndexes
from governed_memory_native.vectors import cosine_ranking

T = TypeVar("T")
logger = logging.getLogger("governed_memory_native")

ERASURE_BATCH: Final = 500
"""Records erased per transaction, so erasing a large user never holds the write lock long."""

MAX_EVENTS: Final = 1000
"""Outbox events read per ``pending_events`` call, at most."""

ACK_BATCH: Final = 256
"""Delivered events whose removal from storage may wait for a later write; past this
many they are removed in a write of their own."""


NATIVE_FEATURES: Final = {
    "compare_and_set": True, "idempotency": True, "history": True, "soft_delete": True,
    "hard_delete": True, "lexical_search": True, "metadata_filters": True, "expiry": True,
    "purge_expired": True, "delete_all": True, "delete_user": True, "review": True,
    "dedup": True, "scope_revisions": True,
}
"""What the provider core implements over any backend; the backend adds what depends on
the storage (durable, transactional, multi_process, usage, event_outbox)."""


class NativeMemoryProvider:
    """The built-in provider; ``backend`` decides where (and how durably) data lives."""

    name = "native"

    def __init__(self, backend: StorageBackend, clock: Clock,
                 indexing: IndexingConfig | None = None,
                 rate_windows: RateWindows | None = None) -> None:
        self._backend = backend
        # Write-rate windows beside the backend's storage (rates_sqlite, rates_postgres;
        # the factory picks them), so every process sharing it counts alike.
        self._rate_windows: RateWindows = rate_windows or ProcessRateWindows()
        self._clock = clock
        self._open = False
        self._config = indexing or IndexingConfig()
        self._indexer = Indexer(backend, clock, self._config)
        # The event outbox as this process knows it (see ``pending_events``).
        self._committed: deque[MemoryEvent] = deque()
        self._committed_ids: set[str] = set()
        self._acks: list[str] = []
        self._stored_unknown = True
        self._snapshots = SnapshotWriter(backend)
        # Full lexical deltas (SQLite) merged in the background; None for other backends.
        self._merger = LexicalMerger.attach(backend, self._config.lexical_delta_max)
        # Vector candidates of large scopes (see vector_index); lives in process memory.
        self._vector_indexes = VectorIndexes(self._config)
        self._refresher: asyncio.Task[None] | None = None
        self._revisions = StoredScopeRevisions(backend, self._require_open)
        # Lexical searches ranked in worker processes (see ranking_pool), from start to
        # close where the backend's store can be opened by another process.
        self._ranking: RankingPool | None = None
        self._searching = 0
        """Searches of this provider in flight now (the pool starts only for overlap)."""

    @property
    def backend(self) -> StorageBackend:
        return self._backend

    def capabilities(self) -> Capabilities:
        # Review lives in the core, over any backend; usage needs the backend's counts;
        # vector search needs an embedder (the profile's [stores.embedder]).
        return attrs.evolve(self._backend.capabilities(), **NATIVE_FEATURES,
                            vector_search=self._indexer.embedder is not None)

    # -- optional features: the provider offers every one itself -----------------

    @property
    def review(self) -> ReviewingProvider | None:
        return self

    @property
    def indexing(self) -> IndexingProvider | None:
        return self

    @property
    def outbox(self) -> EventOutboxProvider | None:
        return self if self._backend.capabilities().event_outbox else None

    @property
    def replay(self) -> SnapshotReplay | None:
        return self

    @property
    def usage_meter(self) -> UsageMeter | None:
        return self if self._backend.capabilities().usage else None

    @property
    def revisions(self) -> ScopeRevisions | None:
        return self._revisions

    @property
    def rate_windows(self) -> RateWindows | None:
        return self._rate_windows

    # -- indexing (governed_memory.indexing.IndexingProvider) ---------------------

    def configure_indexing(self, settings: IndexingSettings) -> None:
        """The profile's embedder, indexing mode and ranking; call before ``start``."""
        self._indexer.configure(settings)

    @property
    def indexing_settings(self) -> IndexingSettings:
        """What ``configure_indexing`` set (the profile's embedder, mode, ranking)."""
        return self._indexer.settings

    async def outbox_status(self) -> OutboxStatus:
        self._require_open()
        return await self._indexer.status()

    async def index_jobs(self, state: JobState, limit: int) -> Sequence[IndexJob]:
        self._require_open()
        return tuple(await self._indexer.jobs(state, limit))

    async def process_index_jobs(self, *, worker_id: str, limit: int = 32,
                                 lease_s: float = 60.0) -> WorkerReport:
        self._require_open()
        return await self._indexer.process(worker_id, limit, lease_s)

    async def retry_dead_jobs(self, job_ids: Sequence[str] | None = None) -> int:
        self._require_open()
        return await self._indexer.retry_dead(job_ids)

    async def reindex(self, *, cursor: str | None = None, limit: int = 500) -> ReindexPage:
        self._require_open()
        return await self._indexer.reindex(cursor, limit)

    async def start(self) -> None:
        await self._backend.open()
        processes = (default_processes() if self._config.ranking_processes is None
                     else self._config.ranking_processes)
        if (processes > 0 and isinstance(self._backend, RankableBackend)
                and self._ranking is None):
            self._ranking = RankingPool(self._backend, processes)
        self._stored_unknown = True  # a previous run may have left events undelivered
        self._open = True
        if self._indexer.embedder is not None:
            require_numpy()  # vectors need it: say so at start, not at the first write
            if faiss_module() is None:
                logger.warning("%s", self._vector_indexes.describe())

    @property
    def lexical_merger(self) -> LexicalMerger | None:
        """The background merger of lexical deltas (SQLite), for benchmarks and tests."""
        return self._merger

    @property
    def vector_indexes(self) -> VectorIndexes:
        """The in-process vector indexes (status, counters; benchmarks and tests)."""
        return self._vector_indexes

    @property
    def ranking_pool(self) -> RankingPool | None:
        """The worker processes ranking lexical searches, while the provider is open
        and its backend allows them (status, counters; benchmarks and tests)."""
        return self._ranking

    async def close(self) -> None:
        self._open = False
        try:
            await self._snapshots.close()
            await self._flush_acks()
        finally:
            if self._merger is not None:
                await self._merger.close()
            await self._stop_refresher()
            ranking, self._ranking = self._ranking, None
            if ranking is not None:
                await ranking.close()
            self._vector_indexes.clear()  # no vector stays in process memory after close
            try:
                await self._rate_windows.close()
            except Exception as exc:  # the backend still closes
                logger.error("closing the rate windows failed: %s", type(exc).__name__)
            await self._backend.close()
        embedder = self._indexer.embedder
        if embedder is not None:
            await embedder.close()

    async def health(self) -> HealthStatus:
        if not self._open:
            return HealthStatus(ok=False, provider=self.name, detail="not started")
        began = time.perf_counter()
        try:
            detail = await self._backend.check()
        except Exception as exc:  # health reports failure, it never raises
            code = getattr(exc, "code", "error")
            return HealthStatus(ok=False, provider=self.name, detail=f"check failed: {code}",
                                latency_ms=_elapsed_ms(began))
        if self._indexer.embedder is not None:  # which engine ranks vectors, and from when
            detail = f"{detail}; {self._vector_indexes.describe()}"
        return HealthStatus(ok=True, provider=self.name, detail=detail,
                            latency_ms=_elapsed_ms(began))

    # -- writes -----------------------------------------------------------------

    async def add(self, request: AddRequest, ctx: OperationContext) -> MemoryRecord:
        request.validate()
        self._require_open()
        scope = request.scope
        digest = content_hash(request.content)
        prepared = await self._indexer.prepare(request.content)  # outside the write lock
        similar = (await self._nearest(scope.scope_hash, prepared, ctx.now)
                   if request.dedup is DedupMode.SIMILARITY and prepared is not None
                   else None)

        async def unit(tx: WriteTransaction) -> MemoryRecord:
            replay = await self._replayed_record(tx, scope.scope_hash, request, ctx)
            if replay is not None:
                return replay
            duplicate = await self._duplicate_of(tx, request, digest, similar, ctx)
            if duplicate is not None:
                await self._remember(tx, request, scope, duplicate, ctx)
                return duplicate
            provenance = stamped_provenance(request, ctx)
            if request.supersedes is not None:
                await _require_in_scope(tx, scope.scope_hash, request.supersedes, "supersedes",
                                        ctx.now)
            if request.key is not None:
                holder = await tx.records.by_key(scope.scope_hash, request.key)
                if check_key_holder(holder, ctx.now):
                    await tx.erasure.erase([holder.id])
                    ctx.notes.add(erased_key_holder(holder.id))
            record = new_record(request, ctx, provenance, digest=digest,
                                index_state=self._indexer.state_after_write(None, digest))
            record = self._owned(record)  # nothing the caller holds may alias storage
            await tx.records.insert(record)
            await tx.versions.append(
                MemoryVersion(record, VersionOperation.ADD, ctx.now, ctx.operation_id)
            )
            await self._indexer.after_write(tx, record, None, prepared, ctx.now)
            await self._remember(tx, request, scope, record, ctx)
            return record

        return self._owned(await self._write(ctx, unit, request.scope.tenant_id))

    async def _nearest(self, scope_hash: str, vector: bytes,
                       now: float) -> tuple[str, float] | None:
        """The live record of the scope most similar to ``vector`` and its cosine, read
        before the write (similarity dedup; the write re-checks the record is still
        live)."""
        identity = self._indexer.identity
        if identity is None:
            return None
        filters = SearchQuery(scope_hashes=(scope_hash,), tokens=(), now=now, limit=1,
                              valid_at=now)

        async def unit(tx: ReadTransaction) -> tuple[str, float] | None:
            prepared = await self._vector_indexes.prepare(
                tx, VectorQuery(filters, identity), vector, 1)
            rows = await self._vector_indexes.candidates(tx, prepared)
            ranked = cosine_ranking(vector, rows, identity.dimension, 1)
            return ranked[0] if ranked else None

        return await self._backend.run_read(unit)

    async def _duplicate_of(self, tx: WriteTransaction, request: AddRequest, digest: str,
                            similar: tuple[str, float] | None,
                            ctx: OperationContext) -> MemoryRecord | None:
        """The live record this add would duplicate under the profile's ``[write]
        dedup`` (same key, or both without one), noted for the trail; else ``None``."""
        if request.dedup is DedupMode.OFF:
            return None
        scope_hash = request.scope.scope_hash
        found = await tx.records.canonical(scope_hash, digest, request.key, ctx.now)
        reason = "same content"
        if found is None and similar is not None and similar[1] >= request.dedup_threshold:
            candidate = await tx.records.get(scope_hash, similar[0])
            if candidate is not None and candidate.is_visible(ctx.now):
                found, reason = candidate, f"similarity {similar[1]:.3f}"
        if found is None or found.key != request.key:
            return None
        ctx.notes.add(f"deduplicated: {reason} as record {found.id}")
        return self._owned(found)

    async def list_pending(self, request: ListPendingRequest,
                           ctx: OperationContext) -> Page[MemoryRecord]:
        """The review queue of one scope: records held as ``pending_review``."""
        request.validate()
        self._require_open()
        scope_hash = request.scope.scope_hash
        return await self._id_page(
            "pending", scope_hash, request.cursor, request.limit,
            lambda tx, after: tx.records.pending(scope_hash, after, request.limit, ctx.now))

    async def update(self, request: UpdateRequest, ctx: OperationContext) -> MemoryRecord:
        request.validate()
        self._require_open()
        scope_hash = request.scope.scope_hash
        prepared = await self._indexer.prepare(request.content)  # outside the write lock

        async def unit(tx: WriteTransaction) -> MemoryRecord:
            replay = await self._replayed_record(tx, scope_hash, request, ctx)
            if replay is not None:
                return replay
            current = await tx.records.get(scope_hash, request.record_id)
            if current is None or not current.is_visible(ctx.now):
                _raise_missing(request.expected_revision)
            _check_revision(current, request.expected_revision)
            if request.superseded_by is not None:
                await _require_in_scope(tx, scope_hash, request.superseded_by, "superseded_by",
                                        ctx.now)
            updated = _apply_update(current, request, ctx.now)
            updated = self._owned(attrs.evolve(
                updated, index_state=self._indexer.state_after_write(current,
                                                                     updated.content_hash)))
            # The request alone cannot see the stored provenance that shares the budget.
            check_metadata_budget(updated.metadata, updated.provenance.as_dict())
            await _commit_version(tx, current, updated, VersionOperation.UPDATE, ctx)
            await self._indexer.after_write(tx, updated, current, prepared, ctx.now)
            await self._remember(tx, request, request.scope, updated, ctx)
            return updated

        return self._owned(await self._write(ctx, unit, request.scope.tenant_id))

    async def delete(self, request: DeleteRequest, ctx: OperationContext) -> DeleteResult:
        request.validate()
        self._require_open()
        scope_hash = request.scope.scope_hash

        async def unit(tx: WriteTransaction) -> DeleteResult:
            if request.idempotency_key is not None:
                entry = await tx.idempotency.get(scope_hash, request.operation.value,
                                             request.idempotency_key)
                if entry is not None:
                    _check_fingerprint(entry, _fingerprint(ctx, request))
                    return DeleteResult(entry.record_id, scope_hash, entry.hard,
                                        entry.version, entry.revision)
            current = await tx.records.get(scope_hash, request.record_id)
            # A tombstone or an expired record stays erasable (a hard delete removes it for
            # good), but a soft delete treats both as gone, exactly like update does.
            if current is None or (not request.hard and (
                    current.status is RecordStatus.DELETED or current.is_expired(ctx.now))):
                _raise_missing(request.expected_revision)
            _check_revision(current, request.expected_revision)
            if request.hard:
                # Keep the record's idempotency entries as tombstones (ids and hashes, no
                # content): a late retry of the add must not quietly write it back.
                await tx.erasure.erase([current.id], tombstone_idempotency=True)
                result = DeleteResult(current.id, scope_hash, hard=True)
            else:
                tombstone = attrs.evolve(
                    current, status=RecordStatus.DELETED, version=current.version + 1,
                    revision=new_revision(), updated_at=ctx.now,
                    index_state=IndexState.NOT_INDEXED,
                )
                await _commit_version(tx, current, tombstone, VersionOperation.DELETE, ctx)
                await self._indexer.after_soft_delete(tx, tombstone, ctx.now)
                result = DeleteResult(current.id, scope_hash, hard=False,
                                      version=tombstone.version, revision=tombstone.revision)
            if request.idempotency_key is not None:
                await tx.idempotency.put(IdempotencyEntry(
                    scope_hash=scope_hash, operation=request.operation.value,
                    key=request.idempotency_key, fingerprint=_fingerprint(ctx, request),
                    record_id=result.record_id, tenant_id=request.scope.tenant_id,
                    user_id=request.scope.user_id, created_at=ctx.now,
                    version=result.version, revision=result.revision, hard=result.hard,
                ))
            return result

        return await self._write(ctx, unit, request.scope.tenant_id)

    # -- review -----------------------------------------------------------------

    async def approve(self, request: ApproveRequest, ctx: OperationContext) -> MemoryRecord:
        """A pending record becomes active as a new version (history says ``approve``)."""
        request.validate()
        self._require_open()
        scope_hash = request.scope.scope_hash

        async def unit(tx: WriteTransaction) -> MemoryRecord:
            replay = await self._replayed_record(tx, scope_hash, request, ctx)
            if replay is not None:
                return replay
            current = await _pending(tx, scope_hash, request, ctx)
            approved = self._owned(attrs.evolve(
                current, status=RecordStatus.ACTIVE, version=current.version + 1,
                revision=new_revision(), updated_at=ctx.now,
            ))
            await _commit_version(tx, current, approved, VersionOperation.APPROVE, ctx)
            await self._remember(tx, request, request.scope, approved, ctx)
            return approved

        return self._owned(await self._write(ctx, unit, request.scope.tenant_id))

    async def reject(self, request: RejectRequest, ctx: OperationContext) -> DeleteResult:
        """A pending record is erased with its history: it was never accepted. Its
        idempotency entries stay as tombstones, so a late retry of the add that wrote it
        is refused instead of writing it again."""
        request.validate()
        self._require_open()
        scope_hash = request.scope.scope_hash

        async def unit(tx: WriteTransaction) -> DeleteResult:
            if request.idempotency_key is not None:
                entry = await tx.idempotency.get(scope_hash, request.operation.value,
                                             request.idempotency_key)
                if entry is not None:
                    _check_fingerprint(entry, _fingerprint(ctx, request))
                    return DeleteResult(entry.record_id, scope_hash, hard=True)
            current = await _pending(tx, scope_hash, request, ctx)
            await tx.erasure.erase([current.id], tombstone_idempotency=True)
            if request.idempotency_key is not None:
                await tx.idempotency.put(IdempotencyEntry(
                    scope_hash=scope_hash, operation=request.operation.value,
                    key=request.idempotency_key, fingerprint=_fingerprint(ctx, request),
                    record_id=current.id, tenant_id=request.scope.tenant_id,
                    user_id=request.scope.user_id, created_at=ctx.now, hard=True,
                ))
            return DeleteResult(current.id, scope_hash, hard=True)

        return await self._write(ctx, unit, request.scope.tenant_id)

    async def usage(self, query: UsageQuery, ctx: OperationContext) -> Usage:
        """Records neither deleted nor expired (pending included) and their content bytes."""
        self._require_open()
        scope_hash = None if query.scope is None else query.scope.scope_hash

        async def unit(tx: ReadTransaction) -> tuple[int, int]:
            return await tx.records.usage(query.tenant_id, scope_hash, ctx.now)

        records, size = await self._backend.run_read(unit)
        return Usage(records=records, bytes=size)

    # -- event outbox -----------------------------------------------------------

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
        # Removal from storage rides along with the next write (sinks deduplicate by
        # event id, so a crash before then only means a second delivery).
        self._acks.extend(event_ids)
        if len(self._acks) >= ACK_BATCH:
            await self._flush_acks()

    async def _flush_acks(self) -> None:
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

    # -- reads ------------------------------------------------------------------

    async def get(self, request: GetRequest, ctx: OperationContext) -> MemoryRecord:
        request.validate()
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
        return self._owned(found)

    async def list(self, request: ListRequest, ctx: OperationContext) -> Page[MemoryRecord]:
        request.validate()
        self._require_open()
        scope_hash = request.scope.scope_hash
        return await self._id_page(
            "list", scope_hash, request.cursor, request.limit,
            lambda tx, after: tx.records.visible(scope_hash, after, request.limit,
                                                 request.memory_types, ctx.now))

    async def _id_page(self, kind: str, scope_hash: str, cursor: str | None, limit: int,
                       read: Callable[[ReadTransaction, str | None],
                                      Awaitable[Sequence[MemoryRecord]]],
                       ) -> Page[MemoryRecord]:
        """One page of a scope's records by id in one read unit, its cursor bound to the
        page's kind and scope (a cursor of another listing or scope is refused)."""
        after = decode_cursor(cursor, kind, scope_hash) if cursor is not None else None

        async def unit(tx: ReadTransaction) -> Sequence[MemoryRecord]:
            return await read(tx, after)

        items = tuple(self._owned(row) for row in await self._backend.run_read(unit))
        next_cursor = (encode_cursor(kind, scope_hash, items[-1].id)
                       if len(items) == limit else None)
        return Page(items=items, next_cursor=next_cursor)

    async def search(self, request: SearchRequest, ctx: OperationContext) -> SearchResult:
        self._searching += 1
        try:
            return await self._search(request, ctx)
        finally:
            self._searching -= 1

    async def _search(self, request: SearchRequest, ctx: OperationContext) -> SearchResult:
        """Hard filters in storage, lexical and vector candidates, fusion, a snapshot.

        Every filter (scopes, status, expiry, validity at ``ctx.now``, types, entities,
        metadata) is applied by the backend before any candidate is ranked. A profile
        with only the lexical mode and no recency or importance weight ranks by BM25
        alone (the score is the BM25 score); otherwise :mod:`retrieval` fuses the
        signals. The search is then stored as a retrieval snapshot for ``replay``.
        """
        request.validate()
        self._require_open()
        ranking = self._ranking_of(request)
        tokens = query_tokens(request.query)
        identity = self._indexer.identity
        use_vectors = "vector" in ranking.modes and identity is not None
        query_vector = None
        degraded: list[str] = []
        if use_vectors:
            try:  # outside any transaction: a model call must not hold storage
                query_vector = (await self._indexer.embed([request.query]))[0]
            except MemoryUnavailableError:
                degraded.append("vector")  # lexical results still answer the search
        legacy = retrieval.lexical_only(ranking)
        moment = ctx.now if request.as_of is None else request.as_of
        since, before = request.event_window()
        filters = SearchQuery(
            scope_hashes=tuple(dict.fromkeys(scope.scope_hash for scope in request.scopes)),
            tokens=tokens, now=ctx.now,
            limit=request.limit if legacy else retrieval.pool_size(request.limit),
            memory_types=request.memory_types, entity_ids=request.entity_ids,
            metadata_filter=dict(request.metadata_filter), valid_at=moment,
            occurred_since=since, occurred_before=before,
        )

        lexical_on = bool(tokens) and "lexical" in ranking.modes
        tenant_id = request.scopes[0].tenant_id
        pool = self._ranking
        remote: RemotePage | None = None
        if lexical_on and pool is not None and pool.ready:
            # Ranked in a worker process (see ranking_pool); with vectors, the worker
            # also reads the revisions its snapshot holds, for the unit to compare.
            remote = await pool.search(filters, tenant_id,
                                       revisions=query_vector is not None)

        async def unit(tx: ReadTransaction) -> tuple[list[retrieval.Fused],
                                                     dict[str, MemoryRecord], int, bool]:
            # Runs on a storage thread where the backend has one: the vector math too
            # stays off the event loop.
            stale = False
            lexical: list[tuple[str, float]] = []
            vector: list[tuple[str, float]] = []
            records: dict[str, MemoryRecord] = {}
            candidates = 0
            prepared = None
            if query_vector is not None and identity is not None:
                # Large scopes' indexes are brought current and their scans started
                # first: a scan runs on its own thread while the lexical search runs.
                prepared = await self._vector_indexes.prepare(
                    tx, VectorQuery(filters, identity), query_vector, filters.limit)
            if lexical_on:
                page = None if remote is None else remote.page
                if remote is not None and remote.revisions is not None:
                    seen = await tx.revisions.read(tenant_id, filters.scope_hashes,
                                                   filters.now)
                    if seen.revisions != remote.revisions:  # another snapshot: rank here
                        page, stale = None, True
                if page is None:
                    page = await tx.postings.search(filters)
                candidates = page.candidates
                lexical = [(match.record.id, match.score) for match in page.matches]
                records.update((match.record.id, match.record) for match in page.matches)
            if prepared is not None and query_vector is not None and identity is not None:
                # Large scopes through their in-process index, the others exactly; the
                # rows hold every candidate exact search would rank in the pool.
                rows = await self._vector_indexes.candidates(tx, prepared)
                ranked = cosine_ranking(query_vector, rows, identity.dimension, filters.limit)
                vector = [(record_id, score) for record_id, score in ranked if score > 0]
            if legacy:
                fused = _lexical_fused(lexical, request.limit)
            else:
                if retrieval.needs_records(ranking):
                    await _load(tx, filters, records, (record_id for record_id, _ in vector))
                fused = retrieval.fuse(ranking, lexical=lexical, vector=vector,
                                       records=records, now=moment, limit=request.limit)
                await _load(tx, filters, records, (item.record_id for item in fused))
                candidates = len({*dict(lexical), *dict(vector)}) + max(
                    0, candidates - len(lexical))
            return fused, records, candidates, stale

        if remote is not None and remote.revisions is None and legacy:
            # The worker's transaction was the whole search: nothing is left to read.
            page = remote.page
            fused = _lexical_fused([(m.record.id, m.score) for m in page.matches],
                                   request.limit)
            records = {match.record.id: match.record for match in page.matches}
            candidates = page.candidates
        else:
            fused, records, candidates, stale = await self._backend.run_read(unit)
            if pool is not None:
                if stale:
                    pool.stats.stale += 1
                elif (remote is None and lexical_on and candidates >= WAKE_CANDIDATES
                      and self._searching > 1):
                    # Searches here are worth ranking in worker processes, and they
                    # overlap (a one-shot command never starts a pool it cannot use).
                    pool.wake()
        if query_vector is not None:
            self._start_refresher()
        fused = [item for item in fused if item.record_id in records]
        hits = [item.hit(self._owned(records[item.record_id]), rank)
                for rank, item in enumerate(fused, start=1)]
        signals = [name for name, used in (("lexical", bool(tokens) and "lexical" in
                                            ranking.modes),
                                           ("vector", query_vector is not None)) if used]
        try:
            snapshot_id = await self._store_snapshot(
                request, ctx, ranking, signals, degraded, hits, candidates)
        except MemoryUnavailableError:
            # Storage is locked or down for writes: the search still answers, without a
            # snapshot to replay (``snapshot_id`` says so), rather than failing a read.
            logger.warning("retrieval snapshot not stored: storage unavailable for writes")
            snapshot_id = None
        return SearchResult(hits=tuple(hits), candidates=candidates, snapshot_id=snapshot_id)

    def _start_refresher(self) -> None:
        """While vector indexes are held, a task catches them up every ``REFRESH_S``, so
        erasures (by any process) leave this process's memory even in scopes nobody
        searches again; it ends when none is held."""
        if (self._open and self._vector_indexes.held()
                and (self._refresher is None or self._refresher.done())):
            self._refresher = asyncio.get_running_loop().create_task(
                self._refresh_vector_indexes(), name="gm-vector-index-refresh")

    async def _refresh_vector_indexes(self) -> None:
        while self._open and self._vector_indexes.held():
            await asyncio.sleep(REFRESH_S)
            try:
                await self._backend.run_read(self._vector_indexes.refresh)
            except GovernedMemoryError as exc:  # storage busy or gone: the next round retries
                logger.debug("vector index refresh failed: %s", exc.code)
            except Exception:
                logger.exception("vector index refresh failed")

    async def _stop_refresher(self) -> None:
        task, self._refresher = self._refresher, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _store_snapshot(self, request: SearchRequest, ctx: OperationContext,
                              ranking: RankingConfig, signals: Sequence[str],
                              degraded: Sequence[str], hits: Sequence[SearchHit],
                              candidates: int) -> str | None:
        """Store what the search returned, as the profile's ``[retrieval] snapshots``
        says: not at all, queued for the next batch (the default), or committed now."""
        mode = self._indexer.settings.snapshots
        if mode is SnapshotMode.OFF:
            return None
        tenant_id = request.scopes[0].tenant_id
        snapshot_id = (sync_snapshot_id() if mode is SnapshotMode.SYNC
                       else batched_snapshot_id(tenant_id, ctx.now))
        identity = self._indexer.identity
        body = snapshot_body(snapshot_id, request, ctx, ranking,
                             None if identity is None else str(identity), signals, hits,
                             candidates)
        if degraded:
            body["degraded"] = [*degraded]
        subjects = sorted({scope.user_id for scope in request.scopes
                           if scope.user_id is not None})
        item = PendingSnapshot(snapshot_id, tenant_id, body, ctx.now, subjects)
        if mode is SnapshotMode.BATCHED:
            self._snapshots.submit(item)
            return snapshot_id

        async def unit(tx: WriteTransaction) -> None:
            await store_snapshots(tx, [item])

        await self._backend.run_write(unit)
        return snapshot_id

    async def record_snapshot(self, request: SearchRequest, ctx: OperationContext,
                              result: SearchResult) -> str | None:
        """A retrieval snapshot of ``ctx``'s own for an answer it did not compute (a
        search-cache hit, ``governed_memory.cache.snapshots``): the hits and candidates
        of ``result``, this operation's ids and revisions. ``None`` when snapshots are
        off."""
        self._require_open()
        used = {signal.name for hit in result.hits for signal in hit.explanation.signals}
        signals = [name for name, signal in (("lexical", retrieval.LEXICAL),
                                             ("vector", retrieval.VECTOR)) if signal in used]
        return await self._store_snapshot(request, ctx, self._ranking_of(request),
                                          signals, [], list(result.hits), result.candidates)

    def _ranking_of(self, request: SearchRequest) -> RankingConfig:
        """The profile's ranking with the search's own options applied (what its
        snapshot records); vectors asked of a provider without an embedder are refused,
        not silently dropped."""
        ranking = self._indexer.settings.ranking
        if request.ranking is None:
            return ranking
        applied = request.ranking.apply(ranking)
        if "vector" in applied.modes and self._indexer.identity is None:
            raise MemoryValidationError("vector search needs an embedder (a profile's "
                                        "[stores.embedder])", field="ranking.modes")
        return applied

    async def purge_snapshots(self, *, limit: int) -> int:
        """Remove up to ``limit`` retrieval snapshots older than ``snapshot_retention_s``
        (the governed maintenance round, ``governed_memory.maintenance``)."""
        self._require_open()
        before = self._clock.now() - self._config.snapshot_retention_s

        async def unit(tx: WriteTransaction) -> int:
            return await tx.snapshots.purge(before, limit)

        return await self._backend.run_write(unit)

    async def flush_snapshots(self) -> None:
        """Store every retrieval snapshot still queued for a batch (tools, tests)."""
        await self._snapshots.flush()

    async def _stored_snapshot(self, snapshot_id: str, tenant_id: str
                               ) -> Mapping[str, Any]:
        """The stored body (batches still queued are written first), or the error that
        says why there is none: lost in a crash, or not found."""
        await self._snapshots.flush()

        async def unit(tx: ReadTransaction) -> Mapping[str, Any] | None:
            return await tx.snapshots.get(snapshot_id)

        body = await self._backend.run_read(unit, point=True)
        if body is None or body.get("tenant_id") != tenant_id:
            raise_missing_snapshot(snapshot_id, tenant_id, self._clock.now(),
                                   self._config.snapshot_retention_s)
        assert body is not None
        return body

    # -- replay (governed_memory.replay.SnapshotReplay) -------------------------

    async def snapshot_header(self, snapshot_id: str, tenant_id: str) -> SnapshotHeader:
        """The snapshot's scopes, for the manager to authorize a replay."""
        self._require_open()
        return snapshot_header(snapshot_id, await self._stored_snapshot(snapshot_id, tenant_id),
                               tenant_id)

    async def replay_snapshot(self, request: ReplayRequest,
                              ctx: OperationContext) -> ReplayResult:
        request.validate()
        self._require_open()
        tenant_id = request.scopes[0].tenant_id
        await self._stored_snapshot(request.snapshot_id, tenant_id)  # lost or missing: say so

        async def unit(tx: ReadTransaction) -> ReplayResult:
            body = await tx.snapshots.get(request.snapshot_id)
            found = snapshot_header(request.snapshot_id, body, tenant_id)
            if found.erased:
                raise SnapshotErasedError("the snapshot named a user who has been erased")
            if {s.scope_hash for s in found.scopes} != {s.scope_hash for s in request.scopes}:
                raise MemoryConflictError("the snapshot's scopes are not the ones authorized")
            assert body is not None  # snapshot_header raises for a missing one
            return await replay_snapshot(tx, request.snapshot_id, body)

        return await self._backend.run_read(unit)

    async def history(
        self, request: HistoryRequest, ctx: OperationContext
    ) -> tuple[MemoryVersion, ...]:
        request.validate()
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

    # -- maintenance ------------------------------------------------------------

    async def delete_all(self, request: DeleteAllRequest, ctx: OperationContext) -> int:
        request.validate()
        self._require_open()
        scope_hash = request.scope.scope_hash

        async def unit(tx: WriteTransaction) -> int:
            removed = Removal()
            while ids := await tx.records.ids_in_scope(scope_hash, None, ERASURE_BATCH):
                removed += await tx.erasure.erase(ids)
            removed += await tx.idempotency.erase(scope_hash=scope_hash)
            return removed.records

        return await self._write(ctx, unit, request.scope.tenant_id)

    async def delete_user(
        self, request: DeleteUserRequest, ctx: OperationContext
    ) -> ErasureReceipt:
        request.validate()
        self._require_open()
        await self._snapshots.flush()  # queued snapshots naming the user are erased too

        async def unit(tx: WriteTransaction) -> ErasureReceipt | None:
            ids = await tx.records.ids_of_user(request.tenant_id, request.user_id,
                                              ERASURE_BATCH)
            batch = await tx.erasure.erase(ids) if ids else Removal()
            if len(ids) == ERASURE_BATCH:
                await tx.erasure.add_progress(request.tenant_id, request.user_id,
                                              batch, ctx.now)
                return None
            removed, began = await tx.erasure.take_progress(request.tenant_id,
                                                            request.user_id)
            removed += batch
            removed += await tx.idempotency.erase(
                tenant_user=(request.tenant_id, request.user_id)
            )
            snapshots = await tx.snapshots.erase_of_user(
                request.tenant_id, request.user_id,
                tombstone(request.tenant_id, ctx.now, ctx.operation_id))
            # Every search cache of the tenant, in any process, is stale from this
            # commit on: the user's records may have been in any of its scopes.
            await tx.revisions.advance_epoch(request.tenant_id,
                                             sorted(removed.scope_hashes))
            return ErasureReceipt(
                request_id=ctx.operation_id, tenant_id=request.tenant_id,
                user_id=request.user_id,
                counts={"records": removed.records, "versions": removed.versions,
                        "index_entries": removed.index_entries,
                        "idempotency_entries": removed.idempotency_entries,
                        "retrieval_snapshots": snapshots},
                scope_hashes=tuple(sorted(removed.scope_hashes)),
                started_at=ctx.now if began is None else min(began, ctx.now),
                completed_at=max(ctx.now, self._clock.now()),
            ).sealed()

        while True:
            # Batches commit one by one. Each but the last adds what it removed to the
            # user's stored progress in its own transaction; the last (fewer than a full
            # batch left) takes that progress, erases the idempotency entries and stores
            # the receipt's event. So the receipt accounts for every committed batch,
            # also those of an earlier run that was interrupted, and a user of fewer
            # than ERASURE_BATCH records is erased atomically with its event.
            receipt = await self._write(ctx, unit, request.tenant_id)
            if receipt is None:
                continue
            # Erased rows were zeroed in the database file at commit; copies of their
            # bytes in older WAL frames go only with a checkpoint that truncates the WAL.
            if not await self._backend.scrub():
                raise MemoryUnavailableError(
                    "the user's records are erased, but another connection keeps the "
                    "write-ahead log in use, so erased bytes may remain in it; retry "
                    "delete_user to finish")
            return receipt

    async def purge_expired(
        self, request: PurgeExpiredRequest, ctx: OperationContext
    ) -> CleanupPage:
        """Erase expired records of one scope, a page at a time.

        Unlike a hard delete, purging leaves no idempotency tombstones: an expired record
        is gone by design rather than by anyone's request, so a retry arriving after its
        expiry is a new write, and purging is what keeps the idempotency table bounded
        for expiring data.
        """
        request.validate()
        self._require_open()
        scope_hash = request.scope.scope_hash
        after = (decode_cursor(request.after, "purge", scope_hash, field="after")
                 if request.after is not None else None)

        async def unit(tx: WriteTransaction) -> CleanupPage:
            inspected = await tx.records.scan(scope_hash, after, request.limit)
            expired = [record.id for record in inspected if record.is_expired(ctx.now)]
            removed = await tx.erasure.erase(expired) if expired else Removal()
            cursor = (encode_cursor("purge", scope_hash, inspected[-1].id)
                      if len(inspected) == request.limit else None)
            return CleanupPage(deleted=removed.records, next_cursor=cursor)

        return await self._write(ctx, unit, request.scope.tenant_id)

    # -- helpers ----------------------------------------------------------------

    async def _write(self, ctx: OperationContext,
                     body: Callable[[WriteTransaction], Awaitable[T]],
                     tenant_id: str | None) -> T:
        """Run one write as a unit of work, with its bookkeeping in the same transaction.

        Delivered events waiting to be removed from storage are removed here, and the
        write's ``committed`` event (when the activity port drafted one) is completed
        from the result and stored, so it commits exactly when the write does: one
        transaction, one fsync. A ``None`` result is an intermediate batch with no
        event of its own. An idempotent replay is a new operation with its own event.
        """
        acks, self._acks = self._acks, []
        stored: list[MemoryEvent] = []

        async def unit(tx: WriteTransaction) -> T:
            if acks:
                await tx.outbox.acknowledge(acks)
            result = await body(tx)
            if ctx.committed_event is not None and result is not None:
                event = finish_committed_event(ctx.committed_event, result)
                if ctx.notes.lines:
                    event = attrs.evolve(event,
                                         reasons=event.reasons + tuple(ctx.notes.lines))
                await tx.outbox.put(event)
                stored.append(event)
            return result

        noted = len(ctx.notes.lines)
        try:
            result = await self._backend.run_write(unit, tenant_id=tenant_id)
        except BaseException as exc:
            del ctx.notes.lines[noted:]  # what a rolled-back unit did, it did not do
            self._acks = acks + self._acks
            if not isinstance(exc, GovernedMemoryError) or isinstance(exc, MemoryUnavailableError):
                # Cancelled, or storage failed: the commit may or may not have happened,
                # so the next drain looks at what storage holds.
                self._stored_unknown = True
            raise
        for event in stored:
            if event.event_id not in self._committed_ids:
                self._committed.append(event)
                self._committed_ids.add(event.event_id)
        return result

    def _owned(self, record: MemoryRecord) -> MemoryRecord:
        """``record`` as a caller may hold it: a copy only when the backend keeps the
        very objects it hands out (a SQL backend decodes fresh ones from rows)."""
        return detach(record) if self._backend.shares_records else record

    def _require_open(self) -> None:
        if not self._open:
            raise MemoryUnavailableError("the native provider is not started (or was closed)")

    async def _replayed_record(
        self, tx: WriteTransaction, scope_hash: str,
        request: AddRequest | UpdateRequest | ApproveRequest, ctx: OperationContext,
    ) -> MemoryRecord | None:
        """The first result of an earlier identical write, or ``None`` if this one is new."""
        if request.idempotency_key is None:
            return None
        entry = await tx.idempotency.get(scope_hash, request.operation.value,
                                     request.idempotency_key)
        if entry is None:
            return None
        _check_fingerprint(entry, _fingerprint(ctx, request))
        snapshot = (await tx.versions.get(entry.record_id, entry.version)
                    if entry.version is not None and not entry.erased else None)
        if snapshot is None:
            # Every erasure either removes the entry or marks it erased, so a missing
            # snapshot means the same thing: the first result no longer exists.
            verb = ("created" if isinstance(request, AddRequest)
                    else "approved" if isinstance(request, ApproveRequest) else "updated")
            raise MemoryConflictError(f"the record {verb} with this idempotency key was erased")
        return self._owned(snapshot.record)

    async def _remember(
        self, tx: WriteTransaction, request: AddRequest | UpdateRequest | ApproveRequest,
        scope: Scope, record: MemoryRecord, ctx: OperationContext,
    ) -> None:
        if request.idempotency_key is None:
            return
        await tx.idempotency.put(IdempotencyEntry(
            scope_hash=scope.scope_hash, operation=request.operation.value,
            key=request.idempotency_key, fingerprint=_fingerprint(ctx, request),
            record_id=record.id, tenant_id=scope.tenant_id, user_id=scope.user_id,
            created_at=ctx.now, version=record.version, revision=record.revision,
        ))


async def _pending(tx: WriteTransaction, scope_hash: str,
                   request: ApproveRequest | RejectRequest,
                   ctx: OperationContext) -> MemoryRecord:
    """The record a review decision is about; only a live pending record qualifies."""
    current = await tx.records.get(scope_hash, request.record_id)
    if current is None or current.status is RecordStatus.DELETED or current.is_expired(ctx.now):
        _raise_missing(request.expected_revision)
    if current.status is not RecordStatus.PENDING_REVIEW:
        raise MemoryConflictError(f"the record is {current.status.value}, not pending review")
    _check_revision(current, request.expected_revision)
    return current


async def _commit_version(tx: WriteTransaction, current: MemoryRecord, new: MemoryRecord,
                          operation: VersionOperation, ctx: OperationContext) -> None:
    """Replace ``current`` with ``new`` only if nobody moved it since it was read, and
    record the new version in the same transaction."""
    if not await tx.records.replace(new, current.revision):
        raise MemoryConflictError("the record changed concurrently; re-read and retry")
    await tx.versions.append(MemoryVersion(new, operation, ctx.now, ctx.operation_id))


def _lexical_fused(lexical: Sequence[tuple[str, float]], limit: int) -> list[retrieval.Fused]:
    """Plain BM25 ranking: each match keeps its score, explained by its lexical rank."""
    return [retrieval.Fused(record_id, score, (
        SignalScore(name=retrieval.LEXICAL, value=score, rank=rank),))
        for rank, (record_id, score) in enumerate(lexical[:limit], 1)]


async def _load(tx: ReadTransaction, filters: SearchQuery, records: dict[str, MemoryRecord],
                record_ids: Iterable[str]) -> None:
    """Read the records among ``record_ids`` not loaded yet (vector-only candidates)."""
    missing = [record_id for record_id in record_ids if record_id not in records]
    if missing:
        found = await tx.records.by_ids(filters.scope_hashes, missing)
        records.update((record.id, record) for record in found)


async def _require_in_scope(tx: ReadTransaction, scope_hash: str, record_id: str,
                            field: str, now: float) -> None:
    check_link(await tx.records.get(scope_hash, record_id), field, now)


def _elapsed_ms(began: float) -> float:
    return (time.perf_counter() - began) * 1000.0
