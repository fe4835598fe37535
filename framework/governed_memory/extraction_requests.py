"""The extraction queue's operations, each through the activity port.

``enqueue_extraction`` is the caller's: a principal with ``memory:write`` on the owner
scope asks for a turn's facts to be extracted later; the job remembers that principal
as the port authorized it. ``extraction_status``, ``lease_extraction_jobs``,
``settle_extraction_jobs`` and ``retry_extraction_jobs`` are an operator's store-wide
work (``memory:admin``, bound to no user), like the index outbox's. All five are of the
``index`` family (``memory.index.*`` events): they queue and settle work that derives
memories from what was already written, and change no memory themselves; the facts a
job stores are the enqueuing principal's own governed writes, each with its events.

Each function takes the manager whose provider keeps the queue (its
``extraction_jobs`` accessor); a provider without one refuses with
``MemoryCapabilityUnsupportedError``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence, Set
from typing import TYPE_CHECKING, ClassVar, TypeVar

import attrs

from governed_memory.capabilities import offered
from governed_memory.errors import MemoryValidationError
from governed_memory.extraction_jobs import (
    MAX_JOB_IDS,
    MAX_JOB_TURNS,
    MAX_LEASED,
    MAX_SETTLED,
    EnqueuedJob,
    ExtractionJob,
    ExtractionJobState,
    ExtractionJobStore,
    ExtractionQueueStatus,
    HasExtractionJobs,
    Settlement,
    SettleOutcome,
    job_id_for,
    job_principal,
)
from governed_memory.limits import (
    MAX_EPOCH_SECONDS,
    check_identifier,
    check_int,
    check_text,
    is_real,
)
from governed_memory.maintenance import StoreRequest
from governed_memory.operations import Operation
from governed_memory.principal import Principal
from governed_memory.request import Audited, Checked, Request, summarised
from governed_memory.scope import Scope

if TYPE_CHECKING:
    from governed_memory.manager import GovernedMemoryManager
    from governed_memory.operation_context import OperationContext

T = TypeVar("T")

MAX_DEAD_LISTED = 1000
LACKS = "keeps no extraction jobs (no extraction_jobs accessor)"


def _store(target: HasExtractionJobs) -> ExtractionJobStore:
    return offered(target.extraction_jobs, target, LACKS)


def _ids(value: Sequence[str] | None) -> tuple[str, ...] | None:
    return None if value is None else tuple(value)


def _turn_ids(value: Sequence[str]) -> tuple[str, ...]:
    return tuple(value)


def _settlements(value: Sequence[Settlement]) -> tuple[Settlement, ...]:
    return tuple(value)


def _check_lease(worker_id: object, field: str = "worker_id") -> None:
    check_text(worker_id, field, max_bytes=256)


# -- results ---------------------------------------------------------------------------


@attrs.frozen(slots=True)
class EnqueuedExtraction(Audited):
    """The job the turns have (new or not), for the owner scope it was asked for."""

    job: EnqueuedJob
    scope_hash: str

    def audit(self, allowed: Set[str]) -> Checked[EnqueuedExtraction]:
        if self.scope_hash not in allowed:
            from governed_memory.errors import MemoryStorageError

            return Checked(self, error=MemoryStorageError(
                "the extraction queue answered for another scope"))
        job = self.job
        return summarised(self, record_ids=(job.job_id,), count=1 if job.created else 0,
                         reasons=("queued" if job.created else f"already {job.state.value}",))


@attrs.frozen(slots=True)
class ExtractionQueueReport(Audited):
    """The queue's state and its oldest dead letters."""

    status: ExtractionQueueStatus
    dead: tuple[ExtractionJob, ...] = ()

    def audit(self, allowed: Set[str]) -> Checked[ExtractionQueueReport]:
        s = self.status
        return summarised(self, count=s.pending + s.leased + s.dead,
                         reasons=(f"pending {s.pending}", f"leased {s.leased}",
                                  f"done {s.done}", f"dead {s.dead}"))


@attrs.frozen(slots=True)
class LeasedJobs(Audited):
    """The jobs one lease took, for the worker that took them."""

    jobs: tuple[ExtractionJob, ...]

    def audit(self, allowed: Set[str]) -> Checked[LeasedJobs]:
        return summarised(self, record_ids=tuple(j.job_id for j in self.jobs),
                         count=len(self.jobs))


@attrs.frozen(slots=True)
class SettledJobs(Audited):
    """How many settlements took effect, by outcome, and how many leases were lost."""

    done: int = 0
    retried: int = 0
    dead: int = 0
    lost_leases: int = 0

    def audit(self, allowed: Set[str]) -> Checked[SettledJobs]:
        return summarised(self, count=self.done + self.retried + self.dead, reasons=tuple(
            f"{field.name} {getattr(self, field.name)}"
            for field in attrs.fields(SettledJobs) if getattr(self, field.name)))


@attrs.frozen(slots=True)
class RequeuedJobs(Audited):
    count: int

    def audit(self, allowed: Set[str]) -> Checked[RequeuedJobs]:
        return summarised(self, count=self.count)


# -- requests --------------------------------------------------------------------------


@attrs.frozen(slots=True, kw_only=True)
class EnqueueExtractionRequest(Request[EnqueuedExtraction]):
    """Queue the extraction of ``turn_ids`` (sequence numbers ``first_seq`` to
    ``last_seq`` of the owner's session) for ``scope``, the owner. The job runs as the
    principal the port authorizes here."""

    operation: ClassVar[Operation] = Operation.ENQUEUE_EXTRACTION

    scope: Scope
    turn_ids: tuple[str, ...] = attrs.field(converter=_turn_ids)
    first_seq: int
    last_seq: int

    def validate(self) -> None:
        if not isinstance(self.scope, Scope):
            raise MemoryValidationError("scope must be a Scope", field="scope")
        if self.scope.session_id is None:
            raise MemoryValidationError("extraction needs an owner with a session_id",
                                        field="scope.session_id")
        if not 1 <= len(self.turn_ids) <= MAX_JOB_TURNS:
            raise MemoryValidationError(f"a job names 1 to {MAX_JOB_TURNS} turns",
                                        field="turn_ids")
        for i, turn_id in enumerate(self.turn_ids):
            check_identifier(turn_id, f"turn_ids[{i}]")
        if len(set(self.turn_ids)) != len(self.turn_ids):
            raise MemoryValidationError("a turn is named twice", field="turn_ids")
        check_int(self.first_seq, "first_seq", minimum=1)
        check_int(self.last_seq, "last_seq", minimum=self.first_seq)
        if self.last_seq - self.first_seq >= MAX_JOB_TURNS:
            raise MemoryValidationError(
                f"a job's turns span at most {MAX_JOB_TURNS} sequence numbers",
                field="last_seq")

    async def send(self, target: HasExtractionJobs,
                   ctx: OperationContext) -> EnqueuedExtraction:
        store = _store(target)
        job = ExtractionJob(
            job_id=job_id_for(self.scope, self.turn_ids), owner=self.scope,
            principal=job_principal(ctx.principal), turn_ids=self.turn_ids,
            first_seq=self.first_seq, last_seq=self.last_seq,
            state=ExtractionJobState.PENDING, attempts=0, next_attempt_at=ctx.now,
            created_at=ctx.now)
        return EnqueuedExtraction(await store.enqueue(job), self.scope.scope_hash)


@attrs.frozen(slots=True, kw_only=True)
class ExtractionStatusRequest(StoreRequest[ExtractionQueueReport]):
    """Jobs by state, and up to ``dead_limit`` dead letters (oldest first)."""

    operation: ClassVar[Operation] = Operation.EXTRACTION_STATUS

    dead_limit: int = 20

    def validate(self) -> None:
        check_int(self.dead_limit, "dead_limit", maximum=MAX_DEAD_LISTED)

    async def send(self, target: HasExtractionJobs,
                   ctx: OperationContext) -> ExtractionQueueReport:
        store = _store(target)
        dead = (tuple(await store.jobs(ExtractionJobState.DEAD, self.dead_limit))
                if self.dead_limit else ())
        return ExtractionQueueReport(await store.status(), dead)


@attrs.frozen(slots=True, kw_only=True)
class LeaseExtractionJobsRequest(StoreRequest[LeasedJobs]):
    """Lease up to ``limit`` due jobs to ``worker_id`` for ``lease_s`` seconds."""

    operation: ClassVar[Operation] = Operation.LEASE_EXTRACTION_JOBS

    worker_id: str
    limit: int = 8
    lease_s: float = 300.0

    def validate(self) -> None:
        _check_lease(self.worker_id)
        check_int(self.limit, "limit", minimum=1, maximum=MAX_LEASED)
        if not is_real(self.lease_s) or not 0.1 <= self.lease_s <= 86_400:
            raise MemoryValidationError("lease_s must be from 0.1 to 86400 seconds",
                                        field="lease_s")

    async def send(self, target: HasExtractionJobs, ctx: OperationContext) -> LeasedJobs:
        store = _store(target)
        return LeasedJobs(tuple(await store.lease(self.worker_id, ctx.now,
                                                  ctx.now + float(self.lease_s),
                                                  self.limit)))


@attrs.frozen(slots=True, kw_only=True)
class SettleExtractionJobsRequest(StoreRequest[SettledJobs]):
    """Settle jobs leased to ``worker_id``: each settlement names its lease exactly."""

    operation: ClassVar[Operation] = Operation.SETTLE_EXTRACTION_JOBS

    worker_id: str
    settlements: tuple[Settlement, ...] = attrs.field(converter=_settlements)

    def validate(self) -> None:
        _check_lease(self.worker_id)
        if not 1 <= len(self.settlements) <= MAX_SETTLED:
            raise MemoryValidationError(f"settle 1 to {MAX_SETTLED} jobs at a time",
                                        field="settlements")
        for i, item in enumerate(self.settlements):
            field = f"settlements[{i}]"
            if not isinstance(item, Settlement):
                raise MemoryValidationError(f"{field} is not a Settlement", field=field)
            check_text(item.job_id, f"{field}.job_id", max_bytes=128)
            if item.lease_owner != self.worker_id:
                raise MemoryValidationError("a worker settles only the jobs it leased",
                                            field=f"{field}.lease_owner")
            check_int(item.attempts, f"{field}.attempts", minimum=1)
            try:
                outcome = SettleOutcome(item.outcome)
            except ValueError:
                raise MemoryValidationError("outcome is done, retry or dead",
                                            field=f"{field}.outcome") from None
            retry_at = item.next_attempt_at
            if (outcome is SettleOutcome.RETRY) != (retry_at is not None):
                raise MemoryValidationError("next_attempt_at is set exactly for a retry",
                                            field=f"{field}.next_attempt_at")
            if retry_at is not None and (not is_real(retry_at)
                                         or not 0 <= retry_at <= MAX_EPOCH_SECONDS):
                raise MemoryValidationError("next_attempt_at must be an epoch time",
                                            field=f"{field}.next_attempt_at")
            if item.error_code is not None:
                check_identifier(item.error_code, f"{field}.error_code")

    async def send(self, target: HasExtractionJobs, ctx: OperationContext) -> SettledJobs:
        store = _store(target)
        counts = {outcome: 0 for outcome in SettleOutcome}
        lost = 0
        for item in self.settlements:
            if await store.settle(item, ctx.now):
                counts[SettleOutcome(item.outcome)] += 1
            else:
                lost += 1
        return SettledJobs(done=counts[SettleOutcome.DONE],
                           retried=counts[SettleOutcome.RETRY],
                           dead=counts[SettleOutcome.DEAD], lost_leases=lost)


@attrs.frozen(slots=True, kw_only=True)
class RetryExtractionJobsRequest(StoreRequest[RequeuedJobs]):
    """Requeue dead letters (``job_ids=None``: all of them) with a fresh budget."""

    operation: ClassVar[Operation] = Operation.RETRY_EXTRACTION_JOBS

    job_ids: tuple[str, ...] | None = attrs.field(default=None, converter=_ids)

    def validate(self) -> None:
        if self.job_ids is None:
            return
        if not 1 <= len(self.job_ids) <= MAX_JOB_IDS:
            raise MemoryValidationError(
                f"job_ids names 1 to {MAX_JOB_IDS} jobs (or is None for all)",
                field="job_ids")
        for i, job_id in enumerate(self.job_ids):
            check_text(job_id, f"job_ids[{i}]", max_bytes=128)

    async def send(self, target: HasExtractionJobs, ctx: OperationContext) -> RequeuedJobs:
        store = _store(target)
        ids = None if self.job_ids is None else list(self.job_ids)
        return RequeuedJobs(await store.requeue_dead(ids, ctx.now))


EXTRACTION_REQUESTS = (EnqueueExtractionRequest, ExtractionStatusRequest,
                       LeaseExtractionJobsRequest, SettleExtractionJobsRequest,
                       RetryExtractionJobsRequest)


# -- the calls -------------------------------------------------------------------------


async def _call(manager: GovernedMemoryManager, operation: Operation, principal: Principal,
                build: Callable[[], Request[T]]) -> T:
    # The manager's one way into its port: started on first use, a request that
    # cannot be built still an audited rejection.
    return await manager._execute(operation, principal, build)


async def enqueue_extraction(manager: GovernedMemoryManager, principal: Principal,
                             owner: Scope, turn_ids: Sequence[str], first_seq: int,
                             last_seq: int) -> EnqueuedJob:
    """Queue the extraction of those turns for ``owner``, to run as ``principal``
    (``MemoryExtractor.enqueue`` works these out from the turns)."""
    result = await _call(manager, Operation.ENQUEUE_EXTRACTION, principal,
                         lambda: EnqueueExtractionRequest(
                             scope=owner, turn_ids=tuple(turn_ids), first_seq=first_seq,
                             last_seq=last_seq))
    return result.job


async def extraction_status(manager: GovernedMemoryManager, operator: Principal, *,
                            dead_limit: int = 20) -> ExtractionQueueReport:
    """Jobs by state and the oldest dead letters; ``operator`` is a service principal
    with ``memory:admin`` bound to no user."""
    return await _call(manager, Operation.EXTRACTION_STATUS, operator,
                       lambda: ExtractionStatusRequest(dead_limit=dead_limit))


async def lease_extraction_jobs(manager: GovernedMemoryManager, operator: Principal, *,
                                worker_id: str, limit: int = 8,
                                lease_s: float = 300.0) -> tuple[ExtractionJob, ...]:
    result = await _call(manager, Operation.LEASE_EXTRACTION_JOBS, operator,
                         lambda: LeaseExtractionJobsRequest(worker_id=worker_id, limit=limit,
                                                            lease_s=lease_s))
    return result.jobs


async def settle_extraction_jobs(manager: GovernedMemoryManager, operator: Principal, *,
                                 worker_id: str,
                                 settlements: Sequence[Settlement]) -> SettledJobs:
    return await _call(manager, Operation.SETTLE_EXTRACTION_JOBS, operator,
                       lambda: SettleExtractionJobsRequest(worker_id=worker_id,
                                                           settlements=tuple(settlements)))


async def retry_extraction_jobs(manager: GovernedMemoryManager, operator: Principal,
                                job_ids: Sequence[str] | None = None) -> int:
    """Requeue dead letters (all of them when ``job_ids`` is ``None``)."""
    result = await _call(manager, Operation.RETRY_EXTRACTION_JOBS, operator,
                         lambda: RetryExtractionJobsRequest(job_ids=job_ids))
    return result.count
