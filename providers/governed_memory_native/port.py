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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import attrs
from governed_memory.events import MemoryEvent
from governed_memory.records import Capabilities, MemoryRecord, MemoryType, MemoryVersion


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

    async def record_ids_of_user(self, tenant_id: str, user_id: str, limit: int) -> list[str]:
        """Ids of records whose scope has this tenant and this user, any scope, any status."""
        ...

    async def scan_scope(
        self, scope_hash: str, after_id: str | None, limit: int
    ) -> list[MemoryRecord]:
        """Records of the exact scope in any status with id > ``after_id``, ascending."""
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

    def reading(self) -> AbstractAsyncContextManager[ReadTransaction]: ...

    def writing(self) -> AbstractAsyncContextManager[WriteTransaction]: ...
