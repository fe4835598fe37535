"""Retrieval snapshots and their replay (``governed_memory.replay.SnapshotReplay``).

Every search may leave a snapshot of what it returned, as the profile's ``[retrieval]
snapshots`` says (off, batched, or committed with the search); replay reads it back,
with each hit at its stored version, for the tenant that took it and only while no
erasure has named one of its users. The batching writer is owned here, so storing,
flushing, purging and replaying all see one queue.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from governed_memory.clock import Clock
from governed_memory.errors import MemoryConflictError
from governed_memory.indexing import RankingConfig, SnapshotMode
from governed_memory.operation_context import OperationContext
from governed_memory.records import SearchHit, SearchResult
from governed_memory.replay import (
    ReplayRequest,
    ReplayResult,
    SnapshotErasedError,
    SnapshotHeader,
)
from governed_memory.requests import SearchRequest

from governed_memory_native.config import IndexingConfig
from governed_memory_native.retrieval import fusion
from governed_memory_native.retrieval.indexer import Indexer
from governed_memory_native.retrieval.snapshots import (
    PendingSnapshot,
    SnapshotWriter,
    batched_snapshot_id,
    header,
    raise_missing,
    replay,
    snapshot_body,
    store,
    sync_snapshot_id,
)
from governed_memory_native.storage.port import ReadTransaction, WriteTransaction
from governed_memory_native.units import Units


class NativeReplay:
    """The snapshots of one provider: stored by its searches, replayed on request."""

    def __init__(self, units: Units, indexer: Indexer, config: IndexingConfig,
                 clock: Clock) -> None:
        self._units = units
        self._indexer = indexer
        self._config = config
        self._clock = clock
        self.writer = SnapshotWriter(units.backend)
        """Snapshots queued for the next batch (``batched`` mode)."""

    async def store(self, request: SearchRequest, ctx: OperationContext,
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
            self.writer.submit(item)
            return snapshot_id

        async def unit(tx: WriteTransaction) -> None:
            await store(tx, [item])

        await self._units.backend.run_write(unit)
        return snapshot_id

    async def record_snapshot(self, request: SearchRequest, ctx: OperationContext,
                              result: SearchResult) -> str | None:
        """A retrieval snapshot of ``ctx``'s own for an answer it did not compute (a
        search-cache hit, ``governed_memory.cache.snapshots``): the hits and candidates
        of ``result``, this operation's ids and revisions. ``None`` when snapshots are
        off."""
        self._units.require_open()
        used = {signal.name for hit in result.hits for signal in hit.explanation.signals}
        signals = [name for name, signal in (("lexical", fusion.LEXICAL),
                                             ("vector", fusion.VECTOR)) if signal in used]
        return await self.store(request, ctx, self._indexer.ranking_for(request),
                                signals, [], list(result.hits), result.candidates)

    async def purge_snapshots(self, *, limit: int) -> int:
        """Remove up to ``limit`` retrieval snapshots older than ``snapshot_retention_s``
        (the governed maintenance round, ``governed_memory.maintenance``)."""
        self._units.require_open()
        before = self._clock.now() - self._config.snapshot_retention_s

        async def unit(tx: WriteTransaction) -> int:
            return await tx.snapshots.purge(before, limit)

        return await self._units.backend.run_write(unit)

    async def flush_snapshots(self) -> None:
        """Store every retrieval snapshot still queued for a batch (tools, tests)."""
        await self.writer.flush()

    async def snapshot_header(self, snapshot_id: str, tenant_id: str) -> SnapshotHeader:
        """The snapshot's scopes, for the manager to authorize a replay."""
        self._units.require_open()
        return header(snapshot_id, await self._stored(snapshot_id, tenant_id), tenant_id)

    async def replay_snapshot(self, request: ReplayRequest,
                              ctx: OperationContext) -> ReplayResult:
        self._units.require_open()
        tenant_id = request.scopes[0].tenant_id
        await self._stored(request.snapshot_id, tenant_id)  # lost or missing: say so

        async def unit(tx: ReadTransaction) -> ReplayResult:
            body = await tx.snapshots.get(request.snapshot_id)
            found = header(request.snapshot_id, body, tenant_id)
            if found.erased:
                raise SnapshotErasedError("the snapshot named a user who has been erased")
            if {s.scope_hash for s in found.scopes} != {s.scope_hash for s in request.scopes}:
                raise MemoryConflictError("the snapshot's scopes are not the ones authorized")
            assert body is not None  # header raises for a missing one
            return await replay(tx, request.snapshot_id, body)

        return await self._units.backend.run_read(unit)

    async def _stored(self, snapshot_id: str, tenant_id: str) -> Mapping[str, Any]:
        """The stored body (batches still queued are written first), or the error that
        says why there is none: lost in a crash, or not found."""
        await self.writer.flush()

        async def unit(tx: ReadTransaction) -> Mapping[str, Any] | None:
            return await tx.snapshots.get(snapshot_id)

        body = await self._units.backend.run_read(unit, point=True)
        if body is None or body.get("tenant_id") != tenant_id:
            raise_missing(snapshot_id, tenant_id, self._clock.now(),
                          self._config.snapshot_retention_s)
        assert body is not None
        return body
