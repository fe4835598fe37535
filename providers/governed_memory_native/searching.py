"""Search: hard filters in storage, lexical and vector candidates, fusion, a snapshot.

The pieces live under :mod:`retrieval` (the exact lexical top-k, vectors and their
in-process indexes, fusion, ranking in worker processes); this object runs one search
through them in one read unit of work, keeps the vector indexes current while they are
held, and decides when searches are worth moving to the ranking workers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Sequence

from governed_memory.errors import GovernedMemoryError, MemoryUnavailableError
from governed_memory.operation_context import OperationContext
from governed_memory.records import MemoryRecord, SearchResult, SignalScore
from governed_memory.requests import SearchRequest

from governed_memory_native.config import IndexingConfig
from governed_memory_native.replaying import NativeReplay
from governed_memory_native.retrieval import fusion
from governed_memory_native.retrieval.cosine import cosine_ranking
from governed_memory_native.retrieval.indexer import Indexer
from governed_memory_native.retrieval.ranking.pool import (
    WAKE_CANDIDATES,
    RankableBackend,
    RankingPool,
    RemotePage,
)
from governed_memory_native.retrieval.tokens import query_tokens
from governed_memory_native.retrieval.vector_index import REFRESH_S, VectorIndexes
from governed_memory_native.storage.port import ReadTransaction, SearchQuery, VectorQuery
from governed_memory_native.units import Units

logger = logging.getLogger("governed_memory_native")


class NativeSearch:
    """Searches of one provider, with the in-process state they keep between them."""

    def __init__(self, units: Units, indexer: Indexer, replay: NativeReplay,
                 config: IndexingConfig) -> None:
        self._units = units
        self._backend = units.backend
        self._indexer = indexer
        self._replay = replay
        # Vector candidates of large scopes (see retrieval.vector_index); in process memory.
        self.vector_indexes = VectorIndexes(config)
        self._refresher: asyncio.Task[None] | None = None
        # Lexical searches ranked in worker processes (see retrieval.ranking.pool), from
        # start to close where the backend's store can be opened by another process.
        self.ranking: RankingPool | None = None
        self._searching = 0
        """Searches of this provider in flight now (the pool starts only for overlap)."""

    def start_ranking(self, processes: int) -> None:
        """Ranking workers, where the backend allows them (started on first need)."""
        if (processes > 0 and isinstance(self._backend, RankableBackend)
                and self.ranking is None):
            self.ranking = RankingPool(self._backend, processes)

    async def close(self) -> None:
        """Stop the refresher and the workers; no vector stays in process memory."""
        await self._stop_refresher()
        ranking, self.ranking = self.ranking, None
        if ranking is not None:
            await ranking.close()
        self.vector_indexes.clear()

    async def search(self, request: SearchRequest, ctx: OperationContext) -> SearchResult:
        self._searching += 1
        try:
            return await self._search(request, ctx)
        finally:
            self._searching -= 1

    async def _search(self, request: SearchRequest, ctx: OperationContext) -> SearchResult:
        """Hard filters in storage, lexical and vector candidates, fusion, a snapshot.

        Every filter (scopes, status, expiry, validity at ``ctx.now``, types, entities,
        metadata, visibility, provenance source, sensitivity) is applied by the backend
        before any candidate is ranked. A profile
        with only the lexical mode and no recency or importance weight ranks by BM25
        alone (the score is the BM25 score); otherwise :mod:`retrieval.fusion` fuses the
        signals. The search is then stored as a retrieval snapshot for ``replay``.
        """
        self._units.require_open()
        ranking = self._indexer.ranking_for(request)
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
        legacy = fusion.lexical_only(ranking)
        moment = ctx.now if request.as_of is None else request.as_of
        since, before = request.event_window()
        filters = SearchQuery(
            scope_hashes=tuple(dict.fromkeys(scope.scope_hash for scope in request.scopes)),
            tokens=tokens, now=ctx.now,
            limit=request.limit if legacy else fusion.pool_size(request.limit),
            memory_types=request.memory_types, entity_ids=request.entity_ids,
            metadata_filter=dict(request.metadata_filter), valid_at=moment,
            occurred_since=since, occurred_before=before,
            visibilities=() if request.visibility is None else (request.visibility,),
            source_types=request.source_types, sensitivity=request.sensitivity,
            exclude_sensitivity=request.exclude_sensitivity,
        )

        lexical_on = bool(tokens) and "lexical" in ranking.modes
        tenant_id = request.scopes[0].tenant_id
        pool = self.ranking
        remote: RemotePage | None = None
        if lexical_on and pool is not None and pool.ready:
            # Ranked in a worker process (see ranking_pool); with vectors, the worker
            # also reads the revisions its snapshot holds, for the unit to compare.
            remote = await pool.search(filters, tenant_id,
                                       revisions=query_vector is not None)

        async def unit(tx: ReadTransaction) -> tuple[list[fusion.Fused],
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
                prepared = await self.vector_indexes.prepare(
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
                rows = await self.vector_indexes.candidates(tx, prepared)
                ranked = cosine_ranking(query_vector, rows, identity.dimension, filters.limit)
                vector = [(record_id, score) for record_id, score in ranked if score > 0]
            if legacy:
                fused = _lexical_fused(lexical, request.limit)
            else:
                if fusion.needs_records(ranking):
                    await _load(tx, filters, records, (record_id for record_id, _ in vector))
                fused = fusion.fuse(ranking, lexical=lexical, vector=vector,
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
        hits = [item.hit(self._units.owned(records[item.record_id]), rank)
                for rank, item in enumerate(fused, start=1)]
        signals = [name for name, used in (("lexical", bool(tokens) and "lexical" in
                                            ranking.modes),
                                           ("vector", query_vector is not None)) if used]
        try:
            snapshot_id = await self._replay.store(
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
        if (self._units.open and self.vector_indexes.held()
                and (self._refresher is None or self._refresher.done())):
            self._refresher = asyncio.get_running_loop().create_task(
                self._refresh_vector_indexes(), name="gm-vector-index-refresh")

    async def _refresh_vector_indexes(self) -> None:
        while self._units.open and self.vector_indexes.held():
            await asyncio.sleep(REFRESH_S)
            try:
                await self._backend.run_read(self.vector_indexes.refresh)
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

    async def nearest(self, scope_hash: str, vector: bytes,
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
            prepared = await self.vector_indexes.prepare(
                tx, VectorQuery(filters, identity), vector, 1)
            rows = await self.vector_indexes.candidates(tx, prepared)
            ranked = cosine_ranking(vector, rows, identity.dimension, 1)
            return ranked[0] if ranked else None

        return await self._backend.run_read(unit)


def _lexical_fused(lexical: Sequence[tuple[str, float]], limit: int) -> list[fusion.Fused]:
    """Plain BM25 ranking: each match keeps its score, explained by its lexical rank."""
    return [fusion.Fused(record_id, score, (
        SignalScore(name=fusion.LEXICAL, value=score, rank=rank),))
        for rank, (record_id, score) in enumerate(lexical[:limit], 1)]


async def _load(tx: ReadTransaction, filters: SearchQuery, records: dict[str, MemoryRecord],
                record_ids: Iterable[str]) -> None:
    """Read the records among ``record_ids`` not loaded yet (vector-only candidates)."""
    missing = [record_id for record_id in record_ids if record_id not in records]
    if missing:
        found = await tx.records.by_ids(filters.scope_hashes, missing)
        records.update((record.id, record) for record in found)


