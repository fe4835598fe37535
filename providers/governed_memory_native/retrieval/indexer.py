"""The native provider's vector side: embedding on write, the indexing outbox, the worker.

Rules, whatever the mode:

- a vector counts only for the content it was computed from (``content_hash``) and only
  for the configured embedder identity, so a stale or foreign vector never ranks;
- lexical search never waits for vectors: the record commits first;
- ``sync`` embeds before the write lock is taken (when the new content is known) and
  stores the vector in the write's transaction; an embedder failure fails the write,
  which then changed nothing;
- ``async_outbox`` commits an index job with the write; a worker leases due jobs, embeds
  the exact version a job names (its stored snapshot), and settles each job in one
  transaction with the vector. A lease that expires (a killed worker) is taken over; the
  old holder's late result is refused, and vectors are upserted per (record, identity),
  so a job done twice never leaves two vectors. Failures retry with exponential backoff
  until the attempt budget is spent, then the job is dead: the record is not touched
  and stays lexically searchable. ``retry_dead_jobs`` requeues dead letters.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Final

from governed_memory.clock import Clock
from governed_memory.cursor import decode_cursor, encode_cursor
from governed_memory.embedding import Embedder, EmbedderIdentity
from governed_memory.errors import (
    GovernedMemoryError,
    MemoryConfigurationError,
    MemoryUnavailableError,
    MemoryValidationError,
)
from governed_memory.ids import new_id
from governed_memory.indexing import (
    IndexingMode,
    IndexingSettings,
    IndexJob,
    JobAction,
    JobState,
    OutboxStatus,
    RankingConfig,
    ReindexPage,
    WorkerReport,
)
from governed_memory.records import IndexState, MemoryRecord, RecordStatus
from governed_memory.requests import SearchRequest

from governed_memory_native.config import IndexingConfig
from governed_memory_native.retrieval.cosine import BadVectorError, encode
from governed_memory_native.storage.port import StorageBackend, StoredVector, WriteTransaction

log = logging.getLogger("governed_memory_native.indexer")

MAX_BACKOFF_S: Final = 300.0
MAX_JOBS_PER_ROUND: Final = 1000
_REINDEX: Final = "reindex"
_ALL_SCOPES: Final = "*"


class Indexer:
    def __init__(self, backend: StorageBackend, clock: Clock, config: IndexingConfig) -> None:
        self._backend = backend
        self._clock = clock
        self._config = config
        self._settings = IndexingSettings()

    # -- settings ---------------------------------------------------------------------

    def configure(self, settings: IndexingSettings) -> None:
        if not isinstance(settings, IndexingSettings):
            raise MemoryConfigurationError("indexing settings must be IndexingSettings")
        self._settings = settings

    @property
    def settings(self) -> IndexingSettings:
        return self._settings

    @property
    def embedder(self) -> Embedder | None:
        return self._settings.embedder

    @property
    def identity(self) -> EmbedderIdentity | None:
        embedder = self._settings.embedder
        return None if embedder is None else embedder.identity

    @property
    def synchronous(self) -> bool:
        return self._settings.mode is IndexingMode.SYNC

    def ranking_for(self, request: SearchRequest) -> RankingConfig:
        """The profile's ranking with the search's own options applied (what its
        snapshot records); vectors asked of a provider without an embedder are refused,
        not silently dropped."""
        ranking = self._settings.ranking
        if request.ranking is None:
            return ranking
        applied = request.ranking.apply(ranking)
        if "vector" in applied.modes and self.identity is None:
            raise MemoryValidationError("vector search needs an embedder (a profile's "
                                        "[stores.embedder])", field="ranking.modes")
        return applied

    def _require_embedder(self) -> Embedder:
        if self._settings.embedder is None:
            raise MemoryConfigurationError(
                "no embedder is configured (a profile's [stores.embedder])")
        return self._settings.embedder

    # -- embedding ----------------------------------------------------------------------

    async def embed(self, texts: Sequence[str]) -> list[bytes]:
        """Stored-form vectors of ``texts``; any embedder failure is ``unavailable``."""
        embedder = self._require_embedder()
        identity = embedder.identity
        try:
            vectors = await embedder.embed(list(texts))
        except GovernedMemoryError:
            raise
        except Exception as exc:
            log.warning("embedder %s failed: %s", identity, type(exc).__name__)
            raise MemoryUnavailableError(f"the embedder {identity} failed") from None
        if len(vectors) != len(texts):
            raise BadVectorError(f"embedder {identity} returned {len(vectors)} vectors "
                                 f"for {len(texts)} texts")
        return [encode(vector, identity) for vector in vectors]

    async def prepare(self, content: str | None) -> bytes | None:
        """In ``sync`` mode, the vector of content about to be written, computed before
        the write lock is taken."""
        if content is None or self.embedder is None or not self.synchronous:
            return None
        return (await self.embed([content]))[0]

    # -- the write path ------------------------------------------------------------------

    def state_after_write(self, previous: MemoryRecord | None, content_hash: str) -> IndexState:
        """The ``index_state`` a written version gets."""
        if self.embedder is None:
            return IndexState.INDEXED  # lexical only, consistent at commit
        if previous is not None and previous.content_hash == content_hash:
            return previous.index_state  # the content's vector (or job) still applies
        return IndexState.INDEXED if self.synchronous else IndexState.PENDING

    async def after_write(self, tx: WriteTransaction, record: MemoryRecord,
                          previous: MemoryRecord | None, prepared: bytes | None,
                          now: float) -> None:
        """Index a version just written in ``tx`` (add, update)."""
        identity = self.identity
        if identity is None:
            return
        if previous is not None and previous.content_hash == record.content_hash:
            return
        if not self.synchronous:
            await tx.jobs.enqueue(self._job(record, JobAction.EMBED, now))
            return
        vector = prepared if prepared is not None else (await self.embed([record.content]))[0]
        await tx.vectors.put(StoredVector(
            record_id=record.id, scope_hash=record.scope_hash, version=record.version,
            content_hash=record.content_hash, identity=identity, vector=vector,
            created_at=now))

    async def after_soft_delete(self, tx: WriteTransaction, tombstone: MemoryRecord,
                                now: float) -> None:
        """A deleted record's vectors go: through the outbox in ``async_outbox`` mode,
        at once otherwise. Search never ranks them meanwhile (it only sees active
        records)."""
        if self.embedder is not None and not self.synchronous:
            await tx.jobs.enqueue(self._job(tombstone, JobAction.REMOVE, now))
        else:
            await tx.vectors.remove(tombstone.id)

    def _job(self, record: MemoryRecord, action: JobAction, now: float) -> IndexJob:
        return IndexJob(job_id=new_id(), record_id=record.id, scope_hash=record.scope_hash,
                        version=record.version, action=action, state=JobState.PENDING,
                        attempts=0, next_attempt_at=now, created_at=now)

    # -- the worker ---------------------------------------------------------------------

    async def process(self, worker_id: str, limit: int, lease_s: float) -> WorkerReport:
        _check_limit(limit, MAX_JOBS_PER_ROUND)
        if not isinstance(worker_id, str) or not worker_id:
            raise MemoryValidationError("worker_id must be a non-empty string",
                                        field="worker_id")
        if not lease_s > 0:
            raise MemoryValidationError("lease_s must be positive", field="lease_s")
        embedder = self._require_embedder()
        identity = embedder.identity
        now = self._clock.now()
        async with self._backend.writing() as tx:
            jobs = await tx.jobs.lease(worker_id, now, now + lease_s, limit)
        if not jobs:
            return WorkerReport()
        # The exact version each embed job names, read from its stored snapshot.
        sources: dict[str, MemoryRecord] = {}
        async with self._backend.reading() as read:
            for job in jobs:
                if job.action is JobAction.EMBED:
                    snapshot = await read.versions.get(job.record_id, job.version)
                    if snapshot is not None:
                        sources[job.job_id] = snapshot.record
        outcomes = await self._embed_each(sources)
        report = WorkerReport(leased=len(jobs))
        settled_at = self._clock.now()
        async with self._backend.writing() as tx:
            for job in jobs:
                report += await self._settle(tx, job, sources.get(job.job_id),
                                             outcomes.get(job.job_id), identity, settled_at)
        return report

    async def _embed_each(self, sources: dict[str, MemoryRecord]
                          ) -> dict[str, bytes | BaseException]:
        """One batch; if it fails, each text alone, so one bad text fails only its job."""
        if not sources:
            return {}
        ids = list(sources)
        try:
            vectors = await self.embed([sources[job_id].content for job_id in ids])
            return dict(zip(ids, vectors, strict=True))
        except GovernedMemoryError as exc:
            if len(ids) == 1:
                return {ids[0]: exc}
        outcomes: dict[str, bytes | BaseException] = {}
        for job_id in ids:
            try:
                outcomes[job_id] = (await self.embed([sources[job_id].content]))[0]
            except GovernedMemoryError as exc:
                outcomes[job_id] = exc
        return outcomes

    async def _settle(self, tx: WriteTransaction, job: IndexJob, source: MemoryRecord | None,
                      outcome: bytes | BaseException | None, identity: EmbedderIdentity,
                      now: float) -> WorkerReport:
        if isinstance(outcome, BaseException):
            code = "bad_vector" if isinstance(outcome, BadVectorError) else getattr(
                outcome, "code", "embedder_error")
            dead = job.attempts >= self._config.max_attempts
            retry_at = None if dead else now + min(
                self._config.backoff_s * 2 ** (job.attempts - 1), MAX_BACKOFF_S)
            if not await tx.jobs.settle(job, done=False, next_attempt_at=retry_at,
                                             error_code=str(code)):
                return WorkerReport(lost_leases=1)
            return WorkerReport(dead=1) if dead else WorkerReport(retried=1)
        if not await tx.jobs.settle(job, done=True):
            return WorkerReport(lost_leases=1)  # another worker took the job over
        current = await tx.records.get(job.scope_hash, job.record_id)
        if job.action is JobAction.REMOVE:
            if current is None or current.status is RecordStatus.DELETED:
                await tx.vectors.remove(job.record_id)
                return WorkerReport(removed=1)
            return WorkerReport(skipped=1)
        if (source is None or outcome is None or current is None
                or current.status is RecordStatus.DELETED
                or current.content_hash != source.content_hash):
            return WorkerReport(skipped=1)  # erased, deleted or rewritten meanwhile
        await tx.vectors.put(StoredVector(
            record_id=current.id, scope_hash=current.scope_hash, version=current.version,
            content_hash=current.content_hash, identity=identity, vector=outcome,
            created_at=now))
        await tx.records.mark_indexed(current.id, current.version)
        return WorkerReport(indexed=1)

    # -- operator tools -----------------------------------------------------------------

    async def status(self) -> OutboxStatus:
        identity = self.identity
        now = self._clock.now()
        missing = 0
        async with self._backend.reading() as tx:
            counts, oldest = await tx.jobs.counts()
            vectors = await tx.vectors.counts()
            if identity is not None:
                after: str | None = None
                while True:
                    page, walked, after = await tx.vectors.missing(
                        identity, after, 1000, now)
                    missing += len(page)
                    if walked < 1000:
                        break
        return OutboxStatus(
            embedder=None if identity is None else str(identity), mode=self._settings.mode,
            pending=counts.get(JobState.PENDING.value, 0),
            leased=counts.get(JobState.LEASED.value, 0),
            dead=counts.get(JobState.DEAD.value, 0), oldest_pending_at=oldest,
            vectors=vectors, missing_vectors=missing)

    async def jobs(self, state: JobState, limit: int) -> list[IndexJob]:
        _check_limit(limit, MAX_JOBS_PER_ROUND)
        async with self._backend.reading() as tx:
            return await tx.jobs.in_state(JobState(state), limit)

    async def retry_dead(self, job_ids: Sequence[str] | None) -> int:
        if job_ids is not None and (isinstance(job_ids, str)
                                    or not all(isinstance(i, str) for i in job_ids)):
            raise MemoryValidationError("job_ids must be a sequence of job id strings",
                                        field="job_ids")
        async with self._backend.writing() as tx:
            return await tx.jobs.requeue_dead(None if job_ids is None else list(job_ids),
                                              self._clock.now())

    async def reindex(self, cursor: str | None, limit: int) -> ReindexPage:
        _check_limit(limit, 10_000)
        identity = self._require_embedder().identity
        after = (decode_cursor(cursor, _REINDEX, _ALL_SCOPES) if cursor is not None else None)
        now = self._clock.now()
        async with self._backend.writing() as tx:
            missing, walked, last = await tx.vectors.missing(identity, after, limit,
                                                                     now)
            for record_id, scope_hash, version in missing:
                await tx.jobs.enqueue(IndexJob(
                    job_id=new_id(), record_id=record_id, scope_hash=scope_hash,
                    version=version, action=JobAction.EMBED, state=JobState.PENDING,
                    attempts=0, next_attempt_at=now, created_at=now))
            total = await tx.records.live_count(now)
        next_cursor = (encode_cursor(_REINDEX, _ALL_SCOPES, last)
                       if last is not None and walked == limit else None)
        return ReindexPage(scanned=walked, enqueued=len(missing), cursor=next_cursor,
                           total=total)


class NativeIndexing:
    """The indexing feature (``governed_memory.indexing.IndexingProvider``) the provider
    offers: the :class:`Indexer`'s operator tools, refused while the provider is closed."""

    def __init__(self, indexer: Indexer, require_open: Callable[[], None]) -> None:
        self._indexer = indexer
        self._require_open = require_open

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


def _check_limit(limit: int, highest: int) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= highest:
        raise MemoryValidationError(f"limit must be an integer from 1 to {highest}",
                                    field="limit")
