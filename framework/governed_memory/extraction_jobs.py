"""Extraction jobs: a finished turn's fact extraction, queued where it survives a crash.

Why a queue. Extraction calls a language model, which is slow and fails (a timeout, an
outage, an answer that does not parse). Run inline, a crash or a failed call loses that
turn's facts for good. Queued, the turn's extraction is a durable job in the provider's
own storage, keyed by its owner scope and turn ids, that a worker leases, runs, and
settles, with the index outbox's rules: a lease that expires (a killed worker) is taken
over, a failure is retried with backoff until the attempt budget is spent, and then the
job is a dead letter an operator sees in the status and can requeue.

What a job holds: the owner scope, the turn ids and where they are in the session
(their sequence numbers), and the principal that asked for it, never the turns' text:
the worker reads the turns back from the conversation tier when it runs the job, as that
principal, so erasing the turns leaves the job nothing to extract. A finished job keeps
its row (``done``): enqueuing the same turns again finds it and queues nothing, so a
retried turn is extracted once.

Who the work runs as. Leasing, settling, the status and requeuing are store-wide
operations of an operator (``memory:admin``, bound to no user; their events are the
``memory.index.*`` lifecycle). The extraction itself runs as the principal that
enqueued the job, as the port authorized it then (its ``memory:read``, ``memory:write``
and ``memory:admin``; nothing else is kept): every search and every write the job makes
is that principal's governed operation, decided by the scope rule and every policy and
attributed to it in the trail, exactly as an inline extraction would be. The operator
who runs the worker never lends its own authority to a job.

A provider offers the queue through its ``extraction_jobs`` accessor (the native one on
every backend); one that returns ``None`` refuses the operations with
``MemoryCapabilityUnsupportedError``, and extraction then runs inline.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Sequence
from typing import Final, Protocol, runtime_checkable

import attrs

from governed_memory.canonical import canonical_json
from governed_memory.principal import Permission, Principal
from governed_memory.scope import Scope

MAX_JOB_TURNS: Final = 100
"""Turns one job may name; their sequence numbers span at most this many, so one page
of the conversation tier reads them back."""
MAX_LEASED: Final = 100
MAX_SETTLED: Final = 100
MAX_JOB_IDS: Final = 1000
JOB_ID_PREFIX: Final = "xj1:"

KEPT_PERMISSIONS: Final = frozenset({Permission.READ, Permission.WRITE, Permission.ADMIN})
"""What a job keeps of its principal's permissions: what extraction uses (reading the
scopes it deduplicates against, writing facts, and ``memory:admin``, which lets an
operator's extraction write a shared project scope). Delete, review and audit are
never carried into a job."""


class ExtractionJobState(enum.StrEnum):
    PENDING = "pending"
    LEASED = "leased"
    DONE = "done"
    DEAD = "dead"


class SettleOutcome(enum.StrEnum):
    DONE = "done"
    """The extraction ran (or had nothing left to read): the job is finished."""
    RETRY = "retry"
    """It failed in a way a later attempt may mend: pending again at ``next_attempt_at``."""
    DEAD = "dead"
    """Out of attempts, or refused: a dead letter until an operator requeues it."""


def job_id_for(owner: Scope, turn_ids: Sequence[str]) -> str:
    """The job of these turns for this owner: the same turns queued twice are one job."""
    body = canonical_json({"owner": owner.scope_hash, "turns": list(turn_ids)})
    return JOB_ID_PREFIX + hashlib.sha256(body.encode("utf-8")).hexdigest()[:40]


def job_principal(principal: Principal) -> Principal:
    """The principal a job runs as: the one that enqueued it, with only the
    permissions extraction uses (:data:`KEPT_PERMISSIONS`)."""
    return attrs.evolve(principal, permissions=principal.permissions & KEPT_PERMISSIONS)


@attrs.frozen(slots=True, kw_only=True)
class ExtractionJob:
    """One queued extraction: identifiers and counters, never the turns' text."""

    job_id: str
    owner: Scope
    """The owner the extraction writes for (``MemoryExtractor.extract``'s ``owner``)."""
    principal: Principal
    """Who enqueued it, and who the extraction runs as."""
    turn_ids: tuple[str, ...]
    first_seq: int
    last_seq: int
    state: ExtractionJobState
    attempts: int
    next_attempt_at: float
    created_at: float
    lease_owner: str | None = None
    lease_expires_at: float | None = None
    last_error_code: str | None = None

    @property
    def scope_hash(self) -> str:
        return self.owner.scope_hash


@attrs.frozen(slots=True)
class EnqueuedJob:
    """What enqueuing answered: the job of those turns, and whether this call made it
    (``False``: it was queued, running or finished already)."""

    job_id: str
    state: ExtractionJobState
    created: bool


@attrs.frozen(slots=True, kw_only=True)
class Settlement:
    """How a worker settles one job it leased. The lease is named exactly as the worker
    got it (owner and attempt), so a worker whose lease expired and was taken over
    changes nothing."""

    job_id: str
    lease_owner: str
    attempts: int
    outcome: SettleOutcome
    next_attempt_at: float | None = None
    """When a retried job is due again (``RETRY`` only)."""
    error_code: str | None = None


@attrs.frozen(slots=True)
class ExtractionQueueStatus:
    """Jobs by state, and when the oldest pending one was queued."""

    pending: int
    leased: int
    done: int
    dead: int
    oldest_pending_at: float | None = None


@runtime_checkable
class ExtractionJobStore(Protocol):
    """The queue a provider keeps (its ``extraction_jobs`` accessor). Every method is
    one transaction of the provider's storage, shared by every process that shares it."""

    async def enqueue(self, job: ExtractionJob) -> EnqueuedJob:
        """Store ``job`` unless a job with its id exists (in any state), which is then
        answered instead (``created=False``)."""
        ...

    async def lease(self, owner: str, now: float, lease_until: float,
                    limit: int) -> list[ExtractionJob]:
        """Lease up to ``limit`` due jobs, oldest first: pending ones whose
        ``next_attempt_at`` passed and leased ones whose lease expired by ``now``. Each
        one's ``attempts`` grows by one, so a job that kills its workers still spends
        its budget. PostgreSQL leases with ``SKIP LOCKED``."""
        ...

    async def settle(self, settlement: Settlement, now: float) -> bool:
        """Apply ``settlement`` if the job is still leased as it names (owner and
        attempt); ``False`` (nothing changed) when the lease was lost."""
        ...

    async def status(self) -> ExtractionQueueStatus: ...

    async def jobs(self, state: ExtractionJobState, limit: int) -> list[ExtractionJob]:
        """Jobs in ``state``, oldest first (dead letters for the status)."""
        ...

    async def requeue_dead(self, job_ids: Sequence[str] | None, now: float) -> int:
        """Dead letters back to pending (all when ``job_ids`` is ``None``) with a fresh
        attempt budget; returns how many."""
        ...

    async def erase_user(self, tenant_id: str, user_id: str) -> int:
        """Remove every job, in any state, whose owner is this user of this tenant (an
        erasure: a job holds the user's identifiers); returns how many."""
        ...


class HasExtractionJobs(Protocol):
    @property
    def extraction_jobs(self) -> ExtractionJobStore | None: ...
