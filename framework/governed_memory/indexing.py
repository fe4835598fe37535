"""Vector indexing as a provider offers it: settings from the profile, the outbox, a worker.

A provider that keeps vectors (the native one) implements :class:`IndexingProvider`; the
profile build path (:mod:`governed_memory.profile_indexing`) hands it its
:class:`IndexingSettings` (the embedder named by ``[stores.embedder]``, ``[indexing]
mode`` and ``[retrieval]``), and the command line
(``governed-memory worker | reindex | outbox``) drives it through this protocol alone,
so the framework never imports a provider package.

Why an outbox: embedding is slow and may fail (a model that cannot load); a write must
not wait for it or be lost because of it. In ``async_outbox`` mode a write commits an
index job with the record, and a worker leases jobs, embeds the exact version a job
names, and retries with a bounded budget before dead-lettering the job. The record
itself is never changed by indexing failures; it stays lexically searchable.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import hashlib
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

import attrs

from governed_memory.canonical import canonical_json
from governed_memory.embedding import Embedder, EmbedderIdentity
from governed_memory.errors import MemoryConfigurationError, MemoryValidationError

if TYPE_CHECKING:
    from governed_memory.profiles.spec import MemoryProfileSpec

log = logging.getLogger(__name__)

SIGNALS: Final = ("lexical", "vector", "recency", "importance")
DEFAULT_WEIGHTS: Final[Mapping[str, float]] = {"lexical": 1.0, "vector": 1.0}
"""Weights of a mode the profile enables but does not weigh."""


class SnapshotMode(enum.StrEnum):
    """Mirrors the profile's ``[retrieval] snapshots``: when a search's snapshot (what it
    returned, for ``replay``) reaches storage."""

    OFF = "off"
    """No snapshot; searches return ``snapshot_id=None``."""
    BATCHED = "batched"
    """Written in batches off the request path (no fsync on a search); a crash can lose
    the last batch, and ``replay`` then says the snapshot was lost."""
    SYNC = "sync"
    """Written and committed before the search returns (one fsync per search)."""


def _snapshot_mode(value: object) -> SnapshotMode:
    """``None`` (the profile left it unset) is the default, ``batched``."""
    return SnapshotMode.BATCHED if value is None else SnapshotMode(str(value))


class IndexingMode(enum.StrEnum):
    """Mirrors the profile's ``[indexing] mode``."""

    SYNC = "sync"
    """Vectors are computed before the write commits: consistent, slower writes."""
    ASYNC_OUTBOX = "async_outbox"
    """The write commits an index job; a worker embeds later."""


def _frozen(value: Mapping[str, float]) -> Mapping[str, float]:
    return dict(sorted(value.items()))


@attrs.frozen(slots=True)
class RankingConfig:
    """How hybrid search ranks: which candidate signals run and how they are fused.

    ``weights`` weigh each signal in weighted reciprocal-rank fusion (lexical, vector)
    and as multiplicative boosts (recency, importance); see ``docs/retrieval.md``.
    ``revision`` hashes all of it, so a stored retrieval snapshot names exactly the
    ranking that produced it.
    """

    modes: tuple[str, ...] = ("lexical",)
    weights: Mapping[str, float] = attrs.field(factory=dict, converter=_frozen)
    recency_half_life_s: float | None = None
    rrf_k: int = 5
    """The reciprocal-rank constant: a hit at rank r contributes ``weight / (rrf_k + r)``.

    5, not the customary 60, by measurement (``bench/analysis.py``): over every embedder
    and data set it kept at least 0.911 of the best fusion's mean of hit@5, hit@10 and
    nDCG@10 where 60 kept 0.775, because a small constant lets the top of each signal
    decide instead of a long tail of middling ranks."""

    def __attrs_post_init__(self) -> None:
        if not self.modes or any(mode not in ("lexical", "vector") for mode in self.modes):
            raise MemoryValidationError("ranking modes are 'lexical' and/or 'vector'",
                                        field="modes")
        for name, weight in self.weights.items():
            if name not in SIGNALS or not math.isfinite(weight) or weight < 0:
                raise MemoryValidationError(f"bad ranking weight {name!r}", field="weights")
        if self.recency_half_life_s is not None and not self.recency_half_life_s > 0:
            raise MemoryValidationError("recency_half_life_s must be positive",
                                        field="recency_half_life_s")
        if self.rrf_k < 1:
            raise MemoryValidationError("rrf_k must be at least 1", field="rrf_k")

    def weight(self, signal: str) -> float:
        """The signal's weight: as configured, else 1 for an enabled mode, else 0."""
        if signal in self.weights:
            return self.weights[signal]
        return DEFAULT_WEIGHTS.get(signal, 0.0) if signal in self.modes else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"modes": list(self.modes), "weights": dict(self.weights),
                "recency_half_life_s": self.recency_half_life_s, "rrf_k": self.rrf_k}

    @property
    def revision(self) -> str:
        return "sha256:" + hashlib.sha256(canonical_json(self.as_dict()).encode()).hexdigest()


@attrs.frozen(slots=True)
class IndexingSettings:
    """What a profile tells an indexing provider; ``embedder=None`` means lexical only."""

    mode: IndexingMode = IndexingMode.SYNC
    embedder: Embedder | None = None
    ranking: RankingConfig = attrs.field(factory=RankingConfig)
    snapshots: SnapshotMode = attrs.field(default=None, converter=_snapshot_mode)
    """How retrieval snapshots are stored (the profile's ``[retrieval] snapshots``)."""


class JobState(enum.StrEnum):
    PENDING = "pending"
    LEASED = "leased"
    DEAD = "dead"


class JobAction(enum.StrEnum):
    EMBED = "embed"
    """Embed the record at exactly ``version`` and store its vector."""
    REMOVE = "remove"
    """Remove the record's vectors (it was deleted at ``version``)."""


@attrs.frozen(slots=True)
class IndexJob:
    """One unit of outbox work; carries ids and counters, never content."""

    job_id: str
    record_id: str
    scope_hash: str
    version: int
    action: JobAction
    state: JobState
    attempts: int
    next_attempt_at: float
    created_at: float
    lease_owner: str | None = None
    lease_expires_at: float | None = None
    last_error_code: str | None = None


@attrs.frozen(slots=True)
class OutboxStatus:
    """A snapshot of the indexing outbox and the vectors it produced."""

    embedder: str | None
    """The configured embedder identity (``id@revision/dimension``), if any."""
    mode: IndexingMode
    pending: int
    leased: int
    dead: int
    oldest_pending_at: float | None
    vectors: Mapping[str, int]
    """Stored vectors by embedder identity."""
    missing_vectors: int
    """Live records without a current vector of the configured identity (reindex them)."""


@attrs.frozen(slots=True)
class WorkerReport:
    """What one :meth:`IndexingProvider.process_index_jobs` call did."""

    leased: int = 0
    indexed: int = 0
    removed: int = 0
    skipped: int = 0
    """Jobs whose record moved on (or was erased) before the work finished."""
    retried: int = 0
    dead: int = 0
    lost_leases: int = 0
    """Jobs whose lease expired and was taken over before this worker finished."""

    def __add__(self, other: WorkerReport) -> WorkerReport:
        return WorkerReport(*(getattr(self, f.name) + getattr(other, f.name)
                              for f in attrs.fields(WorkerReport)))


@attrs.frozen(slots=True)
class ReindexPage:
    """One step of a reindex: jobs enqueued for a page of records; continue with ``cursor``."""

    scanned: int
    enqueued: int
    cursor: str | None
    total: int
    """How many live records the reindex walks in all (for a progress bar)."""


@runtime_checkable
class IndexingProvider(Protocol):
    """A provider that keeps vectors and runs an indexing outbox (the native provider)."""

    def configure_indexing(self, settings: IndexingSettings) -> None:
        """Adopt the profile's settings; call before ``start``."""
        ...

    async def outbox_status(self) -> OutboxStatus: ...

    async def index_jobs(self, state: JobState, limit: int) -> Sequence[IndexJob]:
        """Jobs in one state, oldest first (dead letters for ``outbox status``)."""
        ...

    async def process_index_jobs(self, *, worker_id: str, limit: int = 32,
                                 lease_s: float = 60.0) -> WorkerReport:
        """Lease up to ``limit`` due jobs (new ones, retries whose backoff passed, and
        jobs whose lease expired), do them, and settle each: done, retry later, or dead."""
        ...

    async def retry_dead_jobs(self, job_ids: Sequence[str] | None = None) -> int:
        """Requeue dead letters (all when ``job_ids`` is ``None``) with a fresh budget."""
        ...

    async def reindex(self, *, cursor: str | None = None, limit: int = 500) -> ReindexPage:
        """Enqueue embed jobs for live records lacking a current vector of the configured
        embedder; vectors of other embedders are never ranked meanwhile."""
        ...


def ranking_from_profile(spec: MemoryProfileSpec) -> RankingConfig:
    retrieval = spec.retrieval
    return RankingConfig(modes=tuple(mode.value for mode in retrieval.modes),
                         weights=dict(retrieval.weights),
                         recency_half_life_s=retrieval.recency_half_life_s)


class HasIndexing(Protocol):
    @property
    def indexing(self) -> IndexingProvider | None: ...


class WorkerSteps(Protocol):
    """What a worker loop drives: one round at a time (a provider's own method, or the
    manager's governed one bound to an operator)."""

    async def process_index_jobs(self, *, worker_id: str, limit: int = 32,
                                 lease_s: float = 60.0) -> WorkerReport: ...


async def run_worker(provider: WorkerSteps, *, worker_id: str,
                     stop: asyncio.Event | None = None, batch: int = 32,
                     lease_s: float = 60.0, idle_s: float = 1.0,
                     on_report: Callable[[WorkerReport], None] | None = None,
                     until_idle: bool = False) -> WorkerReport:
    """Process jobs until ``stop`` is set (or, with ``until_idle``, until none is due).

    Runs in-process (``asyncio.create_task(run_worker(...))``) or as
    ``governed-memory worker``. An error in one round is logged and retried after
    ``idle_s`` (a worker outlives a datastore that is briefly unavailable), except a
    configuration or validation error, which no retry mends.
    """
    total = WorkerReport()
    stop = stop or asyncio.Event()
    while not stop.is_set():
        try:
            report = await provider.process_index_jobs(worker_id=worker_id, limit=batch,
                                                       lease_s=lease_s)
        except (MemoryConfigurationError, MemoryValidationError):
            raise  # no retry mends a missing embedder or a bad argument
        except Exception as exc:
            if until_idle:
                raise
            log.warning("indexing worker %s: round failed (%s)", worker_id,
                        getattr(exc, "code", type(exc).__name__))
            report = WorkerReport()
        total += report
        if on_report is not None and report.leased:
            on_report(report)
        if report.leased == 0:
            if until_idle:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=idle_s)
    return total


def identity_key(identity: EmbedderIdentity) -> str:
    """How a vector's embedder identity is written down next to it."""
    return str(identity)
