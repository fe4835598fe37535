"""``ExtractionWorker``: queued extractions, run as the principal that queued them.

A round leases due jobs (``lease_extraction_jobs``, the operator's governed operation),
and for each job:

1. a job whose attempts are spent already (workers died holding it, lease after lease)
   is a dead letter without running again;
2. its turns are read back from the conversation tier, as the job's principal
   (``list_turns``, governed); turns gone since (cleared, erased) leave nothing to
   extract, and the job is done;
3. ``MemoryExtractor.extract`` runs as the job's principal: its searches, its adds and
   its ``record_extraction`` event are that principal's governed operations;
4. the job is settled at once (``settle_extraction_jobs``, the operator's): done; or,
   when the model failed or timed out or a write failed midway
   (``ExtractionResult.retryable``), or the turns could not be read, retried after an
   exponential backoff (``backoff_s``, doubling, at most ``max_backoff_s``) until
   ``max_attempts`` is spent, then dead; a refusal (the scope rule or a policy said no)
   is dead at once, since no retry mends it.

Settling each job as soon as it ran keeps a slow round from outliving the leases of
the jobs still waiting in it. A worker that dies mid-job never settles it: the lease
expires and another worker's round takes the job again, and the second run stores
nothing twice (extraction is idempotent per turn: the content-hash gate, and each
fact's idempotency key). A worker that was only slow finds its lease taken over, and its
late settlement changes nothing (``lost_leases``).

Run it in process (``asyncio.create_task(worker.run(operator, worker_id=...))``), or as
``governed-memory worker``, which runs it when the profile names a language model and a
turn store.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Final

import attrs

from governed_memory.errors import (
    REFUSALS,
    GovernedMemoryError,
    MemoryCapabilityUnsupportedError,
    MemoryConfigurationError,
    MemoryValidationError,
)
from governed_memory.extraction_jobs import ExtractionJob, Settlement, SettleOutcome
from governed_memory.extraction_requests import lease_extraction_jobs, settle_extraction_jobs
from governed_memory.limits import is_real
from governed_memory.manager import GovernedMemoryManager
from governed_memory.principal import Principal
from governed_memory.tiers.facade import MemoryTiers
from governed_memory.tiers.turns import Turn
from governed_memory.turncontext.entities import EntityResolver
from governed_memory.turncontext.extraction import MemoryExtractor
from governed_memory.turncontext.policy import ContextPolicy

log = logging.getLogger(__name__)

DEFAULT_MAX_ATTEMPTS: Final = 5
DEFAULT_BACKOFF_S: Final = 5.0
DEFAULT_MAX_BACKOFF_S: Final = 300.0
DEFAULT_MODEL_TIMEOUT_S: Final = 60.0
DEFAULT_LEASE_S: Final = 300.0
"""Long enough for a job's model call and its writes; a lease a job outlives is taken
over, and the second run stores nothing twice."""
EXHAUSTED: Final = "attempts_exhausted"


@attrs.frozen(slots=True)
class ExtractionReport:
    """What one or more rounds did."""

    leased: int = 0
    done: int = 0
    retried: int = 0
    dead: int = 0
    lost_leases: int = 0
    """Jobs whose lease expired and was taken over before this worker settled them."""
    facts_stored: int = 0

    def __add__(self, other: ExtractionReport) -> ExtractionReport:
        return ExtractionReport(*(getattr(self, f.name) + getattr(other, f.name)
                                  for f in attrs.fields(ExtractionReport)))


@attrs.frozen(slots=True)
class _Ran:
    outcome: SettleOutcome
    error_code: str | None = None
    facts: int = 0


class ExtractionWorker:
    """Runs the extraction queue of ``extractor.memories``' provider; reads turns from
    ``tiers`` (which must have the conversation tier)."""

    def __init__(self, tiers: MemoryTiers, extractor: MemoryExtractor, *,
                 max_attempts: int = DEFAULT_MAX_ATTEMPTS,
                 backoff_s: float = DEFAULT_BACKOFF_S,
                 max_backoff_s: float = DEFAULT_MAX_BACKOFF_S) -> None:
        if not tiers.has_turns:
            raise MemoryConfigurationError(
                "the extraction worker reads each job's turns back: it needs the "
                "conversation tier (a turn store; a profile's [stores.turns])")
        if extractor.model is None:
            raise MemoryConfigurationError(
                "the extraction worker needs a language model (a profile's "
                "[stores.language_model]); without one it would finish jobs unread")
        if not extractor.policy.enabled:
            raise MemoryConfigurationError(
                "the extraction worker's context policy is disabled; it would finish "
                "jobs without extracting them")
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) \
                or not 1 <= max_attempts <= 100:
            raise MemoryConfigurationError("max_attempts must be an integer from 1 to 100")
        if not is_real(backoff_s) or not is_real(max_backoff_s) \
                or not 0 <= backoff_s <= max_backoff_s:
            raise MemoryConfigurationError(
                "backoff_s and max_backoff_s must be numbers with 0 <= backoff_s <= "
                "max_backoff_s")
        self.tiers = tiers
        self.extractor = extractor
        self.max_attempts = max_attempts
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)

    @classmethod
    def from_manager(cls, manager: GovernedMemoryManager, *,
                     tiers: MemoryTiers | None = None,
                     policy: ContextPolicy | None = None,
                     entities: EntityResolver | None = None,
                     model_timeout_s: float | None = DEFAULT_MODEL_TIMEOUT_S,
                     max_attempts: int = DEFAULT_MAX_ATTEMPTS,
                     backoff_s: float = DEFAULT_BACKOFF_S,
                     max_backoff_s: float = DEFAULT_MAX_BACKOFF_S) -> ExtractionWorker:
        """The worker a manager's profile describes: its language model
        (``[stores.language_model]``), its ``[context]`` budgets, and (unless ``tiers``
        is given) its turn store (``[stores.turns]``)."""
        spec = manager.profile_spec
        if policy is None:
            policy = (ContextPolicy.from_profile(spec.context) if spec is not None
                      else ContextPolicy())
        extractor = MemoryExtractor(manager, manager.language_model, policy=policy,
                                    entities=entities, model_timeout_s=model_timeout_s)
        return cls(tiers if tiers is not None else MemoryTiers.from_manager(manager),
                   extractor, max_attempts=max_attempts, backoff_s=backoff_s,
                   max_backoff_s=max_backoff_s)

    @property
    def manager(self) -> GovernedMemoryManager:
        return self.extractor.memories

    # -- one round ------------------------------------------------------------------------

    async def round(self, operator: Principal, *, worker_id: str, limit: int = 4,
                    lease_s: float = DEFAULT_LEASE_S) -> ExtractionReport:
        """Lease up to ``limit`` due jobs, run each as its principal and settle it."""
        jobs = await lease_extraction_jobs(self.manager, operator, worker_id=worker_id,
                                           limit=limit, lease_s=lease_s)
        report = ExtractionReport(leased=len(jobs))
        for job in jobs:
            ran = await self._run(job)
            settlement = self._settlement(job, ran)
            settled = await settle_extraction_jobs(self.manager, operator,
                                                   worker_id=worker_id,
                                                   settlements=(settlement,))
            report += ExtractionReport(done=settled.done, retried=settled.retried,
                                       dead=settled.dead, lost_leases=settled.lost_leases,
                                       facts_stored=ran.facts)
        return report

    async def _run(self, job: ExtractionJob) -> _Ran:
        if job.attempts > self.max_attempts:
            # Each lease spent an attempt and none settled: its workers died holding it.
            return _Ran(SettleOutcome.DEAD, EXHAUSTED)
        try:
            turns = await self._turns(job)
            if not turns:
                return _Ran(SettleOutcome.DONE)  # cleared or erased: nothing to extract
            result = await self.extractor.extract(job.principal, job.owner, turns)
        except REFUSALS as exc:
            return _Ran(SettleOutcome.DEAD, exc.code)
        except GovernedMemoryError as exc:
            return _Ran(SettleOutcome.RETRY, exc.code)
        failed = result.retryable
        if failed is not None:
            return _Ran(SettleOutcome.RETRY, failed.removeprefix("extraction."),
                        len(result.stored))
        return _Ran(SettleOutcome.DONE, facts=len(result.stored))

    async def _turns(self, job: ExtractionJob) -> tuple[Turn, ...]:
        """The job's turns, as its principal reads them now (a page holds them all: a
        job's sequence numbers span at most one page)."""
        span = job.last_seq - job.first_seq + 1
        page = await self.tiers.turns_after(job.principal, job.owner, job.first_seq - 1,
                                            limit=span)
        wanted = set(job.turn_ids)
        return tuple(turn for turn in page if turn.turn_id in wanted)

    def _settlement(self, job: ExtractionJob, ran: _Ran) -> Settlement:
        outcome, retry_at = ran.outcome, None
        if outcome is SettleOutcome.RETRY:
            if job.attempts >= self.max_attempts:
                outcome = SettleOutcome.DEAD
            else:
                delay = min(self.backoff_s * 2 ** (job.attempts - 1), self.max_backoff_s)
                retry_at = self.manager.clock.now() + delay
        assert job.lease_owner is not None  # a leased job names its lease
        return Settlement(job_id=job.job_id, lease_owner=job.lease_owner,
                          attempts=job.attempts, outcome=outcome, next_attempt_at=retry_at,
                          error_code=ran.error_code)

    # -- the loop -------------------------------------------------------------------------

    async def run(self, operator: Principal, *, worker_id: str,
                  stop: asyncio.Event | None = None, batch: int = 4,
                  lease_s: float = DEFAULT_LEASE_S, idle_s: float = 1.0,
                  on_report: Callable[[ExtractionReport], None] | None = None,
                  until_idle: bool = False) -> ExtractionReport:
        """Rounds until ``stop`` is set (or, with ``until_idle``, until no job is due).
        A round that fails is logged and tried again after ``idle_s`` (a worker outlives
        a datastore that is briefly away), except for a configuration or validation
        error, or a provider that keeps no queue, which no retry mends."""
        total = ExtractionReport()
        stop = stop or asyncio.Event()
        while not stop.is_set():
            try:
                report = await self.round(operator, worker_id=worker_id, limit=batch,
                                          lease_s=lease_s)
            except (MemoryConfigurationError, MemoryValidationError,
                    MemoryCapabilityUnsupportedError):
                raise
            except Exception as exc:
                if until_idle:
                    raise
                log.warning("extraction worker %s: round failed (%s)", worker_id,
                            getattr(exc, "code", type(exc).__name__))
                report = ExtractionReport()
            total += report
            if on_report is not None and report.leased:
                on_report(report)
            if report.leased == 0:
                if until_idle:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=idle_s)
        return total
