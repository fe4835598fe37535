"""The storage port: the seam between the provider's decisions and a datastore's rows.

Why the seam exists. The provider core decides *what* happens (idempotency,
compare-and-set, key ownership, expiry, erasure bookkeeping, what an event says); a
backend only keeps rows and their indexes consistent inside one transaction. Keeping
every decision above this line is what lets three backends (in memory, SQLite,
PostgreSQL) be held to identical behaviour by one test suite, and lets a new datastore
arrive without touching the core.

What a backend implements: a :class:`StorageBackend` whose units of work hand the body
a :class:`ReadTransaction` or a :class:`WriteTransaction`. A transaction is a handful of
repositories (:mod:`storage.repositories`), one per kind of stored thing (records, their
postings, versions, idempotency entries, the event outbox, index jobs, vectors,
retrieval snapshots, and erasure on writes), plus :meth:`ReadTransaction.compute` for
CPU-bound work. A write transaction narrows each repository to its writes protocol.

Records handed across this port may be shared with the backend's own state, so the
provider detaches every record before returning it to a caller.

The values crossing the port live in :mod:`storage.values` and are re-exported here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Protocol, TypeVar

from governed_memory.capabilities import Capabilities

from governed_memory_native.storage.repositories import (
    Erasure,
    IdempotencyReads,
    IdempotencyWrites,
    IndexJobReads,
    IndexJobWrites,
    LexicalSearch,
    OutboxReads,
    OutboxWrites,
    RecordReads,
    RecordWrites,
    ScopeRevisionReads,
    ScopeRevisionWrites,
    SnapshotReads,
    SnapshotWrites,
    VectorChangeLog,
    VectorReads,
    VectorWrites,
    VersionReads,
    VersionWrites,
)
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

__all__ = [
    "IdempotencyEntry", "ReadTransaction", "Removal", "ScoredRecord", "SearchPage",
    "SearchQuery", "StorageBackend", "StoredVector", "UnitsFromTransactions",
    "VectorChangeLog", "VectorQuery", "VectorScopeState", "WriteTransaction",
]

T = TypeVar("T")


class ReadTransaction(Protocol):
    """A consistent view for one operation's reads."""

    @property
    def records(self) -> RecordReads: ...

    @property
    def postings(self) -> LexicalSearch: ...

    @property
    def versions(self) -> VersionReads: ...

    @property
    def idempotency(self) -> IdempotencyReads: ...

    @property
    def outbox(self) -> OutboxReads: ...

    @property
    def jobs(self) -> IndexJobReads: ...

    @property
    def vectors(self) -> VectorReads:
        """Also a :class:`VectorChangeLog` where the backend keeps one."""
        ...

    @property
    def snapshots(self) -> SnapshotReads: ...

    @property
    def revisions(self) -> ScopeRevisionReads: ...

    async def compute(self, work: Callable[[], T]) -> T:
        """Run CPU-bound ``work`` (a vector index build or search) for this unit: inline
        where units already run on a storage thread (SQLite, memory), on a worker thread
        where they run on the event loop."""
        ...


class WriteTransaction(ReadTransaction, Protocol):
    """Serialized against every other writer; all of it commits or none of it does."""

    @property
    def records(self) -> RecordWrites: ...

    @property
    def versions(self) -> VersionWrites: ...

    @property
    def idempotency(self) -> IdempotencyWrites: ...

    @property
    def outbox(self) -> OutboxWrites: ...

    @property
    def jobs(self) -> IndexJobWrites: ...

    @property
    def vectors(self) -> VectorWrites: ...

    @property
    def snapshots(self) -> SnapshotWrites: ...

    @property
    def erasure(self) -> Erasure: ...

    @property
    def revisions(self) -> ScopeRevisionWrites: ...


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
