"""The storage port's repositories: one per kind of stored thing, reads apart from writes.

A transaction (:mod:`storage.port`) hands these out as properties, so a call names what it
touches (``tx.records.get``, ``tx.versions.append``, ``tx.outbox.put``) and a read
transaction's type simply has no write to offer. Each ``...Writes`` protocol extends its
``...Reads``: a write unit reads what it decides on through the same object it writes
with. A new backend implements every protocol here; :class:`VectorChangeLog` is the one
optional part (without it, vector search stays exact).

Every method works inside the one transaction it came from: reads see its snapshot,
writes commit or roll back with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from governed_memory.embedding import EmbedderIdentity
from governed_memory.events import MemoryEvent
from governed_memory.indexing import IndexJob, JobState
from governed_memory.records import MemoryRecord, MemoryType, MemoryVersion
from governed_memory.scope_revisions import ScopeState

from governed_memory_native.storage.values import (
    IdempotencyEntry,
    Removal,
    SearchPage,
    SearchQuery,
    StoredVector,
    VectorQuery,
    VectorScopeState,
)


class RecordReads(Protocol):
    """Memory records by id, key, scope and user, with the filters a caller may see."""

    async def get(self, scope_hash: str, record_id: str) -> MemoryRecord | None:
        """The record of that exact scope in any status, or ``None``."""
        ...

    async def by_key(self, scope_hash: str, key: str) -> MemoryRecord | None:
        """The non-deleted record holding ``key`` in that exact scope (even expired)."""
        ...

    async def visible(
        self, scope_hash: str, after_id: str | None, limit: int,
        memory_types: tuple[MemoryType, ...], now: float,
    ) -> list[MemoryRecord]:
        """Active, unexpired records of one scope with id > ``after_id``, ascending by id."""
        ...

    async def pending(self, scope_hash: str, after_id: str | None, limit: int,
                      now: float) -> list[MemoryRecord]:
        """Records of one scope held for review (``pending_review``), not expired at
        ``now``, with id > ``after_id``, ascending by id (the review queue)."""
        ...

    async def canonical(self, scope_hash: str, content_hash: str,
                        key: str | None, now: float) -> MemoryRecord | None:
        """The oldest record of the exact scope with this content hash and this key (or,
        for ``None``, no key) that a new identical record would duplicate: active or
        pending, not expired, valid at ``now`` (``[write] dedup``)."""
        ...

    async def by_ids(self, scope_hashes: Sequence[str],
                     record_ids: Sequence[str]) -> list[MemoryRecord]:
        """The records among ``record_ids`` that belong to one of ``scope_hashes``."""
        ...

    async def scan(self, scope_hash: str, after_id: str | None,
                   limit: int) -> list[MemoryRecord]:
        """Records of the exact scope in any status with id > ``after_id``, ascending."""
        ...

    async def ids_in_scope(self, scope_hash: str, after_id: str | None,
                           limit: int) -> list[str]:
        """Ids of every record of the exact scope in any status, ascending."""
        ...

    async def ids_of_user(self, tenant_id: str, user_id: str, limit: int) -> list[str]:
        """Ids of records whose scope has this tenant and this user, any scope, any status."""
        ...

    async def usage(self, tenant_id: str, scope_hash: str | None,
                    now: float) -> tuple[int, int]:
        """``(records, content bytes)`` of the tenant, or of one exact scope, counting every
        record that is neither deleted nor expired at ``now`` (pending ones included)."""
        ...

    async def live_count(self, now: float) -> int:
        """Records neither deleted nor expired at ``now``, every tenant."""
        ...

    async def expired(self, now: float, limit: int) -> list[tuple[str, str]]:
        """``(record id, tenant id)`` of up to ``limit`` records of any scope, any status,
        whose ``expires_at`` is at or before ``now``: earliest expiry first, then by id
        (the store-wide expiry purge, served by an index on ``expires_at``)."""
        ...

    async def expired_among(self, tenant_id: str, record_ids: Sequence[str],
                            now: float) -> list[str]:
        """The ids among ``record_ids`` of records of the tenant still stored and expired
        at ``now``, ascending (what a purge batch found, read again under the tenant's
        writer lock: another worker may have removed them since)."""
        ...


class RecordWrites(RecordReads, Protocol):
    async def insert(self, record: MemoryRecord) -> None:
        """Store a new record and index it (unless deleted).

        Raises ``MemoryConflictError`` if its key is held by a non-deleted record.
        """
        ...

    async def replace(self, record: MemoryRecord, expected_revision: str) -> bool:
        """Compare-and-set: replace the row only if its revision is still the expected one.

        Re-indexes the record (removing it from the index once deleted). ``False`` means
        another writer got there first and nothing changed.
        """
        ...

    async def mark_indexed(self, record_id: str, version: int) -> None:
        """Set the record's ``index_state`` to indexed if it is still at ``version``
        (no new version or revision: indexing is not a write of the memory)."""
        ...


class LexicalSearch(Protocol):
    """BM25 over the postings every record write keeps (no write of its own: the
    postings follow :class:`RecordWrites`)."""

    async def search(self, query: SearchQuery) -> SearchPage:
        """Matches ordered by score desc then id asc, every filter applied in storage."""
        ...


class VersionReads(Protocol):
    async def of(self, record_id: str) -> list[MemoryVersion]:
        """Every stored version of the record, ascending by version."""
        ...

    async def get(self, record_id: str, version: int) -> MemoryVersion | None: ...


class VersionWrites(VersionReads, Protocol):
    async def append(self, version: MemoryVersion) -> None: ...


class IdempotencyReads(Protocol):
    async def get(self, scope_hash: str, operation: str,
                  key: str) -> IdempotencyEntry | None: ...


class IdempotencyWrites(IdempotencyReads, Protocol):
    async def put(self, entry: IdempotencyEntry) -> None:
        """Store the entry, replacing one of the same scope, operation and key."""
        ...

    async def erase(self, *, scope_hash: str | None = None,
                    tenant_user: tuple[str, str] | None = None) -> Removal:
        """Remove entries of one scope or one user, including ones for vanished records."""
        ...


class OutboxReads(Protocol):
    """The event outbox (issue 5): a write's ``committed`` event, stored with the write."""

    async def pending(self, limit: int) -> list[MemoryEvent]:
        """Stored, unacknowledged events in the order they were committed (oldest
        first), at most ``limit``."""
        ...


class OutboxWrites(OutboxReads, Protocol):
    async def put(self, event: MemoryEvent) -> None:
        """Store a write's ``committed`` event in this transaction.

        An event whose ``event_id`` is already stored is ignored: event ids are unique
        per operation and delivery is at least once, so a second copy adds nothing.
        """
        ...

    async def acknowledge(self, event_ids: Sequence[str]) -> None:
        """Remove delivered events; unknown ids are ignored. Nothing reads a count, so
        a backend may send the removal with the transaction's next statement."""
        ...


class IndexJobReads(Protocol):
    """The indexing outbox (issue 8): which records still need a vector (or its removal)."""

    async def in_state(self, state: JobState, limit: int) -> list[IndexJob]:
        """Jobs in ``state``, oldest first."""
        ...

    async def counts(self) -> tuple[dict[str, int], float | None]:
        """Jobs per state, and the oldest pending job's ``created_at``."""
        ...


class IndexJobWrites(IndexJobReads, Protocol):
    async def enqueue(self, job: IndexJob) -> None:
        """Add a job; pending (unleased) jobs of the same record for older versions are
        dropped, since the newer job makes them moot."""
        ...

    async def lease(self, owner: str, now: float, lease_until: float,
                    limit: int) -> list[IndexJob]:
        """Lease due jobs: pending ones whose ``next_attempt_at`` passed, and leased ones
        whose lease expired. Each leased job's ``attempts`` grows by one (so a worker
        killed over and over still exhausts the budget). Oldest first."""
        ...

    async def settle(self, job: IndexJob, *, done: bool,
                     next_attempt_at: float | None = None,
                     error_code: str | None = None) -> bool:
        """Settle a job leased as ``job`` (same owner, same attempt): ``done`` deletes
        it; otherwise it returns to pending at ``next_attempt_at``, or becomes dead when
        that is ``None``. ``False`` (nothing changed) if the lease was lost."""
        ...

    async def requeue_dead(self, job_ids: Sequence[str] | None, now: float) -> int: ...


class VectorReads(Protocol):
    """Stored vectors: one per record and embedder identity, for one content."""

    async def candidates(self, query: VectorQuery) -> list[tuple[str, bytes]]:
        """``(record id, vector)`` of every record passing the query's hard filters whose
        vector of ``query.identity`` matches its current content hash (lexical terms
        are ignored)."""
        ...

    async def of(self, record_id: str, identity: EmbedderIdentity) -> StoredVector | None: ...

    async def counts(self) -> dict[str, int]:
        """Stored vectors per embedder identity (``str(identity)``)."""
        ...

    async def missing(
        self, identity: EmbedderIdentity, after_id: str | None, limit: int, now: float,
    ) -> tuple[list[tuple[str, str, int]], int, str | None]:
        """Walk a page of up to ``limit`` live records (not deleted, not expired) with id
        > ``after_id``, ascending: ``([(id, scope hash, version)] of those without a
        vector of ``identity`` for their current content, how many were walked, the
        last id walked (``None`` when none was))``."""
        ...


class VectorWrites(VectorReads, Protocol):
    async def put(self, vector: StoredVector) -> None:
        """Store (or replace) the record's vector of that identity; the record's vectors
        of every other identity are removed (one model at a time; reindex refills)."""
        ...

    async def remove(self, record_id: str) -> int:
        """Remove every vector of the record; returns how many."""
        ...


@runtime_checkable
class VectorChangeLog(Protocol):
    """What a backend's vectors offer a vector index kept in process memory (optional).

    Every change to a stored vector (a put, a removal, an erasure, a cascade) bumps its
    (identity, scope)'s sequence by one and logs the record id in the same transaction,
    so an in-process index catches up on exactly what changed (:mod:`retrieval.vector_index`). The
    log is kept by storage itself (SQL triggers), so every writer, in any process, feeds
    it; a search reads one row per searched scope to see whether anything changed.
    """

    async def scope_states(self, identity: EmbedderIdentity,
                           scope_hashes: Sequence[str]) -> dict[str, VectorScopeState]:
        """The state of each requested scope's vectors of ``identity`` (a scope with
        none, or never any, is absent)."""
        ...

    async def changes(self, identity: EmbedderIdentity, scope_hash: str,
                      after_seq: int, limit: int) -> list[tuple[int, str]]:
        """``(seq, record id)`` of the logged changes with ``seq > after_seq``, ascending,
        at most ``limit``. The log keeps a bounded tail per scope, so the first one
        returned may be later than ``after_seq + 1``."""
        ...

    async def in_scope(self, identity: EmbedderIdentity, scope_hash: str,
                       after_id: str | None, limit: int) -> list[tuple[str, bytes]]:
        """``(record id, vector)`` of every stored vector of ``identity`` in the scope
        with record id > ``after_id``, ascending, at most ``limit`` (whatever the record's
        status: the index holds what storage holds, a search filters)."""
        ...

    async def by_ids(self, identity: EmbedderIdentity, scope_hash: str,
                     record_ids: Sequence[str]) -> list[tuple[str, bytes]]:
        """The stored vectors of ``identity`` among ``record_ids`` in the scope."""
        ...


class SnapshotReads(Protocol):
    """Retrieval snapshots (issue 8): ids, versions and scores of a search, no content."""

    async def get(self, snapshot_id: str) -> Mapping[str, Any] | None:
        """A stored retrieval snapshot (its JSON form), or ``None``."""
        ...


class SnapshotWrites(SnapshotReads, Protocol):
    async def put(self, snapshot_id: str, tenant_id: str, body: Mapping[str, Any], *,
                  created_at: float, subjects: Sequence[str]) -> None:
        """Store a retrieval snapshot; ``subjects`` are the user ids of the searched
        scopes, so erasing a user finds the snapshots that name them."""
        ...

    async def erase_of_user(self, tenant_id: str, user_id: str,
                            tombstone: Mapping[str, Any]) -> int:
        """Replace every snapshot naming the user with ``tombstone`` (no scopes, no
        hits); returns how many."""
        ...

    async def purge(self, before: float, limit: int) -> int:
        """Remove up to ``limit`` snapshots created before ``before``."""
        ...


class Erasure(Protocol):
    """Physical erasure and the bookkeeping that lets a batched one account for itself."""

    async def erase(self, record_ids: Sequence[str], *,
                    tombstone_idempotency: bool = False) -> Removal:
        """Physically remove records with their versions, index rows, vectors, index jobs
        and idempotency entries. Retrieval snapshots stay (they hold no content; replay
        reports the erased versions).

        With ``tombstone_idempotency`` the records' idempotency entries are kept but marked
        ``erased`` (they hold no content) instead of being removed.
        """
        ...

    async def add_progress(self, tenant_id: str, user_id: str, removal: Removal,
                           started_at: float) -> None:
        """Add one committed erasure batch to the user's progress row (counts summed,
        scope hashes united, the earliest ``started_at`` kept): ``delete_user`` erases in
        batches, and its receipt accounts for every one, also those of an earlier,
        interrupted run."""
        ...

    async def take_progress(self, tenant_id: str,
                            user_id: str) -> tuple[Removal, float | None]:
        """The user's progress so far and when it started (``Removal()`` and ``None``
        when there is none), removing the row."""
        ...


class ScopeRevisionReads(Protocol):
    """Per-scope revisions that every change to a scope's records or vectors advances in
    its own transaction (SQL: triggers; memory: the repositories), and per-tenant epochs
    (``governed_memory.scope_revisions``)."""

    async def read(self, tenant_id: str, scope_hashes: Sequence[str],
                   now: float) -> ScopeState:
        """Each scope's revision (0 if it never changed), then the tenant's epoch, and
        the earliest instant after ``now`` at which a record of those scopes expires or
        becomes valid or invalid: one statement, one snapshot."""
        ...


class ScopeRevisionWrites(ScopeRevisionReads, Protocol):
    async def advance_epoch(self, tenant_id: str, forget: Sequence[str]) -> None:
        """Advance the tenant's epoch and drop the revisions of ``forget`` (an erased
        user's scope hashes): safe together, since every cached page is stored under
        the epoch too, so no page of the old epoch is reachable again."""
        ...
