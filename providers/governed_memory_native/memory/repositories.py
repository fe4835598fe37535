"""The in-memory backend's other repositories: plain dicts, changed through an undo journal.

Versions, idempotency entries, the event outbox, index jobs, vectors with their change
log, retrieval snapshots, erasure and scope revisions: each is a few dict operations over
the shared :class:`~memory.state.State`, every change logged in the transaction's
:class:`~memory.state.Journal` so that a failed unit leaves nothing behind. The records
and their lexical index are :mod:`memory.records`; the names that lived here before the
split are still importable from this module.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
from governed_memory.embedding import EmbedderIdentity
from governed_memory.errors import MemoryConflictError
from governed_memory.events import MemoryEvent
from governed_memory.indexing import IndexJob, JobState
from governed_memory.records import MemoryVersion, RecordStatus
from governed_memory.scope_revisions import ScopeState, epoch_name

from governed_memory_native.memory.records import MemoryLexicalSearch as MemoryLexicalSearch
from governed_memory_native.memory.records import MemoryRecords as MemoryRecords
from governed_memory_native.memory.records import is_canonical as is_canonical
from governed_memory_native.memory.state import Journal as Journal
from governed_memory_native.memory.state import Repository, Row, Snapshot
from governed_memory_native.memory.state import State as State
from governed_memory_native.memory.state import passes_filters as passes_filters
from governed_memory_native.sqlite.schema import VECTOR_LOG_KEEP
from governed_memory_native.storage.values import (
    IdempotencyEntry,
    Removal,
    StoredVector,
    VectorQuery,
    VectorScopeState,
)


def _job_order(job: IndexJob) -> tuple[float, str]:
    return (job.created_at, job.job_id)


class MemoryVersions(Repository):
    __slots__ = ()

    async def of(self, record_id: str) -> list[MemoryVersion]:
        return list(self._state.versions.get(record_id, ()))

    async def get(self, record_id: str, version: int) -> MemoryVersion | None:
        for stored in self._state.versions.get(record_id, ()):
            if stored.record.version == version:
                return stored
        return None

    async def append(self, version: MemoryVersion) -> None:
        record_id = version.record.id
        history = [*self._state.versions.get(record_id, ()), version]
        self._journal.set(self._state.versions, record_id, history)


class MemoryIdempotency(Repository):
    __slots__ = ()

    async def get(
        self, scope_hash: str, operation: str, key: str
    ) -> IdempotencyEntry | None:
        return self._state.idempotency.get((scope_hash, operation, key))

    async def put(self, entry: IdempotencyEntry) -> None:
        self._journal.set(self._state.idempotency,
                          (entry.scope_hash, entry.operation, entry.key), entry)

    async def erase(
        self, *, scope_hash: str | None = None,
        tenant_user: tuple[str, str] | None = None,
    ) -> Removal:
        def doomed(entry: IdempotencyEntry) -> bool:
            if scope_hash is not None:
                return entry.scope_hash == scope_hash
            if tenant_user is not None:
                return (entry.tenant_id, entry.user_id) == tenant_user
            return False

        stale = [(key, entry) for key, entry in self._state.idempotency.items() if doomed(entry)]
        for key, _ in stale:
            self._journal.pop(self._state.idempotency, key)
        return Removal(idempotency_entries=len(stale),
                       scope_hashes=frozenset(entry.scope_hash for _, entry in stale))


class MemoryOutbox(Repository):
    __slots__ = ()

    async def pending(self, limit: int) -> list[MemoryEvent]:
        oldest = heapq.nsmallest(limit, self._state.events.values(), key=lambda item: item[0])
        return [event for _, event in oldest]

    async def put(self, event: MemoryEvent) -> None:
        if event.event_id not in self._state.events:
            self._journal.set(self._state.events, event.event_id,
                      (next(self._state.event_sequence), event))

    async def acknowledge(self, event_ids: Sequence[str]) -> None:
        for event_id in dict.fromkeys(event_ids):
            if event_id in self._state.events:
                self._journal.pop(self._state.events, event_id)


class MemoryIndexJobs(Repository):
    __slots__ = ()

    async def in_state(self, state: JobState, limit: int) -> list[IndexJob]:
        return sorted((job for job in self._state.jobs.values() if job.state is state),
                      key=_job_order)[:limit]

    async def counts(self) -> tuple[dict[str, int], float | None]:
        counts = Counter(job.state.value for job in self._state.jobs.values())
        pending = [job.created_at for job in self._state.jobs.values()
                   if job.state is JobState.PENDING]
        return dict(counts), min(pending, default=None)

    async def enqueue(self, job: IndexJob) -> None:
        for stale in [other for other in self._state.jobs.values()
                      if other.record_id == job.record_id and other.state is JobState.PENDING
                      and other.version <= job.version]:
            self._journal.pop(self._state.jobs, stale.job_id)
        self._journal.set(self._state.jobs, job.job_id, job)

    async def lease(self, owner: str, now: float, lease_until: float,
                               limit: int) -> list[IndexJob]:
        due = sorted(
            (job for job in self._state.jobs.values()
             if (job.state is JobState.PENDING and job.next_attempt_at <= now)
             or (job.state is JobState.LEASED and job.lease_expires_at is not None
                 and job.lease_expires_at <= now)),
            key=_job_order,
        )[:limit]
        leased = []
        for job in due:
            taken = attrs.evolve(job, state=JobState.LEASED, lease_owner=owner,
                                 lease_expires_at=lease_until, attempts=job.attempts + 1)
            self._journal.set(self._state.jobs, job.job_id, taken)
            leased.append(taken)
        return leased

    async def settle(self, job: IndexJob, *, done: bool,
                               next_attempt_at: float | None = None,
                               error_code: str | None = None) -> bool:
        current = self._state.jobs.get(job.job_id)
        if (current is None or current.state is not JobState.LEASED
                or current.lease_owner != job.lease_owner or current.attempts != job.attempts):
            return False
        if done:
            self._journal.pop(self._state.jobs, job.job_id)
            return True
        self._journal.set(self._state.jobs, job.job_id, attrs.evolve(
            current, state=JobState.DEAD if next_attempt_at is None else JobState.PENDING,
            next_attempt_at=current.next_attempt_at if next_attempt_at is None
            else next_attempt_at,
            lease_owner=None, lease_expires_at=None, last_error_code=error_code))
        return True

    async def requeue_dead(self, job_ids: Sequence[str] | None, now: float) -> int:
        wanted = None if job_ids is None else set(job_ids)
        dead = [job for job in self._state.jobs.values() if job.state is JobState.DEAD
                and (wanted is None or job.job_id in wanted)]
        for job in dead:
            self._journal.set(self._state.jobs, job.job_id, attrs.evolve(
                job, state=JobState.PENDING, attempts=0, next_attempt_at=now))
        return len(dead)


class MemoryVectors(Repository):
    __slots__ = ()

    async def candidates(self, query: VectorQuery) -> list[tuple[str, bytes]]:
        key = str(query.identity)
        found = []
        rows: Iterable[Row] = self._state.rows.values()
        if query.among is not None:
            rows = [self._state.rows[record_id] for record_id in dict.fromkeys(query.among)
                    if record_id in self._state.rows]
        for row in rows:
            record = row.record
            vector = self._state.vectors.get(record.id, {}).get(key)
            if (vector is not None and vector.content_hash == record.content_hash
                    and passes_filters(record, query.filters)):
                found.append((record.id, vector.vector))
        return found

    async def of(self, record_id: str,
                        identity: EmbedderIdentity) -> StoredVector | None:
        return self._state.vectors.get(record_id, {}).get(str(identity))

    async def counts(self) -> dict[str, int]:
        return dict(Counter(key for vectors in self._state.vectors.values() for key in vectors))

    async def missing(
        self, identity: EmbedderIdentity, after_id: str | None, limit: int, now: float,
    ) -> tuple[list[tuple[str, str, int]], int, str | None]:
        key = str(identity)
        walked = sorted(
            (row.record for row in self._state.rows.values()
             if row.record.status is not RecordStatus.DELETED and not row.record.is_expired(now)
             and (after_id is None or row.record.id > after_id)),
            key=lambda record: record.id,
        )[:limit]
        missing = []
        for record in walked:
            vector = self._state.vectors.get(record.id, {}).get(key)
            if vector is None or vector.content_hash != record.content_hash:
                missing.append((record.id, record.scope_hash, record.version))
        return missing, len(walked), walked[-1].id if walked else None

    async def put(self, vector: StoredVector) -> None:
        key = str(vector.identity)
        for other, stored in self._state.vectors.get(vector.record_id, {}).items():
            self._log_vector_change(other, stored, -1 if other != key else 0)
        if key not in self._state.vectors.get(vector.record_id, {}):
            self._log_vector_change(key, vector, +1)
        self._journal.set(self._state.vectors, vector.record_id, {key: vector})

    async def remove(self, record_id: str) -> int:
        held = self._state.vectors.get(record_id, {})
        for key, stored in held.items():
            self._log_vector_change(key, stored, -1)
        self._journal.pop(self._state.vectors, record_id)
        return len(held)

    def _log_vector_change(self, key: str, vector: StoredVector, count: int) -> None:
        """What SQLite's triggers on ``memory_vectors`` do: the (identity, scope)'s seq
        grows by one, its count by ``count``; the change is logged and the tail kept."""
        scope_hash = vector.scope_hash
        self._advance(scope_hash)
        state = self._state.vector_scopes.get((key, scope_hash), VectorScopeState())
        seq = state.seq + 1
        self._journal.set(self._state.vector_scopes, (key, scope_hash),
                  VectorScopeState(seq, state.vectors + count))
        self._journal.set(self._state.vector_changes, (key, scope_hash, seq), vector.record_id)
        self._journal.pop(self._state.vector_changes, (key, scope_hash, seq - VECTOR_LOG_KEEP))

    # -- the change log (repositories.VectorChangeLog) ---------------------------------

    async def scope_states(self, identity: EmbedderIdentity,
                                  scope_hashes: Sequence[str]) -> dict[str, VectorScopeState]:
        key = str(identity)
        states = self._state.vector_scopes
        return {scope_hash: states[(key, scope_hash)] for scope_hash in scope_hashes
                if (key, scope_hash) in states}

    async def changes(self, identity: EmbedderIdentity, scope_hash: str,
                             after_seq: int, limit: int) -> list[tuple[int, str]]:
        key = str(identity)
        state = self._state.vector_scopes.get((key, scope_hash))
        if state is None:
            return []
        log = self._state.vector_changes
        first = max(after_seq + 1, state.seq - VECTOR_LOG_KEEP + 1)
        return [(seq, log[(key, scope_hash, seq)])
                for seq in range(first, min(state.seq, first + limit - 1) + 1)]

    async def in_scope(self, identity: EmbedderIdentity, scope_hash: str,
                            after_id: str | None, limit: int) -> list[tuple[str, bytes]]:
        key = str(identity)
        found = sorted(
            (record_id, vector.vector) for record_id, vectors in self._state.vectors.items()
            if (vector := vectors.get(key)) is not None and vector.scope_hash == scope_hash
            and (after_id is None or record_id > after_id))
        return found[:limit]

    async def by_ids(self, identity: EmbedderIdentity, scope_hash: str,
                             record_ids: Sequence[str]) -> list[tuple[str, bytes]]:
        key = str(identity)
        found = []
        for record_id in dict.fromkeys(record_ids):
            vector = self._state.vectors.get(record_id, {}).get(key)
            if vector is not None and vector.scope_hash == scope_hash:
                found.append((record_id, vector.vector))
        return found


class MemorySnapshots(Repository):
    __slots__ = ()

    async def get(self, snapshot_id: str) -> Mapping[str, Any] | None:
        stored = self._state.snapshots.get(snapshot_id)
        return None if stored is None else stored.body

    async def put(self, snapshot_id: str, tenant_id: str, body: Mapping[str, Any],
                           *, created_at: float, subjects: Sequence[str]) -> None:
        if snapshot_id in self._state.snapshots:
            raise MemoryConflictError("a retrieval snapshot with this id already exists")
        self._journal.set(self._state.snapshots, snapshot_id,
                  Snapshot(tenant_id, body, created_at, frozenset(subjects)))

    async def erase_of_user(self, tenant_id: str, user_id: str,
                                      tombstone: Mapping[str, Any]) -> int:
        named = [(snapshot_id, stored) for snapshot_id, stored in self._state.snapshots.items()
                 if stored.tenant_id == tenant_id and user_id in stored.subjects]
        for snapshot_id, stored in named:
            self._journal.set(self._state.snapshots, snapshot_id, Snapshot(
                tenant_id, {**tombstone, "snapshot_id": snapshot_id}, stored.created_at,
                frozenset()))
        return len(named)

    async def purge(self, before: float, limit: int) -> int:
        old = sorted((stored.created_at, snapshot_id)
                     for snapshot_id, stored in self._state.snapshots.items()
                     if stored.created_at < before)[:limit]
        for _, snapshot_id in old:
            self._journal.pop(self._state.snapshots, snapshot_id)
        return len(old)


class MemoryErasure(Repository):
    """Erasing a record also takes it out of the key map and the lexicon, and removes
    its vectors through the vectors repository (so the change log sees them go)."""

    __slots__ = ("_records", "_vectors")

    def __init__(self, state: State, journal: Journal, records: MemoryRecords,
                 vectors: MemoryVectors) -> None:
        super().__init__(state, journal)
        self._records = records
        self._vectors = vectors

    async def erase(
        self, record_ids: Sequence[str], *, tombstone_idempotency: bool = False
    ) -> Removal:
        removal = Removal()
        doomed = set(record_ids)
        for job in [job for job in self._state.jobs.values() if job.record_id in doomed]:
            self._journal.pop(self._state.jobs, job.job_id)
        for record_id in sorted(doomed):
            row = self._state.rows.get(record_id)
            if row is None:
                continue
            self._records.release_key(row.record)
            self._records.unindex(row)
            self._journal.pop(self._state.rows, record_id)
            self._advance(row.record.scope_hash)
            versions = len(self._state.versions.get(record_id, ()))
            self._journal.pop(self._state.versions, record_id)
            vectors = await self._vectors.remove(record_id)
            removal += Removal(records=1, versions=versions,
                               index_entries=int(row.document is not None) + vectors,
                               scope_hashes=frozenset({row.record.scope_hash}))
        stale = [(key, entry) for key, entry in self._state.idempotency.items()
                 if entry.record_id in doomed]
        if tombstone_idempotency:
            for key, entry in stale:
                self._journal.set(self._state.idempotency, key, attrs.evolve(entry, erased=True))
            return removal
        for key, _ in stale:
            self._journal.pop(self._state.idempotency, key)
        return removal + Removal(idempotency_entries=len(stale))

    async def add_progress(self, tenant_id: str, user_id: str, removal: Removal,
                                   started_at: float) -> None:
        key = (tenant_id, user_id)
        prior, began = self._state.erasures.get(key, (Removal(), started_at))
        self._journal.set(self._state.erasures, key, (prior + removal, min(began, started_at)))

    async def take_progress(self, tenant_id: str,
                                    user_id: str) -> tuple[Removal, float | None]:
        key = (tenant_id, user_id)
        found = self._state.erasures.get(key)
        if found is None:
            return Removal(), None
        self._journal.pop(self._state.erasures, key)
        return found


class MemoryScopeRevisions(Repository):
    __slots__ = ()

    async def read(self, tenant_id: str, scope_hashes: Sequence[str],
                   now: float) -> ScopeState:
        revisions = self._state.scope_revisions
        wanted = set(scope_hashes)
        instants = [at for row in self._state.rows.values()
                    if row.record.scope_hash in wanted
                    for at in (row.record.expires_at, row.record.valid_from,
                               row.record.invalid_at)
                    if at is not None and at > now]
        return ScopeState(
            (*(revisions.get(scope_hash, 0) for scope_hash in scope_hashes),
             revisions.get(epoch_name(tenant_id), 0)),
            min(instants) if instants else None)

    async def advance_epoch(self, tenant_id: str, forget: Sequence[str]) -> None:
        for scope_hash in forget:
            self._journal.pop(self._state.scope_revisions, scope_hash)
        self._advance(epoch_name(tenant_id))
