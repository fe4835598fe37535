"""The in-memory backend: deterministic and transactional, for tests and ephemeral use.

One asyncio lock serializes transactions, which is also what makes compare-and-set
atomic here; a write that raises is undone by its journal before the lock is released
(:mod:`memory.state`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import TypeVar

from governed_memory.capabilities import Capabilities
from governed_memory.errors import MemoryUnavailableError

from governed_memory_native.memory.records import MemoryLexicalSearch, MemoryRecords
from governed_memory_native.memory.repositories import (
    MemoryErasure,
    MemoryIdempotency,
    MemoryIndexJobs,
    MemoryOutbox,
    MemoryScopeRevisions,
    MemorySnapshots,
    MemoryVectors,
    MemoryVersions,
)
from governed_memory_native.memory.state import Journal, State
from governed_memory_native.storage.drive import drive
from governed_memory_native.storage.port import (
    ReadTransaction,
    UnitsFromTransactions,
    WriteTransaction,
)

T = TypeVar("T")


class _MemoryTransaction:
    """The repositories of one transaction over the shared state (writes only through a
    journal that has an undo log)."""

    __slots__ = ("erasure", "idempotency", "jobs", "outbox", "postings", "records",
                 "revisions", "snapshots", "vectors", "versions")

    def __init__(self, state: State, journal: Journal) -> None:
        self.records = MemoryRecords(state, journal)
        self.postings = MemoryLexicalSearch(state, journal)
        self.versions = MemoryVersions(state, journal)
        self.idempotency = MemoryIdempotency(state, journal)
        self.outbox = MemoryOutbox(state, journal)
        self.jobs = MemoryIndexJobs(state, journal)
        self.vectors = MemoryVectors(state, journal)
        self.snapshots = MemorySnapshots(state, journal)
        self.erasure = MemoryErasure(state, journal, self.records, self.vectors)
        self.revisions = MemoryScopeRevisions(state, journal)

    async def compute(self, work: Callable[[], T]) -> T:
        """Inline: :meth:`MemoryBackend.run_read` runs a unit on a worker thread."""
        return work()


class MemoryBackend(UnitsFromTransactions):
    """Process-local storage; everything is lost when the process ends."""

    name = "memory"
    shares_records = True

    def __init__(self) -> None:
        self._state = State()
        self._reads = _MemoryTransaction(self._state, Journal(None))
        """Every read unit's transaction: it holds nothing of its own (no journal), so
        one serves them all and a read builds no repositories."""
        self._journal = Journal(None)
        self._writes = _MemoryTransaction(self._state, self._journal)
        """Every write unit's transaction: writes are serialised by the lock, so one set
        of repositories serves them all, each unit logging into an undo list of its own
        (a write through it outside a unit is refused)."""
        self._lock = asyncio.Lock()
        self._open = False
        self._reader: ThreadPoolExecutor | None = None

    def capabilities(self) -> Capabilities:
        return Capabilities(durable=False, transactional=True, multi_process=False, usage=True,
                            event_outbox=True)

    async def open(self) -> None:
        if self._reader is None:
            self._reader = ThreadPoolExecutor(1, thread_name_prefix="gm-memory-reader")
        self._open = True

    async def close(self) -> None:
        self._open = False
        reader, self._reader = self._reader, None
        if reader is not None:
            # A unit in flight holds the lock and finishes; nothing new is handed over.
            reader.shutdown(wait=False)

    async def run_read(self, body: Callable[[ReadTransaction], Awaitable[T]], *,
                       point: bool = False) -> T:
        """A point read runs right here; any other read unit (a search ranks vectors and
        walks postings) is driven on a reader thread, so its work stays off the event
        loop as on SQLite. The lock is held until that thread is done with the unit,
        cancelled or not, so no write can interleave with it."""
        reader = self._reader
        if point or reader is None:
            return await super().run_read(body, point=point)
        async with self.reading() as tx:
            future = asyncio.get_running_loop().run_in_executor(reader, drive, body(tx))
            return await _settled(future)

    async def check(self) -> str:
        self._require_open()
        return f"memory backend, {len(self._state.rows)} records"

    @asynccontextmanager
    async def reading(self) -> AsyncIterator[ReadTransaction]:
        self._require_open()
        async with self._lock:
            yield self._reads

    @asynccontextmanager
    async def writing(self, *, tenant_id: str | None = None
                      ) -> AsyncIterator[WriteTransaction]:
        self._require_open()
        async with self._lock:
            undo: list[Callable[[], None]] = []
            self._journal.begin(undo)
            try:
                yield self._writes
            except BaseException:
                for action in reversed(undo):
                    action()
                raise
            finally:
                self._journal.begin(None)

    def _require_open(self) -> None:
        if not self._open:
            raise MemoryUnavailableError("the memory backend is not open")


async def _settled(future: asyncio.Future[T]) -> T:
    """The unit's result; if the caller is cancelled meanwhile, wait (shielded) until the
    reader thread is done with the unit, then re-raise the cancellation."""
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        while not future.done():
            try:
                await asyncio.shield(future)
            except asyncio.CancelledError:
                continue
            except BaseException:
                break
        if not future.cancelled():
            future.exception()  # retrieved, so it is never reported as unretrieved
        raise
