"""The storage-backend port: the narrow seam between provider semantics and a datastore.

The provider core decides *what* happens (idempotency, compare-and-set, key ownership,
expiry, erasure bookkeeping); a backend only knows how to keep rows and a lexical index
consistent inside one transaction. Keeping decisions out of the backends is what lets a
PostgreSQL backend arrive later without touching the core, and lets the in-memory and
SQLite backends be held to identical behaviour by one test suite.

Records handed across this port may be shared with the backend's own state, so the
provider detaches every record before returning it to a caller.

Port additions, in the order they arrived (a new backend implements all of them):

- event outbox (issue 5): ``ReadTransaction.pending_events``,
  ``WriteTransaction.put_event`` and ``WriteTransaction.acknowledge_events``. A write's
  ``committed`` event is stored by ``put_event`` in the write's own transaction, so it
  commits (or rolls back) with the record; a backend that implements them declares
  ``Capabilities(event_outbox=True)``.
- vectors and the indexing outbox (issue 8): ``StoredVector``, ``VectorQuery``;
  ``ReadTransaction.vector_candidates``, ``records_by_ids``, ``vector_of``,
  ``index_jobs``, ``index_job_counts``, ``vector_counts``, ``records_missing_vectors``,
  ``live_record_count``; ``WriteTransaction.put_vector``, ``remove_vectors``,
  ``enqueue_index_job``, ``lease_index_jobs``, ``settle_index_job``,
  ``requeue_dead_jobs``, ``mark_indexed``. ``erase_records`` also erases the records'
  vectors and index jobs (counted in ``Removal.index_entries``).
  ``SearchQuery`` gained ``valid_at`` (validity is a hard filter) and ``visibilities``.
- retrieval snapshots (issue 8): ``WriteTransaction.put_snapshot``,
  ``erase_snapshots_of_user``, ``purge_snapshots``; ``ReadTransaction.snapshot``.
  ``erase_records`` leaves snapshots (they hold ids, versions and scores, no content;
  replay reports the erased versions), ``delete_user`` turns the user's snapshots into
  tombstones.
- erasure progress (issue 5/8): ``WriteTransaction.add_erasure_progress`` and
  ``take_erasure_progress``. ``delete_user`` erases in batches; each batch but the last
  adds what it removed to a per-user progress row in its own transaction, and the last
  takes the row, so the receipt (and its committed event) accounts for every batch, also
  for batches an interrupted earlier run committed.
- the vector change log (issue 13): :class:`VectorChangeLog` (``vector_scope_states``,
  ``vector_changes``, ``scope_vectors``, ``vectors_by_ids``, ``compute``),
  :class:`VectorScopeState` and ``VectorQuery.among``. Every change to a stored vector
  (``put_vector``, ``remove_vectors``, ``erase_records``, a cascade) bumps its
  (identity, scope)'s sequence by one and logs the record id in the same transaction, so
  an in-process vector index catches up on exactly what changed (see
  :mod:`vector_index`). A backend whose transactions do not implement the protocol is
  searched exactly, as before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, TypeVar, runtime_checkable

import attrs
from governed_memory.embedding import EmbedderIdentity
from governed_memory.events import MemoryEvent
from governed_memory.indexing import IndexJob, JobState
from governed_memory.records import (
    Capabilities,
    MemoryRecord,
    MemoryType,
    MemoryVersion,
    Visibility,
)

T = TypeVar("T")


@attrs.frozen(slots=True)
class IdempotencyEntry:
    """What a write with an idempotency key produced, so a retry can get it back.

    ``tenant_id``/``user_id`` are kept so that erasing a user also erases entries that
    point at records already hard-deleted (they still name the user's record ids).

    ``erased`` marks a tombstone left by a hard delete of that one record: it holds ids
    and hashes only, so a replay of the add (or update) that wrote the record is refused
    instead of silently writing the erased record again.
    """

    scope_hash: str
    operation: str
    key: str
    fingerprint: str
    record_id: str
    tenant_id: str
    user_id: str | None
    created_at: float
    version: int | None = None
    revision: str | None = None
    hard: bool = False
    erased: bool = False


@attrs.frozen(slots=True)
class SearchQuery:
    """A lexical search with every hard filter, so a backend can apply them in storage."""

    scope_hashes: tuple[str, ...]
    tokens: tuple[str, ...]
    now: float
    limit: int
    memory_types: tuple[MemoryType, ...] = ()
    entity_ids: tuple[str, ...] = ()
    metadata_filter: Mapping[str, Any] = attrs.field(factory=dict)
    valid_at: float | None = None
    """When set, only records valid then (``valid_from <= t < invalid_at``) match."""
    visibilities: tuple[Visibility, ...] = ()
    """When set, only records of these visibilities match."""


@attrs.frozen(slots=True)
class VectorQuery:
    """Vector candidates under the same hard filters as a lexical search."""

    filters: SearchQuery
    identity: EmbedderIdentity
    among: tuple[str, ...] | None = None
    """When set, only these records are candidates (the ones a vector index proposed);
    every hard filter still applies to them."""


@attrs.frozen(slots=True)
class VectorScopeState:
    """Where one (embedder identity, scope)'s stored vectors stand.

    ``seq`` grows by exactly one with every change to one of those vectors (stored,
    replaced or removed, erasure included), in the transaction that makes it, and
    ``vectors`` counts them. Change ``n`` of the log is the one that set ``seq`` to ``n``;
    changes are contiguous, so a gap at the start of what the log returns means it was
    pruned there.
    """

    seq: int = 0
    vectors: int = 0


@attrs.frozen(slots=True)
class StoredVector:
    """One record's vector from one embedder, for one content (``content_hash``).

    A vector only counts for ranking while its identity is the configured embedder's
    and its ``content_hash`` is the record's current one: a stale or foreign vector is
    never mixed in, whatever the outbox has or has not done yet.
    """

    record_id: str
    scope_hash: str
    version: int
    content_hash: str
    identity: EmbedderIdentity
    vector: bytes = attrs.field(repr=False)
    """``identity.dimension`` little-endian float32 values, L2-normalised."""
    created_at: float = 0.0


@attrs.frozen(slots=True)
class ScoredRecord:
    record: MemoryRecord
    score: float


@attrs.frozen(slots=True)
class SearchPage:
    """The best ``limit`` matches and how many matched before the limit was applied."""

    matches: tuple[ScoredRecord, ...]
    candidates: int


@attrs.frozen(slots=True)
class Removal:
    """What one physical erasure removed; summed into an erasure receipt."""

    records: int = 0
    versions: int = 0
    index_entries: int = 0
    idempotency_entries: int = 0
    scope_hashes: frozenset[str] = frozenset()

    def __add__(self, other: Removal) -> Removal:
        return Removal(
            records=self.records + other.records,
            versions=self.versions + other.versions,
            index_entries=self.index_entries + other.index_entries,
            idempotency_entries=self.idempotency_entries + other.idempotency_entries,
            scope_hashes=self.scope_hashes | other.scope_hashes,
        )


class ReadTransaction(Protocol):
    """A consistent view for one operation's reads."""

    async def record(self, scope_hash: str, record_id: str) -> MemoryRecord | None:
        """The record of that exact scope in any status, or ``None``."""
        ...

    async def record_by_key(self, scope_hash: str, key: str) -> MemoryRecord | None:
        """The non-deleted record holding ``key`` in that exact scope (even expired)."""
        ...

    async def list_visible(
        self, scope_hash: str, after_id: str | None, limit: int,
        memory_types: tuple[MemoryType, ...], now: float,
    ) -> list[MemoryRecord]:
        """Active, unexpired records of one scope with id > ``after_id``, ascending by id."""
        ...

    async def search(self, query: SearchQuery) -> SearchPage:
        """Matches ordered by score desc then id asc, every filter applied in storage."""
        ...

    async def list_pending(self, scope_hash: str, after_id: str | None, limit: int,
                           now: float) -> list[MemoryRecord]:
        """Records of one scope held for review (``pending_review``), not expired at
        ``now``, with id > ``after_id``, ascending by id (the review queue)."""
        ...

    async def canonical_by_content(self, scope_hash: str, content_hash: str,
                                   key: str | None, now: float) -> MemoryRecord | None:
        """The oldest record of the exact scope with this content hash and this key (or,
        for ``None``, no key) that a new identical record would duplicate: active or
        pending, not expired, valid at ``now`` (``[write] dedup``)."""
        ...

    async def versions(self, record_id: str) -> list[MemoryVersion]:
        """Every stored version of the record, ascending by version."""
        ...

    async def version(self, record_id: str, version: int) -> MemoryVersion | None: ...

    async def idempotency(
        self, scope_hash: str, operation: str, key: str
    ) -> IdempotencyEntry | None: ...

    async def usage(self, tenant_id: str, scope_hash: str | None, now: float) -> tuple[int, int]:
        """``(records, content bytes)`` of the tenant, or of one exact scope, counting every
        record that is neither deleted nor expired at ``now`` (pending ones included)."""
        ...

    async def pending_events(self, limit: int) -> list[MemoryEvent]:
        """Stored, unacknowledged outbox events in the order they were committed (oldest
        first), at most ``limit``."""
        ...

    async def vector_candidates(self, query: VectorQuery) -> list[tuple[str, bytes]]:
        """``(record id, vector)`` of every record passing the query's hard filters whose
        vector of ``query.identity`` matches its current content hash (lexical terms
        are ignored)."""
        ...

    async def records_by_ids(self, scope_hashes: Sequence[str],
                             record_ids: Sequence[str]) -> list[MemoryRecord]:
        """The records among ``record_ids`` that belong to one of ``scope_hashes``."""
        ...

    async def vector_of(self, record_id: str,
                        identity: EmbedderIdentity) -> StoredVector | None: ...

    async def index_jobs(self, state: JobState, limit: int) -> list[IndexJob]:
        """Jobs in ``state``, oldest first."""
        ...

    async def index_job_counts(self) -> tuple[dict[str, int], float | None]:
        """Jobs per state, and the oldest pending job's ``created_at``."""
        ...

    async def vector_counts(self) -> dict[str, int]:
        """Stored vectors per embedder identity (``str(identity)``)."""
        ...

    async def records_missing_vectors(
        self, identity: EmbedderIdentity, after_id: str | None, limit: int, now: float,
    ) -> tuple[list[tuple[str, str, int]], int, str | None]:
        """Walk a page of up to ``limit`` live records (not deleted, not expired) with id
        > ``after_id``, ascending: ``([(id, scope hash, version)] of those without a
        vector of ``identity`` for their current content, how many were walked, the
        last id walked (``None`` when none was))``."""
        ...

    async def live_record_count(self, now: float) -> int: ...

    async def snapshot(self, snapshot_id: str) -> Mapping[str, Any] | None:
        """A stored retrieval snapshot (its JSON form), or ``None``."""
        ...


class WriteTransaction(ReadTransaction, Protocol):
    """Serialized against every other writer; all of it commits or none of it does."""

    async def insert_record(self, record: MemoryRecord) -> None:
        """Store a new record and index it (unless deleted).

        Raises ``MemoryConflictError`` if its key is held by a non-deleted record.
        """
        ...

    async def replace_record(self, record: MemoryRecord, expected_revision: str) -> bool:
        """Compare-and-set: replace the row only if its revision is still the expected one.

        Re-indexes the record (removing it from the index once deleted). ``False`` means
        another writer got there first and nothing changed.
        """
        ...

    async def append_version(self, version: MemoryVersion) -> None: ...

    async def put_idempotency(self, entry: IdempotencyEntry) -> None: ...

    async def erase_records(
        self, record_ids: Sequence[str], *, tombstone_idempotency: bool = False
    ) -> Removal:
        """Physically remove records with their versions, index rows and idempotency entries.

        With ``tombstone_idempotency`` the records' idempotency entries are kept but marked
        ``erased`` (they hold no content) instead of being removed.
        """
        ...

    async def erase_idempotency(
        self, *, scope_hash: str | None = None,
        tenant_user: tuple[str, str] | None = None,
    ) -> Removal:
        """Remove entries of one scope or one user, including ones for vanished records."""
        ...

    async def record_ids_in_scope(
        self, scope_hash: str, after_id: str | None, limit: int
    ) -> list[str]:
        """Ids of every record of the exact scope in any status, ascending."""
        ...

    async def put_event(self, event: MemoryEvent) -> None:
        """Store a write's ``committed`` event in this transaction (the event outbox).

        An event whose ``event_id`` is already stored is ignored: event ids are unique
        per operation and delivery is at least once, so a second copy adds nothing.
        """
        ...

    async def acknowledge_events(self, event_ids: Sequence[str]) -> int:
        """Remove delivered events from the outbox; unknown ids are ignored. Returns how
        many were removed."""
        ...

    async def put_vector(self, vector: StoredVector) -> None:
        """Store (or replace) the record's vector of that identity; the record's vectors
        of every other identity are removed (one model at a time; reindex refills)."""
        ...

    async def remove_vectors(self, record_id: str) -> int:
        """Remove every vector of the record; returns how many."""
        ...

    async def enqueue_index_job(self, job: IndexJob) -> None:
        """Add a job; pending (unleased) jobs of the same record for older versions are
        dropped, since the newer job makes them moot."""
        ...

    async def lease_index_jobs(self, owner: str, now: float, lease_until: float,
                               limit: int) -> list[IndexJob]:
        """Lease due jobs: pending ones whose ``next_attempt_at`` passed, and leased ones
        whose lease expired. Each leased job's ``attempts`` grows by one (so a worker
        killed over and over still exhausts the budget). Oldest first."""
        ...

    async def settle_index_job(self, job: IndexJob, *, done: bool,
                               next_attempt_at: float | None = None,
                               error_code: str | None = None) -> bool:
        """Settle a job leased as ``job`` (same owner, same attempt): ``done`` deletes
        it; otherwise it returns to pending at ``next_attempt_at``, or becomes dead when
        that is ``None``. ``False`` (nothing changed) if the lease was lost."""
        ...

    async def requeue_dead_jobs(self, job_ids: Sequence[str] | None, now: float) -> int: ...

    async def mark_indexed(self, record_id: str, version: int) -> None:
        """Set the record's ``index_state`` to indexed if it is still at ``version``
        (no new version or revision: indexing is not a write of the memory)."""
        ...

    async def put_snapshot(self, snapshot_id: str, tenant_id: str, body: Mapping[str, Any],
                           *, created_at: float, subjects: Sequence[str]) -> None:
        """Store a retrieval snapshot; ``subjects`` are the user ids of the searched
        scopes, so erasing a user finds the snapshots that name them."""
        ...

    async def erase_snapshots_of_user(self, tenant_id: str, user_id: str,
                                      tombstone: Mapping[str, Any]) -> int:
        """Replace every snapshot naming the user with ``tombstone`` (no scopes, no
        hits); returns how many."""
        ...

    async def purge_snapshots(self, before: float, limit: int) -> int:
        """Remove up to ``limit`` snapshots created before ``before``."""
        ...

    async def add_erasure_progress(self, tenant_id: str, user_id: str, removal: Removal,
                                   started_at: float) -> None:
        """Add one committed erasure batch to the user's progress row (counts summed,
        scope hashes united, the earliest ``started_at`` kept)."""
        ...

    async def take_erasure_progress(self, tenant_id: str,
                                    user_id: str) -> tuple[Removal, float | None]:
        """The user's progress so far and when it started (``Removal()`` and ``None``
        when there is none), removing the row."""
        ...

    async def record_ids_of_user(self, tenant_id: str, user_id: str, limit: int) -> list[str]:
        """Ids of records whose scope has this tenant and this user, any scope, any status."""
        ...

    async def scan_scope(
        self, scope_hash: str, after_id: str | None, limit: int
    ) -> list[MemoryRecord]:
        """Records of the exact scope in any status with id > ``after_id``, ascending."""
        ...


@runtime_checkable
class VectorChangeLog(ReadTransaction, Protocol):
    """What a read transaction offers a vector index kept in process memory.

    The log is kept by storage itself (SQL triggers on SQLite), so every writer, in any
    process, feeds it; a search reads one row per searched scope to see whether anything
    changed, and the changed record ids when something did.
    """

    async def vector_scope_states(self, identity: EmbedderIdentity,
                                  scope_hashes: Sequence[str]) -> dict[str, VectorScopeState]:
        """The state of each requested scope's vectors of ``identity`` (a scope with
        none, or never any, is absent)."""
        ...

    async def vector_changes(self, identity: EmbedderIdentity, scope_hash: str,
                             after_seq: int, limit: int) -> list[tuple[int, str]]:
        """``(seq, record id)`` of the logged changes with ``seq > after_seq``, ascending,
        at most ``limit``. The log keeps a bounded tail per scope, so the first one
        returned may be later than ``after_seq + 1``."""
        ...

    async def scope_vectors(self, identity: EmbedderIdentity, scope_hash: str,
                            after_id: str | None, limit: int) -> list[tuple[str, bytes]]:
        """``(record id, vector)`` of every stored vector of ``identity`` in the scope
        with record id > ``after_id``, ascending, at most ``limit`` (whatever the record's
        status: the index holds what storage holds, a search filters)."""
        ...

    async def vectors_by_ids(self, identity: EmbedderIdentity, scope_hash: str,
                             record_ids: Sequence[str]) -> list[tuple[str, bytes]]:
        """The stored vectors of ``identity`` among ``record_ids`` in the scope."""
        ...

    async def compute(self, work: Callable[[], T]) -> T:
        """Run CPU-bound ``work`` (a vector index build or search) for this unit: inline
        where units already run on a storage thread (SQLite, memory), on a worker thread
        where they run on the event loop."""
        ...


class StorageBackend(Protocol):
    """A datastore the native provider can run on."""

    name: str

    def capabilities(self) -> Capabilities: ...

    async def open(self) -> None:
        """Connect and prepare storage; calling it again when open does nothing."""
        ...

    async def close(self) -> None: ...

    async def check(self) -> str:
        """A real round trip to storage; returns a short, safe status detail."""
        ...

    shares_records: bool
    """``True`` when records read back may be the very objects the backend keeps (the
    in-memory backend): the provider then hands callers copies. A SQL backend decodes
    fresh values from rows on every read, and frozen values need no defensive copy."""

    def reading(self) -> AbstractAsyncContextManager[ReadTransaction]: ...

    def writing(self, *, tenant_id: str | None = None
                ) -> AbstractAsyncContextManager[WriteTransaction]:
        """A statement-at-a-time write transaction (tooling, tests); ``tenant_id`` as
        in :meth:`run_write`."""
        ...

    async def run_read(self, body: Callable[[ReadTransaction], Awaitable[T]], *,
                       point: bool = False) -> T:
        """Run ``body`` as one read unit of work: one transaction, one trip to storage.

        ``point`` marks a read of a handful of rows by key, which a backend may run
        without leaving the caller's thread when that is measured to be cheaper.
        """
        ...

    async def run_write(self, body: Callable[[WriteTransaction], Awaitable[T]], *,
                        tenant_id: str | None = None) -> T:
        """Run ``body`` as one write unit of work: it commits (one fsync) if ``body``
        returns, and rolls back if it raises or the caller is cancelled before COMMIT.

        ``tenant_id`` names the one tenant whose rows the unit reads to decide and
        writes: a backend may then serialise it against that tenant's writers only
        (PostgreSQL does). ``None`` means the unit may touch any tenant's rows and is
        serialised against every writer. A single-writer backend (SQLite, memory)
        serialises every unit anyway and may ignore it.

        ``body`` must await only the transaction's methods: a backend may drive it to
        completion on a storage thread, where anything else cannot be awaited.
        """
        ...

    async def scrub(self) -> bool:
        """Make sure bytes of erased rows are gone from every file storage keeps (a
        write-ahead log, say); ``False`` if that could not be done now."""
        ...


class UnitsFromTransactions:
    """``run_read``/``run_write`` for a backend whose transactions already are cheap to
    open from the event loop (in memory, or an async driver with a round trip per
    statement anyway)."""

    shares_records = False

    def reading(self) -> AbstractAsyncContextManager[ReadTransaction]:
        raise NotImplementedError

    def writing(self, *, tenant_id: str | None = None
                ) -> AbstractAsyncContextManager[WriteTransaction]:
        raise NotImplementedError

    async def run_read(self, body: Callable[[ReadTransaction], Awaitable[T]], *,
                       point: bool = False) -> T:
        async with self.reading() as tx:
            return await body(tx)

    async def run_write(self, body: Callable[[WriteTransaction], Awaitable[T]], *,
                        tenant_id: str | None = None) -> T:
        async with self.writing(tenant_id=tenant_id) as tx:
            return await body(tx)

    async def scrub(self) -> bool:
        return True  # no log of old row images beside the live data
