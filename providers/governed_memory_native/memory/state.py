"""What the in-memory backend keeps, and the undo journal every change to it goes through.

Atomicity comes from the journal: every mutation records how to reverse itself, and a
transaction that raises replays it backwards before the backend's lock is released, so a
failed write is never observable. The repositories of one transaction
(:mod:`memory.records`, :mod:`memory.repositories`) share the state and the journal; a
read transaction has no journal, and any write through it fails. The state lives apart
from the repositories so that they can all share it, and the search filters with it,
without importing each other.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import attrs
from governed_memory.events import MemoryEvent
from governed_memory.indexing import IndexJob
from governed_memory.provider_kit import metadata_matches
from governed_memory.read_filters import passes_read_filters
from governed_memory.records import MemoryRecord, MemoryVersion, RecordStatus

from governed_memory_native.retrieval.bm25 import Document
from governed_memory_native.retrieval.tokens import words
from governed_memory_native.storage.values import (
    IdempotencyEntry,
    Removal,
    SearchQuery,
    StoredVector,
    VectorScopeState,
)


@attrs.frozen(slots=True)
class Row:
    record: MemoryRecord
    document: Document | None
    """The lexical index entry: only an active record has one (see :mod:`retrieval.bm25`)."""

    @classmethod
    def of(cls, record: MemoryRecord) -> Row:
        """``record``'s row, with its document if it is active."""
        if record.status is not RecordStatus.ACTIVE:
            return cls(record, None)
        terms = words(record.content)
        return cls(record, Document(record.id, Counter(terms), len(terms)))


@attrs.define(slots=True)
class ScopeLexicon:
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


@attrs.frozen(slots=True)
class Snapshot:
    tenant_id: str
    body: Mapping[str, Any]
    created_at: float
    subjects: frozenset[str]


_IdemKey = tuple[str, str, str]


@attrs.define(slots=True)
class State:
    rows: dict[str, Row] = attrs.field(factory=dict)
    keys: dict[tuple[str, str], str] = attrs.field(factory=dict)
    versions: dict[str, list[MemoryVersion]] = attrs.field(factory=dict)
    idempotency: dict[_IdemKey, IdempotencyEntry] = attrs.field(factory=dict)
    events: dict[str, tuple[int, MemoryEvent]] = attrs.field(factory=dict)
    """The event outbox: event id to (commit sequence, event)."""
    event_sequence: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1))
    vectors: dict[str, dict[str, StoredVector]] = attrs.field(factory=dict)
    """record id to (identity key to vector)."""
    jobs: dict[str, IndexJob] = attrs.field(factory=dict)
    snapshots: dict[str, Snapshot] = attrs.field(factory=dict)
    erasures: dict[tuple[str, str], tuple[Removal, float]] = attrs.field(factory=dict)
    lexicon: dict[str, ScopeLexicon] = attrs.field(factory=dict)
    """scope hash to that scope's lexical index."""
    vector_scopes: dict[tuple[str, str], VectorScopeState] = attrs.field(factory=dict)
    """(identity key, scope hash) to its vector change sequence and count."""
    scope_revisions: dict[str, int] = attrs.field(factory=dict)
    """Scope hash (or ``epoch:<tenant>``) to its revision, advanced with every change
    as SQLite's triggers advance ``scope_revisions``."""
    vector_changes: dict[tuple[str, str, int], str] = attrs.field(factory=dict)
    """(identity key, scope hash, seq) to the record id that change was about; the last
    ``VECTOR_LOG_KEEP`` of each scope are kept, like SQLite's ``vector_changes``."""


def passes_filters(record: MemoryRecord, query: SearchQuery) -> bool:
    """Every hard filter of a search except the lexical terms."""
    return (record.scope_hash in query.scope_hashes and record.is_visible(query.now)
            and (not query.memory_types or record.memory_type in query.memory_types)
            and (not query.entity_ids or bool(set(query.entity_ids) & set(record.entity_ids)))
            and (query.valid_at is None or record.is_valid_at(query.valid_at))
            and record.happened_within(query.occurred_since, query.occurred_before)
            and (not query.visibilities or record.visibility in query.visibilities)
            and metadata_matches(record.metadata, query.metadata_filter)
            and passes_read_filters(record, visibility=None, source_types=query.source_types,
                                    sensitivity=query.sensitivity,
                                    exclude_sensitivity=query.exclude_sensitivity))


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


class Repository:
    """What every in-memory repository holds: the shared state and the transaction's
    journal."""

    __slots__ = ("_journal", "_state")

    def __init__(self, state: State, journal: Journal) -> None:
        self._state = state
        self._journal = journal

    def _advance(self, scope_hash: str) -> None:
        """What the SQL backends' triggers do on every change to a scope's rows."""
        revisions = self._state.scope_revisions
        self._journal.set(revisions, scope_hash, revisions.get(scope_hash, 0) + 1)
