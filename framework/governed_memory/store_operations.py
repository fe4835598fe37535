"""The manager's store-wide operations: an operator's indexing and housekeeping work.

They act on the store as a whole rather than on one scope (``governed_memory.maintenance``
holds their requests), and only an operator may run them: a service principal with
``memory:admin`` bound to no user. Their methods sit apart from application code's
memory operations because they answer to another caller, the one running workers,
reindexes and maintenance rounds.

A maintenance round (:meth:`StoreOperations.maintain`) is what every runner of one shares:
the manager's ``maintenance_interval_s`` loop, ``governed-memory worker`` and
``maintain``, and ``governed-memory serve``. It removes retrieval snapshots past their
retention, then expired records of every scope in bounded batches, each batch its own
governed operation, so expired personal data goes without anyone purging scope by scope.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Final

import attrs

from governed_memory.errors import MemoryCapabilityUnsupportedError, MemoryValidationError
from governed_memory.governed_calls import GovernedCalls
from governed_memory.indexing import ReindexPage, WorkerReport, WorkerSteps
from governed_memory.maintenance import (
    ExpiredPurge,
    OutboxReport,
    OutboxStatusRequest,
    ProcessIndexJobsRequest,
    PurgeExpiredAllRequest,
    PurgeSnapshotsRequest,
    ReindexRequest,
    RetryDeadJobsRequest,
)
from governed_memory.operations import Operation
from governed_memory.principal import Principal

log = logging.getLogger(__name__)

MAINTENANCE_BATCH: Final = 1000
"""Snapshots one ``purge_snapshots`` call removes at most."""
EXPIRED_BATCH: Final = 500
"""Expired records one ``purge_expired_all`` call (one batch, one event) removes at most:
small enough that no batch holds a tenant's writers back for long."""
EXPIRED_ROUND_CAP: Final = 50_000
"""Expired records one maintenance round removes at most; what is left waits for the
next round, so a round ends even while writers keep adding records that expire."""


@attrs.frozen(slots=True)
class MaintenanceReport:
    """What one maintenance round did.

    ``capped``: the round stopped at its cap with expired records possibly left (the next
    round goes on). ``skipped``: ``(operation, reason)`` of each step the provider cannot
    do (it declares no retrieval snapshots, or not ``purge_expired_all``); such a step is
    left out, never an error.
    """

    snapshots: int = 0
    expired_records: int = 0
    expired_batches: int = 0
    capped: bool = False
    skipped: tuple[tuple[str, str], ...] = ()

    @property
    def nothing_supported(self) -> bool:
        """Whether the provider can do none of the round's steps."""
        return len(self.skipped) == len(MAINTENANCE_STEPS)


MAINTENANCE_STEPS: Final = (Operation.PURGE_SNAPSHOTS, Operation.PURGE_EXPIRED_ALL)
"""The steps of a maintenance round, in order."""


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

    async def purge_expired_all(self, principal: Principal, *,
                                limit: int = EXPIRED_BATCH) -> ExpiredPurge:
        """One batch of the store-wide expiry purge: remove up to ``limit`` expired
        records of every scope, earliest expiry first, as :meth:`purge_expired` removes
        them from one scope; ``more`` on the result says the batch was full. Its
        ``memory.maintenance.*`` events carry counts only. ``MemoryCapabilityUnsupportedError``
        if the provider does not declare ``purge_expired_all``."""
        return await self._execute(
            Operation.PURGE_EXPIRED_ALL, principal,
            lambda: PurgeExpiredAllRequest(limit=limit))

    async def maintain(self, principal: Principal, *, expired_batch: int = EXPIRED_BATCH,
                       max_expired: int = EXPIRED_ROUND_CAP) -> MaintenanceReport:
        """One maintenance round as ``principal`` (an operator): retrieval snapshots
        past their retention, page by page, then expired records of every scope in
        batches of ``expired_batch`` until a batch comes back not full or the round
        tried ``max_expired`` (0: no expiry purge this round). Every page and batch is
        its own governed operation. A step the provider cannot do is skipped, its reason
        logged and reported; any other failure is raised (its operation is in the trail).
        """
        for field, value, least in (("expired_batch", expired_batch, 1),
                                    ("max_expired", max_expired, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise MemoryValidationError(f"{field} must be an integer of at least {least}",
                                            field=field)
        skipped: list[tuple[str, str]] = []
        snapshots = 0
        try:
            while (step := await self.purge_snapshots(principal)) > 0:
                snapshots += step
                if step < MAINTENANCE_BATCH:
                    break
        except MemoryCapabilityUnsupportedError as exc:
            skipped.append((Operation.PURGE_SNAPSHOTS.value, str(exc)))
        expired = batches = 0
        capped = False
        if max_expired:
            try:
                expired, batches, capped = await self._purge_expired_round(
                    principal, expired_batch, max_expired)
            except MemoryCapabilityUnsupportedError as exc:
                skipped.append((Operation.PURGE_EXPIRED_ALL.value, str(exc)))
        for operation, reason in skipped:
            log.info("maintenance round: %s skipped: %s", operation, reason)
        return MaintenanceReport(snapshots=snapshots, expired_records=expired,
                                 expired_batches=batches, capped=capped,
                                 skipped=tuple(skipped))

    async def _purge_expired_round(self, principal: Principal, batch: int,
                                   most: int) -> tuple[int, int, bool]:
        """Batches until one is not full, at most ``most`` records asked for in all (so
        the round ends even if other workers keep emptying the batches it finds)."""
        removed = asked = batches = 0
        for _ in range(math.ceil(most / batch)):
            limit = min(batch, most - asked)
            result = await self.purge_expired_all(principal, limit=limit)
            asked += limit
            batches += 1
            removed += result.records
            if not result.more:
                return removed, batches, False
        return removed, batches, True

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
