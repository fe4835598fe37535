"""The values that cross the storage port: what a search asks, what it gets back, what an
erasure removed, and the stored shapes of idempotency entries and vectors.

They live apart from the port's protocols so that the repositories, the row decoders and
the backends can all import them without importing each other; :mod:`storage.port` re-exports
them, which is where callers look for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
from governed_memory.embedding import EmbedderIdentity
from governed_memory.records import MemoryRecord, MemoryType, Visibility


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
    occurred_since: float | None = None
    occurred_before: float | None = None
    """When set, only records whose ``event_time`` (``occurred_at``, else ``created_at``)
    lies in ``[occurred_since, occurred_before)`` match."""
    source_types: tuple[str, ...] = ()
    """When set, only records whose ``provenance.source_type`` is one of these match."""
    sensitivity: tuple[str, ...] = ()
    """When set, only records whose sensitivity label (the string
    ``metadata["sensitivity"]``) is one of these match."""
    exclude_sensitivity: tuple[str, ...] = ()
    """Records whose sensitivity label is one of these never match."""

    def bounds_event_time(self) -> bool:
        return self.occurred_since is not None or self.occurred_before is not None

    def reads_records(self) -> bool:
        """Whether a filter reads what only the record row holds (its type, entities,
        metadata, provenance or event time), not the lexical postings' copies of its
        validity and visibility."""
        return bool(self.memory_types or self.entity_ids or self.metadata_filter
                    or self.source_types or self.sensitivity or self.exclude_sensitivity
                    or self.bounds_event_time())


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
