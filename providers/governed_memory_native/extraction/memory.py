"""The extraction queue in process memory: the memory backend's (tests, demos; gone
with the process, as every record of that backend is)."""

from __future__ import annotations

from collections.abc import Sequence

import attrs
from governed_memory.extraction_jobs import (
    EnqueuedJob,
    ExtractionJob,
    ExtractionJobState,
    ExtractionQueueStatus,
    Settlement,
    SettleOutcome,
)

_STATE_AFTER = {SettleOutcome.DONE: ExtractionJobState.DONE,
                SettleOutcome.RETRY: ExtractionJobState.PENDING,
                SettleOutcome.DEAD: ExtractionJobState.DEAD}


class MemoryExtractionJobs:
    """Jobs in a dict, in the order they were queued."""

    def __init__(self) -> None:
        self._jobs: dict[str, ExtractionJob] = {}

    async def enqueue(self, job: ExtractionJob) -> EnqueuedJob:
        stored = self._jobs.get(job.job_id)
        if stored is not None:
            return EnqueuedJob(stored.job_id, stored.state, created=False)
        self._jobs[job.job_id] = job
        return EnqueuedJob(job.job_id, job.state, created=True)

    async def lease(self, owner: str, now: float, lease_until: float,
                    limit: int) -> list[ExtractionJob]:
        leased: list[ExtractionJob] = []
        for job in self._jobs.values():
            if len(leased) == limit:
                break
            due = ((job.state is ExtractionJobState.PENDING and job.next_attempt_at <= now)
                   or (job.state is ExtractionJobState.LEASED
                       and job.lease_expires_at is not None
                       and job.lease_expires_at <= now))
            if due:
                taken = attrs.evolve(job, state=ExtractionJobState.LEASED, lease_owner=owner,
                                     lease_expires_at=lease_until, attempts=job.attempts + 1)
                self._jobs[job.job_id] = taken
                leased.append(taken)
        return leased

    async def settle(self, settlement: Settlement, now: float) -> bool:
        job = self._jobs.get(settlement.job_id)
        if (job is None or job.state is not ExtractionJobState.LEASED
                or job.lease_owner != settlement.lease_owner
                or job.attempts != settlement.attempts):
            return False
        retry_at = settlement.next_attempt_at
        self._jobs[job.job_id] = attrs.evolve(
            job, state=_STATE_AFTER[SettleOutcome(settlement.outcome)], lease_owner=None,
            lease_expires_at=None, last_error_code=settlement.error_code,
            next_attempt_at=job.next_attempt_at if retry_at is None else retry_at)
        return True

    async def status(self) -> ExtractionQueueStatus:
        counts = dict.fromkeys(ExtractionJobState, 0)
        oldest: float | None = None
        for job in self._jobs.values():
            counts[job.state] += 1
            if job.state is ExtractionJobState.PENDING:
                oldest = job.created_at if oldest is None else min(oldest, job.created_at)
        return ExtractionQueueStatus(
            pending=counts[ExtractionJobState.PENDING],
            leased=counts[ExtractionJobState.LEASED], done=counts[ExtractionJobState.DONE],
            dead=counts[ExtractionJobState.DEAD], oldest_pending_at=oldest)

    async def jobs(self, state: ExtractionJobState, limit: int) -> list[ExtractionJob]:
        return [job for job in self._jobs.values() if job.state is state][:limit]

    async def requeue_dead(self, job_ids: Sequence[str] | None, now: float) -> int:
        chosen = set(self._jobs) if job_ids is None else set(job_ids)
        count = 0
        for job_id in chosen:
            job = self._jobs.get(job_id)
            if job is not None and job.state is ExtractionJobState.DEAD:
                self._jobs[job_id] = attrs.evolve(
                    job, state=ExtractionJobState.PENDING, attempts=0, next_attempt_at=now,
                    last_error_code=None)
                count += 1
        return count

    async def erase_user(self, tenant_id: str, user_id: str) -> int:
        gone = [job_id for job_id, job in self._jobs.items()
                if (job.owner.tenant_id, job.owner.user_id) == (tenant_id, user_id)]
        for job_id in gone:
            del self._jobs[job_id]
        return len(gone)

    async def close(self) -> None:
        return None
