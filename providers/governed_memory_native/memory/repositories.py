"""The in-memory backend's repositories: plain dicts, changed through an undo journal.

Atomicity comes from the journal: every mutation records how to reverse itself, and a
transaction that raises replays it backwards before the backend's lock is released, so a
failed write is never observable. The repositories of one transaction share the state and
the journal; a read transaction has no journal, and any write through it fails.
"""

from __future__ import annotations

import heapq
import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs
from governed_memory.embedding import EmbedderIdentity
from governed_memory.errors import MemoryConflictError
from governed_memory.events import MemoryEvent
from governed_memory.indexing import IndexJob, JobState
from governed_memory.provider_kit import metadata_matches
from governed_memory.records import (
    IndexState,
    MemoryRecord,
    MemoryType,
    MemoryVersion,
    RecordStatus,
)
from governed_memory.scope_revisions import ScopeState, epoch_name

from governed_memory_native.search.bm25 import Document
from governed_memory_native.search.lexical import (
    ExpiredDocument,
    OneTermAtATime,
    Statistics,
    top_k,
)
from governed_memory_native.search.tokens import words
from governed_memory_native.sqlite.schema import VECTOR_LOG_KEEP
from governed_memory_native.storage.values import (
    IdempotencyEntry,
    Removal,
    ScoredRecord,
    SearchPage,
    SearchQuery,
    StoredVector,
    VectorQuery,
    VectorScopeState,
)


@attrs.frozen(slots=True)
class _Row:
    record: MemoryRecord
    document: Document | None
    """The lexical index entry: only an active record has one (see :mod:`search.bm25`)."""


def _row(record: MemoryRecord) -> _Row:
    if record.status is not RecordStatus.ACTIVE:
        return _Row(record, None)
    terms = words(record.content)
    return _Row(record, Document(record.id, Counter(terms), len(terms)))


@attrs.define(slots=True)
class _ScopeLexicon:
    """One scope's lexical index: the statistics and postings of its active records,
    kept on every write like the SQL backends' ``lexical_*`` tables."""

    documents: int = 0
    total_length: int = 0
    postings: dict[str, dict[str, int]] = attrs.field(factory=dict)
    """term to (record id to frequency); a term no record has any more is removed."""
    lengths: dict[str, int] = attrs.field(factory=dict)
    expiring: set[str] = attrs.field(factory=set)
    """Indexed records with an ``expires_at``: the only ones a search may find expired."""

    def add(self, document: Document, expires: bool) -> None:
        self.documents += 1
        self.total_length += document.length
        self.lengths[document.doc_id] = document.length
        if expires:
            self.expiring.add(document.doc_id)
        for term, frequency in document.term_counts.items():
            self.postings.setdefault(term, {})[document.doc_id] = frequency

    def remove(self, document: Document) -> None:
        self.documents -= 1
        self.total_length -= document.length
        del self.lengths[document.doc_id]
        self.expiring.discard(document.doc_id)
        for term in document.term_counts:
            holders = self.postings[term]
            del holders[document.doc_id]
            if not holders:
                del self.postings[term]


_IdemKey = tuple[str, str, str]


@attrs.define(slots=True)
class State:
    rows: dict[str, _Row] = attrs.field(factory=dict)
    keys: dict[tuple[str, str], str] = attrs.field(factory=dict)
    versions: dict[str, list[MemoryVersion]] = attrs.field(factory=dict)
    idempotency: dict[_IdemKey, IdempotencyEntry] = attrs.field(factory=dict)
    events: dict[str, tuple[int, MemoryEvent]] = attrs.field(factory=dict)
    """The event outbox: event id to (commit sequence, event)."""
    event_sequence: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1))
    vectors: dict[str, dict[str, StoredVector]] = attrs.field(factory=dict)
    """record id to (identity key to vector)."""
    jobs: dict[str, IndexJob] = attrs.field(factory=dict)
    snapshots: dict[str, _Snapshot] = attrs.field(factory=dict)
    erasures: dict[tuple[str, str], tuple[Removal, float]] = attrs.field(factory=dict)
    lexicon: dict[str, _ScopeLexicon] = attrs.field(factory=dict)
    """scope hash to that scope's lexical index."""
    vector_scopes: dict[tuple[str, str], VectorScopeState] = attrs.field(factory=dict)
    """(identity key, scope hash) to its vector change sequence and count."""
    scope_revisions: dict[str, int] = attrs.field(factory=dict)
    """Scope hash (or ``epoch:<tenant>``) to its revision, advanced with every change
    as SQLite's triggers advance ``scope_revisions``."""
    vector_changes: dict[tuple[str, str, int], str] = attrs.field(factory=dict)
    """(identity key, scope hash, seq) to the record id that change was about; the last
    ``VECTOR_LOG_KEEP`` of each scope are kept, like SQLite's ``vector_changes``."""


@attrs.frozen(slots=True)
class _Snapshot:
    tenant_id: str
    body: Mapping[str, Any]
    created_at: float
    subjects: frozenset[str]


def passes_filters(record: MemoryRecord, query: SearchQuery) -> bool:
    """Every hard filter of a search except the lexical terms."""
    return (record.scope_hash in query.scope_hashes and record.is_visible(query.now)
            and (not query.memory_types or record.memory_type in query.memory_types)
            and (not query.entity_ids or bool(set(query.entity_ids) & set(record.entity_ids)))
            and (query.valid_at is None or record.is_valid_at(query.valid_at))
            and record.happened_within(query.occurred_since, query.occurred_before)
            and (not query.visibilities or record.visibility in query.visibilities)
            and metadata_matches(record.metadata, query.metadata_filter))


def _job_order(job: IndexJob) -> tuple[float, str]:
    return (job.created_at, job.job_id)


_MISSING: Any = object()


class Journal:
    """The undo log of one write transaction (``None``: a read, which may not write)."""

    __slots__ = ("_undo",)

    def __init__(self, undo: list[Callable[[], None]] | None) -> None:
        self._undo = undo

    def begin(self, undo: list[Callable[[], None]] | None) -> None:
        """Start logging into ``undo`` (``None``: stop; a write after that is refused)."""
        self._undo = undo

    def set(self, table: dict[Any, Any], key: Any, value: Any) -> None:
        previous = table.get(key, _MISSING)
        self.log(lambda: _restore(table, key, previous))
        table[key] = value

    def pop(self, table: dict[Any, Any], key: Any) -> None:
        if key not in table:
            return
        previous = table.pop(key)
        self.log(lambda: _restore(table, key, previous))

    def log(self, action: Callable[[], None]) -> None:
        if self._undo is None:
            raise RuntimeError("write attempted in a read transaction")
        self._undo.append(action)


def _restore(table: dict[Any, Any], key: Any, previous: Any) -> None:
    if previous is _MISSING:
        table.pop(key, None)
    else:
        table[key] = previous


class _Repository:
    __slots__ = ("_journal", "_state")

    def __init__(self, state: State, journal: Journal) -> None:
        self._state = state
        self._journal = journal

    def _advance(self, scope_hash: str) -> None:
        """What the SQL backends' triggers do on every change to a scope's rows."""
        revisions = self._state.scope_revisions
        self._journal.set(revisions, scope_hash, revisions.get(scope_hash, 0) + 1)


class MemoryRecords(_Repository):
    __slots__ = ()

    async def get(self, scope_hash: str, record_id: str) -> MemoryRecord | None:
        row = self._state.rows.get(record_id)
        if row is None or row.record.scope_hash != scope_hash:
            return None
        return row.record

    async def by_key(self, scope_hash: str, key: str) -> MemoryRecord | None:
        record_id = self._state.keys.get((scope_hash, key))
        return None if record_id is None else self._state.rows[record_id].record

    async def visible(
        self, scope_hash: str, after_id: str | None, limit: int,
        memory_types: tuple[MemoryType, ...], now: float,
    ) -> list[MemoryRecord]:
        found = sorted(
            (row.record for row in self._state.rows.values()
             if row.record.scope_hash == scope_hash and row.record.is_visible(now)
             and (after_id is None or row.record.id > after_id)
             and (not memory_types or row.record.memory_type in memory_types)),
            key=lambda record: record.id,
        )
        return found[:limit]

    async def pending(self, scope_hash: str, after_id: str | None, limit: int,
                           now: float) -> list[MemoryRecord]:
        found = sorted(
            (row.record for row in self._state.rows.values()
             if row.record.scope_hash == scope_hash
             and row.record.status is RecordStatus.PENDING_REVIEW
             and not row.record.is_expired(now)
             and (after_id is None or row.record.id > after_id)),
            key=lambda record: record.id)
        return found[:limit]

    async def canonical(self, scope_hash: str, content_hash: str,
                                   key: str | None, now: float) -> MemoryRecord | None:
        found = [row.record for row in self._state.rows.values()
                 if row.record.scope_hash == scope_hash
                 and row.record.content_hash == content_hash and row.record.key == key
                 and is_canonical(row.record, now)]
        return min(found, key=lambda record: record.id, default=None)

    async def by_ids(self, scope_hashes: Sequence[str],
                             record_ids: Sequence[str]) -> list[MemoryRecord]:
        scopes = set(scope_hashes)
        rows = (self._state.rows.get(record_id) for record_id in dict.fromkeys(record_ids))
        return [row.record for row in rows if row is not None and row.record.scope_hash in scopes]

    async def scan(
        self, scope_hash: str, after_id: str | None, limit: int
    ) -> list[MemoryRecord]:
        found = sorted(
            (row.record for row in self._state.rows.values()
             if row.record.scope_hash == scope_hash
             and (after_id is None or row.record.id > after_id)),
            key=lambda record: record.id,
        )
        return found[:limit]

    async def ids_in_scope(
        self, scope_hash: str, after_id: str | None, limit: int
    ) -> list[str]:
        return [record.id for record in await self.scan(scope_hash, after_id, limit)]

    async def ids_of_user(self, tenant_id: str, user_id: str, limit: int) -> list[str]:
        return sorted(
            record_id for record_id, row in self._state.rows.items()
            if row.record.scope.tenant_id == tenant_id and row.record.scope.user_id == user_id
        )[:limit]

    async def usage(self, tenant_id: str, scope_hash: str | None, now: float) -> tuple[int, int]:
        counted = [row.record for row in self._state.rows.values()
                   if row.record.scope.tenant_id == tenant_id
                   and (scope_hash is None or row.record.scope_hash == scope_hash)
                   and row.record.status is not RecordStatus.DELETED
                   and not row.record.is_expired(now)]
        return len(counted), sum(len(record.content.encode("utf-8")) for record in counted)

    async def live_count(self, now: float) -> int:
        return sum(1 for row in self._state.rows.values()
                   if row.record.status is not RecordStatus.DELETED
                   and not row.record.is_expired(now))

    async def insert(self, record: MemoryRecord) -> None:
        if record.id in self._state.rows:
            raise MemoryConflictError("a record with this id already exists")
        self._claim_key(record)
        row = _row(record)
        self._journal.set(self._state.rows, record.id, row)
        self._index(row)
        self._advance(record.scope_hash)

    async def replace(self, record: MemoryRecord, expected_revision: str) -> bool:
        current = self._state.rows.get(record.id)
        if current is None or current.record.revision != expected_revision:
            return False
        self.release_key(current.record)
        self._claim_key(record)
        self.unindex(current)
        row = _row(record)
        self._journal.set(self._state.rows, record.id, row)
        self._index(row)
        self._advance(record.scope_hash)
        return True

    async def mark_indexed(self, record_id: str, version: int) -> None:
        row = self._state.rows.get(record_id)
        if (row is not None and row.record.version == version
                and row.record.index_state is not IndexState.INDEXED):
            self._journal.set(self._state.rows, record_id,
                      attrs.evolve(row, record=attrs.evolve(row.record,
                                                            index_state=IndexState.INDEXED)))
            self._advance(row.record.scope_hash)

    def _index(self, row: _Row) -> None:
        """Count an active record in its scope's statistics and postings."""
        document = row.document
        if document is None:
            return
        scope_hash = row.record.scope_hash
        lexicon = self._state.lexicon.get(scope_hash)
        if lexicon is None:
            lexicon = _ScopeLexicon()
            self._journal.set(self._state.lexicon, scope_hash, lexicon)
        lexicon.add(document, row.record.expires_at is not None)
        self._journal.log(lambda: lexicon.remove(document))

    def unindex(self, row: _Row) -> None:
        """Take a record out of its scope's statistics and postings (exactly: a scope
        left with no record has no lexicon at all)."""
        document = row.document
        if document is None:
            return
        scope_hash = row.record.scope_hash
        lexicon = self._state.lexicon[scope_hash]
        expires = row.record.expires_at is not None
        lexicon.remove(document)
        self._journal.log(lambda: lexicon.add(document, expires))
        if not lexicon.documents:
            self._journal.pop(self._state.lexicon, scope_hash)

    def _claim_key(self, record: MemoryRecord) -> None:
        if record.key is None or record.status is RecordStatus.DELETED:
            return
        slot = (record.scope_hash, record.key)
        holder = self._state.keys.get(slot)
        if holder is not None and holder != record.id:
            raise MemoryConflictError("the key is already used by a record in this scope")
        self._journal.set(self._state.keys, slot, record.id)

    def release_key(self, record: MemoryRecord) -> None:
        slot = (record.scope_hash, record.key) if record.key is not None else None
        if slot is not None and self._state.keys.get(slot) == record.id:
            self._journal.pop(self._state.keys, slot)


class MemoryLexicalSearch(_Repository):
    __slots__ = ()

    async def search(self, query: SearchQuery) -> SearchPage:
        """:func:`lexical_topk.top_k` over the requested scopes' :class:`_ScopeLexicon`."""
        found = await top_k(_MemoryPostings(self._state, query), query.tokens, query.limit)
        rows = self._state.rows
        return SearchPage(
            matches=tuple(ScoredRecord(rows[doc].record, score) for doc, score in found.ranked),
            candidates=found.candidates)


class MemoryVersions(_Repository):
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


class MemoryIdempotency(_Repository):
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


class MemoryOutbox(_Repository):
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


class MemoryIndexJobs(_Repository):
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


class MemoryVectors(_Repository):
    __slots__ = ()

    async def candidates(self, query: VectorQuery) -> list[tuple[str, bytes]]:
        key = str(query.identity)
        found = []
        rows: Iterable[_Row] = self._state.rows.values()
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


class MemorySnapshots(_Repository):
    __slots__ = ()

    async def get(self, snapshot_id: str) -> Mapping[str, Any] | None:
        stored = self._state.snapshots.get(snapshot_id)
        return None if stored is None else stored.body

    async def put(self, snapshot_id: str, tenant_id: str, body: Mapping[str, Any],
                           *, created_at: float, subjects: Sequence[str]) -> None:
        if snapshot_id in self._state.snapshots:
            raise MemoryConflictError("a retrieval snapshot with this id already exists")
        self._journal.set(self._state.snapshots, snapshot_id,
                  _Snapshot(tenant_id, body, created_at, frozenset(subjects)))

    async def erase_of_user(self, tenant_id: str, user_id: str,
                                      tombstone: Mapping[str, Any]) -> int:
        named = [(snapshot_id, stored) for snapshot_id, stored in self._state.snapshots.items()
                 if stored.tenant_id == tenant_id and user_id in stored.subjects]
        for snapshot_id, stored in named:
            self._journal.set(self._state.snapshots, snapshot_id, _Snapshot(
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


class MemoryErasure(_Repository):
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


class MemoryScopeRevisions(_Repository):
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


class _MemoryPostings(OneTermAtATime[str]):
    """:class:`lexical_topk.PostingsSource` over the in-memory lexicons of one search;
    a document is its record id."""

    def __init__(self, state: State, query: SearchQuery) -> None:
        self._rows = state.rows
        self._query = query
        self._lexicons = [state.lexicon[scope_hash]
                          for scope_hash in dict.fromkeys(query.scope_hashes)
                          if scope_hash in state.lexicon]

    async def statistics(self, terms: Sequence[str]) -> Statistics[str]:
        now = self._query.now
        expired = [
            ExpiredDocument(record_id, lexicon.lengths[record_id], {
                term: lexicon.postings[term][record_id] for term in terms
                if record_id in lexicon.postings.get(term, {})})
            for lexicon in self._lexicons for record_id in sorted(lexicon.expiring)
            if self._rows[record_id].record.is_expired(now)
        ]
        return Statistics(
            documents=sum(lexicon.documents for lexicon in self._lexicons),
            total_length=sum(lexicon.total_length for lexicon in self._lexicons),
            containing={term: sum(len(lexicon.postings.get(term, {}))
                                  for lexicon in self._lexicons) for term in terms},
            expired=expired)

    async def postings_of(self, term: str) -> list[tuple[str, int, int]]:
        query, rows = self._query, self._rows
        return [(record_id, frequency, lexicon.lengths[record_id])
                for lexicon in self._lexicons
                for record_id, frequency in lexicon.postings.get(term, {}).items()
                if passes_filters(rows[record_id].record, query)]

    async def probe_of(self, term: str, docs: Sequence[str]) -> dict[str, int]:
        holders = [lexicon.postings.get(term, {}) for lexicon in self._lexicons]
        found: dict[str, int] = {}
        for doc in docs:
            for held in holders:
                frequency = held.get(doc)
                if frequency:
                    found[doc] = frequency
        return found

    async def identify(self, docs: Sequence[str]) -> dict[str, str]:
        return {doc: doc for doc in docs}


def is_canonical(record: MemoryRecord, now: float) -> bool:
    """Active or pending, not expired, valid at ``now``: what a new identical record
    would duplicate (``records.canonical``, the SQL backends' predicate)."""
    return (record.status in (RecordStatus.ACTIVE, RecordStatus.PENDING_REVIEW)
            and not record.is_expired(now) and record.is_valid_at(now))
