"""The extraction queue as the provider offers it (its ``extraction_jobs`` accessor):
a backend's job store, refused while the provider is closed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from governed_memory.errors import MemoryValidationError
from governed_memory.extraction_jobs import (
    EnqueuedJob,
    ExtractionJob,
    ExtractionJobState,
    ExtractionJobStore,
    ExtractionQueueStatus,
    Settlement,
)


class ClosableJobStore(ExtractionJobStore, Protocol):
    async def close(self) -> None: ...


class NativeExtractionJobs:
    """``governed_memory.extraction_jobs.ExtractionJobStore`` over the backend's store."""

    def __init__(self, store: ClosableJobStore, require_open: Callable[[], None]) -> None:
        self._store = store
        self._require_open = require_open

    async def enqueue(self, job: ExtractionJob) -> EnqueuedJob:
        self._require_open()
        return await self._store.enqueue(job)

    async def lease(self, owner: str, now: float, lease_until: float,
                    limit: int) -> list[ExtractionJob]:
        self._require_open()
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise MemoryValidationError("limit must be a positive integer", field="limit")
        return await self._store.lease(owner, now, lease_until, limit)

    async def settle(self, settlement: Settlement, now: float) -> bool:
        self._require_open()
        return await self._store.settle(settlement, now)

    async def status(self) -> ExtractionQueueStatus:
        self._require_open()
        return await self._store.status()

    async def jobs(self, state: ExtractionJobState, limit: int) -> list[ExtractionJob]:
        self._require_open()
        return await self._store.jobs(ExtractionJobState(state), limit)

    async def requeue_dead(self, job_ids: Sequence[str] | None, now: float) -> int:
        self._require_open()
        if job_ids is not None and (isinstance(job_ids, str)
                                    or not all(isinstance(i, str) for i in job_ids)):
            raise MemoryValidationError("job_ids must be a sequence of job id strings",
                                        field="job_ids")
        return await self._store.requeue_dead(job_ids, now)

    async def erase_user(self, tenant_id: str, user_id: str) -> int:
        self._require_open()
        return await self._store.erase_user(tenant_id, user_id)

    async def close(self) -> None:
        await self._store.close()
