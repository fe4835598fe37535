"""Store-wide operations: the indexing outbox, its worker, reindexing, housekeeping.

These act on the store as a whole rather than on one scope: a worker round embeds
whatever jobs are due, of any tenant, a reindex walks every live record, and a
maintenance round removes retrieval snapshots past their retention and expired records
of every scope (so data minimisation does not wait for someone to purge each scope by
hand). They still pass
the activity port like every other operation (a decision, a span, and ``memory.index.*``
or ``memory.maintenance.*`` events: the index lifecycle and the maintenance worker as a
trail sees them), so nothing reaches a provider's outbox or its housekeeping except
through governance. Only an operator may run them: the
scope-authorization rule demands a service principal with ``memory:admin`` that is
bound to no user (``governed_memory.policy.authorize_scope``). Their events name the
operator's tenant and carry counts, never record content.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence, Set
from typing import TYPE_CHECKING, ClassVar, Protocol, TypeVar

import attrs

from governed_memory.capabilities import offered
from governed_memory.errors import MemoryStorageError, MemoryValidationError
from governed_memory.indexing import (
    HasIndexing,
    IndexingProvider,
    IndexJob,
    JobState,
    OutboxStatus,
    ReindexPage,
    WorkerReport,
)
from governed_memory.limits import check_text, is_real
from governed_memory.operations import Operation
from governed_memory.replay import HasReplay, snapshots_of
from governed_memory.request import Audited, Checked, Request, summarised

if TYPE_CHECKING:
    from governed_memory.operation_context import OperationContext

ResultT = TypeVar("ResultT")

MAX_DEAD_LISTED = 1000
MAX_WORKER_BATCH = 1000
MAX_REINDEX_PAGE = 10_000
MAX_JOB_IDS = 1000
MAX_PURGE = 10_000


def _check_int(value: object, field: str, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise MemoryValidationError(f"{field} must be an integer from {low} to {high}",
                                    field=field)


class StoreRequest(Request[ResultT]):
    """Base of the store-wide requests: no scope, an operator's permission. ``send``
    takes the port's provider as it is (under any wrapper) and raises
    ``MemoryCapabilityUnsupportedError`` if it cannot do this."""

    __slots__ = ()


def _indexing(target: HasIndexing) -> IndexingProvider:
    return offered(target.indexing, target, "keeps no vectors (no indexing outbox)")


def _job_ids(value: Sequence[str] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


@attrs.frozen(slots=True)
class OutboxReport(Audited):
    """The outbox's state and its oldest dead letters (ids and error codes only)."""

    status: OutboxStatus
    dead: tuple[IndexJob, ...] = ()

    def audit(self, allowed: Set[str]) -> Checked[OutboxReport]:
        status = self.status
        return summarised(self, count=status.pending + status.leased + status.dead,
                         reasons=(f"pending {status.pending}", f"leased {status.leased}",
                                  f"dead {status.dead}",
                                  f"missing vectors {status.missing_vectors}"))


@attrs.frozen(slots=True)
class WorkerRound(Audited):
    """What one worker round did."""

    report: WorkerReport

    def audit(self, allowed: Set[str]) -> Checked[WorkerRound]:
        report = self.report
        return summarised(self, count=report.leased, reasons=tuple(
            f"{field.name} {getattr(report, field.name)}"
            for field in attrs.fields(WorkerReport) if getattr(report, field.name)))


@attrs.frozen(slots=True)
class Requeued(Audited):
    """How many dead letters went back to pending."""

    count: int

    def audit(self, allowed: Set[str]) -> Checked[Requeued]:
        return summarised(self, count=self.count)


@attrs.frozen(slots=True)
class ReindexStep(Audited):
    """One page of a reindex."""

    page: ReindexPage

    def audit(self, allowed: Set[str]) -> Checked[ReindexStep]:
        page = self.page
        return summarised(self, count=page.enqueued,
                         reasons=(f"scanned {page.scanned}", f"enqueued {page.enqueued}",
                                  f"of {page.total}"))


@attrs.frozen(slots=True, kw_only=True)
class OutboxStatusRequest(StoreRequest[OutboxReport]):
    """Job counts by state, vectors by embedder, and up to ``dead_limit`` dead letters."""

    operation: ClassVar[Operation] = Operation.INDEX_STATUS

    dead_limit: int = 20

    def validate(self) -> None:
        _check_int(self.dead_limit, "dead_limit", 0, MAX_DEAD_LISTED)

    async def send(self, target: HasIndexing, ctx: OperationContext) -> OutboxReport:
        indexing = _indexing(target)
        status = await indexing.outbox_status()
        dead = (tuple(await indexing.index_jobs(JobState.DEAD, self.dead_limit))
                if self.dead_limit else ())
        return OutboxReport(status, dead)


@attrs.frozen(slots=True, kw_only=True)
class ProcessIndexJobsRequest(StoreRequest[WorkerRound]):
    """One worker round: lease up to ``limit`` due jobs, do them, settle each."""

    operation: ClassVar[Operation] = Operation.PROCESS_INDEX_JOBS

    worker_id: str
    limit: int = 32
    lease_s: float = 60.0

    def validate(self) -> None:
        check_text(self.worker_id, "worker_id", max_bytes=256)
        _check_int(self.limit, "limit", 1, MAX_WORKER_BATCH)
        if not is_real(self.lease_s) or not 0.1 <= self.lease_s <= 86_400:
            raise MemoryValidationError("lease_s must be from 0.1 to 86400 seconds",
                                        field="lease_s")

    async def send(self, target: HasIndexing, ctx: OperationContext) -> WorkerRound:
        indexing = _indexing(target)
        return WorkerRound(await indexing.process_index_jobs(
            worker_id=self.worker_id, limit=self.limit, lease_s=float(self.lease_s)))


@attrs.frozen(slots=True, kw_only=True)
class RetryDeadJobsRequest(StoreRequest[Requeued]):
    """Requeue dead letters (``job_ids=None``: all of them) with a fresh budget."""

    operation: ClassVar[Operation] = Operation.RETRY_INDEX_JOBS

    job_ids: tuple[str, ...] | None = attrs.field(default=None, converter=_job_ids)

    def validate(self) -> None:
        if self.job_ids is None:
            return
        if not 1 <= len(self.job_ids) <= MAX_JOB_IDS:
            raise MemoryValidationError(
                f"job_ids names 1 to {MAX_JOB_IDS} jobs (or is None for all)", field="job_ids")
        for i, job_id in enumerate(self.job_ids):
            check_text(job_id, f"job_ids[{i}]", max_bytes=128)

    async def send(self, target: HasIndexing, ctx: OperationContext) -> Requeued:
        indexing = _indexing(target)
        ids: Sequence[str] | None = None if self.job_ids is None else list(self.job_ids)
        return Requeued(await indexing.retry_dead_jobs(ids))


@attrs.frozen(slots=True, kw_only=True)
class ReindexRequest(StoreRequest[ReindexStep]):
    """One page of a reindex: queue embed jobs for live records lacking a current
    vector of the configured embedder; continue with the page's ``cursor``."""

    operation: ClassVar[Operation] = Operation.REINDEX

    cursor: str | None = None
    limit: int = 500

    def validate(self) -> None:
        if self.cursor is not None:
            check_text(self.cursor, "cursor", max_bytes=2048)
        _check_int(self.limit, "limit", 1, MAX_REINDEX_PAGE)

    async def send(self, target: HasIndexing, ctx: OperationContext) -> ReindexStep:
        indexing = _indexing(target)
        return ReindexStep(await indexing.reindex(cursor=self.cursor, limit=self.limit))


@attrs.frozen(slots=True)
class Purged(Audited):
    """How much a maintenance step removed."""

    count: int
    what: str

    def audit(self, allowed: Set[str]) -> Checked[Purged]:
        return summarised(self, count=self.count, reasons=(f"{self.what} {self.count}",))


@attrs.frozen(slots=True, kw_only=True)
class PurgeSnapshotsRequest(StoreRequest[Purged]):
    """Remove up to ``limit`` retrieval snapshots past the provider's retention (the
    maintenance worker's round; a snapshot is never removed around governance)."""

    operation: ClassVar[Operation] = Operation.PURGE_SNAPSHOTS

    limit: int = 1000

    def validate(self) -> None:
        _check_int(self.limit, "limit", 1, MAX_PURGE)

    async def send(self, target: HasReplay, ctx: OperationContext) -> Purged:
        keeping = snapshots_of(target)
        return Purged(await keeping.purge_snapshots(limit=self.limit),
                      "expired retrieval snapshots removed")


def _pairs(value: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(set(value)))


@attrs.frozen(slots=True, kw_only=True)
class ExpiredPurge(Audited):
    """What one store-wide purge of expired records removed.

    ``scopes`` are the ``(tenant id, scope hash)`` pairs it removed records from: a search
    cache keeping revisions in its own store bumps them (a provider with revisions of its
    own advanced them in the erasing transactions). They stay out of the events, which
    name the operator's tenant and carry counts only. ``more`` says the batch was full,
    so expired records may remain for the next call.
    """

    records: int = 0
    versions: int = 0
    index_entries: int = 0
    idempotency_entries: int = 0
    scopes: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_pairs)
    more: bool = False

    @property
    def tenants(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(tenant for tenant, _ in self.scopes))

    def audit(self, allowed: Set[str]) -> Checked[ExpiredPurge]:
        counts = (self.records, self.versions, self.index_entries, self.idempotency_entries)
        if any(isinstance(n, bool) or not isinstance(n, int) or n < 0 for n in counts):
            return Checked(self, error=MemoryStorageError(
                "the provider reported a purge of expired records it cannot have made"))
        return summarised(self, count=self.records, reasons=(
            f"expired records removed {self.records}", f"versions {self.versions}",
            f"index entries {self.index_entries}",
            f"idempotency entries {self.idempotency_entries}",
            f"scopes {len(self.scopes)}", f"tenants {len(self.tenants)}",
            "more" if self.more else "done"))


class ExpiredRecordsPurger(Protocol):
    """What a provider declaring ``purge_expired_all`` offers (the activity port checks
    the flag before sending, so a provider without it is refused with a typed
    ``MemoryCapabilityUnsupportedError`` and never called)."""

    async def purge_expired_all(self, request: PurgeExpiredAllRequest,
                                ctx: OperationContext) -> ExpiredPurge: ...


@attrs.frozen(slots=True, kw_only=True)
class PurgeExpiredAllRequest(StoreRequest[ExpiredPurge]):
    """Remove up to ``limit`` expired records of every scope, earliest expiry first, as
    ``purge_expired`` removes them from one scope (versions, index entries, vectors, index
    jobs and idempotency entries with them; retrieval snapshots stay, holding no
    content). One call is one bounded batch with its own events; the maintenance round
    repeats it. Safe with several workers at once: each record is counted by the call
    that removed it."""

    operation: ClassVar[Operation] = Operation.PURGE_EXPIRED_ALL
    capability: ClassVar[str | None] = "purge_expired_all"

    limit: int = 500

    def validate(self) -> None:
        _check_int(self.limit, "limit", 1, MAX_PURGE)

    async def send(self, target: ExpiredRecordsPurger, ctx: OperationContext) -> ExpiredPurge:
        return await target.purge_expired_all(self, ctx)


STORE_REQUESTS = (OutboxStatusRequest, ProcessIndexJobsRequest, RetryDeadJobsRequest,
                  ReindexRequest, PurgeSnapshotsRequest, PurgeExpiredAllRequest)
