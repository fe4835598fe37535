"""The manager's store-wide operations: an operator's indexing and housekeeping work.

They act on the store as a whole rather than on one scope (``governed_memory.maintenance``
holds their requests), and only an operator may run them: a service principal with
``memory:admin`` bound to no user. Their methods sit apart from application code's
memory operations because they answer to another caller, the one running workers,
reindexes and maintenance rounds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from governed_memory.governed_calls import GovernedCalls
from governed_memory.indexing import ReindexPage, WorkerReport, WorkerSteps
from governed_memory.maintenance import (
    OutboxReport,
    OutboxStatusRequest,
    ProcessIndexJobsRequest,
    PurgeSnapshotsRequest,
    ReindexRequest,
    RetryDeadJobsRequest,
)
from governed_memory.operations import Operation
from governed_memory.principal import Principal

MAINTENANCE_BATCH: Final = 1000
"""Snapshots a maintenance round removes at most."""


class StoreOperations(GovernedCalls):
    """Store-wide indexing work and housekeeping, each a governed operation."""

    async def outbox_status(self, principal: Principal, *,
                            dead_limit: int = 20) -> OutboxReport:
        """The indexing outbox: jobs by state, vectors by embedder, the oldest dead
        letters. ``principal`` is an operator: a service principal with
        ``memory:admin`` bound to no user."""
        return await self._execute(
            Operation.INDEX_STATUS, principal,
            lambda: OutboxStatusRequest(dead_limit=dead_limit))

    async def process_index_jobs(self, principal: Principal, *, worker_id: str,
                                 limit: int = 32, lease_s: float = 60.0) -> WorkerReport:
        """One worker round: lease up to ``limit`` due jobs, embed, settle each."""
        result = await self._execute(
            Operation.PROCESS_INDEX_JOBS, principal,
            lambda: ProcessIndexJobsRequest(worker_id=worker_id, limit=limit,
                                            lease_s=lease_s))
        return result.report

    async def retry_dead_jobs(self, principal: Principal,
                              job_ids: Sequence[str] | None = None) -> int:
        """Requeue dead letters (all of them when ``job_ids`` is ``None``)."""
        result = await self._execute(
            Operation.RETRY_INDEX_JOBS, principal,
            lambda: RetryDeadJobsRequest(job_ids=job_ids))
        return result.count

    async def reindex(self, principal: Principal, *, cursor: str | None = None,
                      limit: int = 500) -> ReindexPage:
        """One page of a reindex; continue with the page's ``cursor`` until ``None``."""
        result = await self._execute(
            Operation.REINDEX, principal, lambda: ReindexRequest(cursor=cursor, limit=limit))
        return result.page

    async def purge_snapshots(self, principal: Principal, *,
                              limit: int = MAINTENANCE_BATCH) -> int:
        """The maintenance round: remove up to ``limit`` retrieval snapshots past the
        provider's retention; returns how many (``memory.maintenance.*`` events)."""
        result = await self._execute(
            Operation.PURGE_SNAPSHOTS, principal, lambda: PurgeSnapshotsRequest(limit=limit))
        return result.count

    def worker_steps(self, principal: Principal) -> WorkerSteps:
        """The governed worker round bound to ``principal``, for
        :func:`governed_memory.indexing.run_worker`: every round is an operation with
        its decision, span and ``memory.index.*`` events."""
        manager = self

        class _Steps:
            async def process_index_jobs(self, *, worker_id: str, limit: int = 32,
                                         lease_s: float = 60.0) -> WorkerReport:
                return await manager.process_index_jobs(principal, worker_id=worker_id,
                                                        limit=limit, lease_s=lease_s)

        return _Steps()
