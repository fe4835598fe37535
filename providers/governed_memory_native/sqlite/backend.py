"""The SQLite backend: the embedded, durable default.

Settings and why:

- ``journal_mode=WAL``: readers never block the writer and other processes can read
  while one writes, which is what ``multi_process=True`` promises;
- ``synchronous=FULL``: in WAL mode ``NORMAL`` may lose the last commits on power loss.
  ``durable=True`` means a committed write survives the machine going down;
- ``busy_timeout``: a writer waits for another process's lock instead of failing at once;
  past the timeout the operation fails as unavailable (safe to retry later);
- ``BEGIN IMMEDIATE`` for writes: the write lock is taken before the first read, so a
  read-check-write (compare-and-set, key ownership) cannot be raced by another process;
- ``foreign_keys=ON``; ``secure_delete=ON``: erased rows and freed pages are overwritten
  with zeros, and after a commit that erased records the WAL is checkpointed and
  truncated (:meth:`SqliteBackend.scrub`), so no copy of erased bytes stays in any file.

Execution: one thread hop per unit of work. The provider hands a whole unit (its reads,
decisions and writes) to :meth:`run_write` or :meth:`run_read`; the unit's coroutine
only awaits the transaction, whose statements run synchronously on the stdlib driver, so
the coroutine is driven to completion on a storage thread in one trip. Writes go to one
writer thread and connection; reads to a small pool of reader threads, each with its own
``query_only`` connection, so in WAL mode reads never wait behind a write. A point read
(a record by id or key) runs on the caller's thread on a dedicated connection, because
the statement costs less than the hop would.

Cancellation: a cancelled caller sets the unit's cancel flag and then waits (shielded)
until the storage thread is done with the unit. The next statement of the unit, or the
COMMIT, sees the flag and the unit rolls back; a unit already past COMMIT stays
committed (as a COMMIT in flight always could). A connection still inside a transaction
after the rollback is closed and replaced, never left to wedge later calls.

``reading()``/``writing()`` keep the statement-at-a-time contexts for tooling and tests:
they run on the writer thread under the same lock as write units.

Lexical delta: a write indexes a record's words into its scope's delta (one row) rather
than the main postings (see :mod:`sqlite.lexical`). A committed write that left a scope's
delta full reports that scope to whoever :meth:`SqliteBackend.watch_lexical_delta`
registered (the provider's :class:`lexical_merger.LexicalMerger`), which merges it later
in a write unit of its own (:meth:`SqliteBackend.merge_lexical_delta`), never inside the
caller's write.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Mapping,
)
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final, TypeVar

import attrs
from governed_memory.capabilities import Capabilities
from governed_memory.errors import MemoryConfigurationError, MemoryUnavailableError
from governed_memory.records import MemoryRecord

from governed_memory_native.config import DEFAULT_LEXICAL_DELTA_MAX
from governed_memory_native.retrieval.ranking.wire import store_spec
from governed_memory_native.sql.rows import record_from_row
from governed_memory_native.sqlite.connection import connect, current_version, migrate
from governed_memory_native.sqlite.errors import logger, translated
from governed_memory_native.sqlite.schema import LATEST_VERSION
from governed_memory_native.sqlite.transaction import SqliteTransaction, UnitCancelled
from governed_memory_native.storage.drive import drive
from governed_memory_native.storage.port import ReadTransaction, WriteTransaction

T = TypeVar("T")

DEFAULT_READERS: Final = 4
"""Reader threads (and connections). SQLite releases the GIL while it steps, so a few
readers overlap with each other and with the event loop; more only add contention."""


@attrs.define
class BackendStats:
    """Counters of what the hot paths cost, for benchmarks and tests to read.

    Each field is written by one thread only (the event loop, or the writer thread for
    ``commits`` and ``checkpoints``), so no lock is needed.
    """

    hops: int = 0
    """Trips to a storage thread (one per unit of work; one per statement in the
    ``reading()``/``writing()`` contexts)."""
    reads: int = 0
    """Read units of work run on a reader thread."""
    point_reads: int = 0
    """Read units run on the caller's thread (no hop)."""
    writes: int = 0
    """Write units of work (committed or not)."""
    commits: int = 0
    """Committed write transactions: with ``synchronous=FULL``, one WAL fsync each."""
    checkpoints: int = 0
    """WAL checkpoints that truncated the log after an erasure."""
    merges: int = 0
    """Committed write units that merged lexical deltas into the main index."""
    merged_rows: int = 0
    """Delta rows and tombstones those merges moved into the main index."""

    def as_dict(self) -> dict[str, int]:
        return attrs.asdict(self)


class SqliteBackend:
    name = "sqlite"
    shares_records = False

    def __init__(self, path: Path, *, busy_timeout_ms: int,
                 readers: int = DEFAULT_READERS,
                 lexical_delta_max: int = DEFAULT_LEXICAL_DELTA_MAX) -> None:
        if readers < 1:
            raise MemoryConfigurationError("readers: at least one reader thread is needed")
        self._delta_max = lexical_delta_max
        self._on_full_delta: Callable[[frozenset[int]], None] | None = None
        self._path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._reader_count = readers
        self.stats = BackendStats()
        self._writer: ThreadPoolExecutor | None = None
        self._readers: ThreadPoolExecutor | None = None
        self._writer_conn: sqlite3.Connection | None = None
        """Used on the writer thread only."""
        self._point_conn: sqlite3.Connection | None = None
        self._point_lock = threading.Lock()
        self._local = threading.local()
        self._reader_conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._open_lock = asyncio.Lock()
        self._write_lock = asyncio.Lock()

    @property
    def path(self) -> Path:
        return self._path

    def capabilities(self) -> Capabilities:
        return Capabilities(durable=True, transactional=True, multi_process=True, usage=True,
                            event_outbox=True)

    def ranking_store(self) -> Mapping[str, Any]:
        """This file, for a ranking worker (:mod:`retrieval.ranking.pool`) to open read-only."""
        return store_spec(backend=self.name, busy_timeout_ms=self._busy_timeout_ms,
                          path=str(self._path))

    def decode_row(self, row: Mapping[str, Any]) -> MemoryRecord:
        return record_from_row(row)

    # -- lifecycle ------------------------------------------------------------------------

    async def open(self) -> None:
        async with self._open_lock:
            if self._writer is not None:
                return
            writer = ThreadPoolExecutor(1, thread_name_prefix="gm-sqlite-writer")
            try:
                await _settled(asyncio.get_running_loop().run_in_executor(
                    writer, self._open_sync), threading.Event())
            except BaseException:
                writer.shutdown(wait=False)
                await asyncio.to_thread(self._close_connections)
                raise
            self._writer = writer
            self._readers = ThreadPoolExecutor(self._reader_count,
                                               thread_name_prefix="gm-sqlite-reader")

    def _open_sync(self) -> None:
        try:
            self._path.parent.mkdir(parents=True, exist_ok=True)
        except OSError:
            raise MemoryConfigurationError(
                "path: the database directory cannot be created") from None
        conn = connect(self._path, self._busy_timeout_ms, writer=True)
        try:
            with translated("open"):
                migrate(conn, applied_at=time.time())
            self._point_conn = connect(self._path, self._busy_timeout_ms, writer=False)
        except BaseException:
            conn.close()
            raise
        self._writer_conn = conn

    async def close(self) -> None:
        async with self._open_lock:
            writer, readers = self._writer, self._readers
            self._writer = self._readers = None
            if writer is None:
                return
            await asyncio.to_thread(self._shutdown, writer, readers)

    def _shutdown(self, writer: ThreadPoolExecutor, readers: ThreadPoolExecutor | None) -> None:
        """Let units already handed over finish, then close every connection."""
        writer.shutdown(wait=True)
        if readers is not None:
            readers.shutdown(wait=True)
        self._close_connections()

    def _close_connections(self) -> None:
        with self._point_lock:
            conns = [self._writer_conn, self._point_conn]
            self._writer_conn = self._point_conn = None
        with self._conns_lock:
            conns.extend(self._reader_conns)
            self._reader_conns.clear()
        self._local = threading.local()
        for conn in conns:
            if conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()

    async def check(self) -> str:
        writer = self._require(self._writer)
        async with self._write_lock:
            self.stats.hops += 1
            version = await _settled(asyncio.get_running_loop().run_in_executor(
                writer, self._check_sync), threading.Event())
        if version != LATEST_VERSION:
            return f"sqlite schema v{version}, expected v{LATEST_VERSION}"
        return f"sqlite schema v{version}, wal"

    def _check_sync(self) -> int:
        conn = self._writer_connection()
        with translated("health check"):
            conn.execute("SELECT 1").fetchone()
            return current_version(conn)

    # -- the lexical delta -----------------------------------------------------------------

    def watch_lexical_delta(self, bound: int,
                            full: Callable[[frozenset[int]], None] | None) -> None:
        """Bound each scope's lexical delta at ``bound`` rows (``0``: no delta) and call
        ``full`` on the event loop, after each commit that left scopes' deltas full, with
        their ids. Set before the first write."""
        self._delta_max = bound
        self._on_full_delta = full if bound else None

    async def merge_lexical_delta(self, scope_ids: Collection[int]) -> int:
        """Merge the deltas of those scopes into the main index, in one write unit; how
        many rows it merged. A scope whose delta is less than half full is skipped:
        another process merged it since it was reported."""
        at_least = max(1, self._delta_max // 2)

        async def unit(tx: SqliteTransaction) -> int:
            return await tx.merge_lexical_delta(sorted(scope_ids), at_least)

        merged = await self._run_unit(unit)
        if merged:
            self.stats.merges += 1
            self.stats.merged_rows += merged
        return merged

    # -- units of work --------------------------------------------------------------------

    async def run_write(self, body: Callable[[WriteTransaction], Awaitable[T]], *,
                        tenant_id: str | None = None) -> T:
        """One writer serves every tenant: ``tenant_id`` changes nothing here."""
        return await self._run_unit(body)

    async def _run_unit(self, body: Callable[[SqliteTransaction], Awaitable[T]]) -> T:
        writer = self._require(self._writer)
        async with self._write_lock:
            cancel = threading.Event()
            self.stats.hops += 1
            self.stats.writes += 1
            result, full = await _settled(asyncio.get_running_loop().run_in_executor(
                writer, self._write_unit, body, cancel), cancel)
        self._report_full(full)
        return result

    def _report_full(self, full: frozenset[int]) -> None:
        if full and self._on_full_delta is not None:
            self._on_full_delta(full)

    def _write_unit(self, body: Callable[[SqliteTransaction], Awaitable[T]],
                    cancel: threading.Event) -> tuple[T, frozenset[int]]:
        if cancel.is_set():
            raise UnitCancelled
        conn = self._writer_connection()
        with translated("write"):
            conn.execute("BEGIN IMMEDIATE")
        tx = SqliteTransaction(conn, cancel=cancel, delta_max=self._delta_max)
        try:
            result = drive(body(tx))
            drive(tx.seal())
            tx.check_cancel()
            with translated("commit"):
                conn.execute("COMMIT")
        except BaseException:
            self._rollback(conn)
            raise
        self.stats.commits += 1
        if tx.erased_any:
            self._scrub_sync(conn)
        return result, tx.full_deltas

    async def run_read(self, body: Callable[[ReadTransaction], Awaitable[T]], *,
                       point: bool = False) -> T:
        readers = self._require(self._readers)
        if point and self._point_lock.acquire(blocking=False):
            try:
                conn = self._point_conn
                if conn is not None:
                    self.stats.point_reads += 1
                    return self._read_unit_on(conn, body, None)
            finally:
                self._point_lock.release()
        cancel = threading.Event()
        self.stats.hops += 1
        self.stats.reads += 1
        return await _settled(asyncio.get_running_loop().run_in_executor(
            readers, self._read_unit, body, cancel), cancel)

    def _read_unit(self, body: Callable[[ReadTransaction], Awaitable[T]],
                   cancel: threading.Event) -> T:
        if cancel.is_set():
            raise UnitCancelled
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self._path, self._busy_timeout_ms, writer=False)
            with self._conns_lock:
                self._reader_conns.append(conn)
            self._local.conn = conn
        try:
            return self._read_unit_on(conn, body, cancel)
        finally:
            if conn.in_transaction:  # could not even roll back: never reuse it
                self._local.conn = None
                with self._conns_lock:
                    if conn in self._reader_conns:
                        self._reader_conns.remove(conn)
                with contextlib.suppress(sqlite3.Error):
                    conn.close()

    def _read_unit_on(self, conn: sqlite3.Connection,
                      body: Callable[[ReadTransaction], Awaitable[T]],
                      cancel: threading.Event | None) -> T:
        with translated("read"):
            conn.execute("BEGIN")
        try:
            result = drive(body(SqliteTransaction(conn, cancel=cancel)))
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error:  # nothing was written: a failed COMMIT is rolled back
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        return result

    # -- erasure hygiene ------------------------------------------------------------------

    async def scrub(self) -> bool:
        """Checkpoint the WAL into the database file and truncate it, so bytes that
        erased rows left in older WAL frames are gone from every file. ``False`` if
        another connection (another process's reader) kept the WAL in use past
        ``busy_timeout``."""
        writer = self._require(self._writer)
        async with self._write_lock:
            self.stats.hops += 1
            return await _settled(asyncio.get_running_loop().run_in_executor(
                writer, lambda: self._scrub_sync(self._writer_connection())),
                threading.Event())

    def _scrub_sync(self, conn: sqlite3.Connection) -> bool:
        try:
            row = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.Error:
            logger.warning("sqlite wal checkpoint after an erasure failed", exc_info=True)
            return False
        if row is None or int(row[0]) != 0:
            logger.warning("sqlite wal checkpoint after an erasure was blocked by a reader")
            return False
        self.stats.checkpoints += 1
        return True

    # -- statement-at-a-time contexts (tooling, tests) ------------------------------------

    @asynccontextmanager
    async def reading(self) -> AsyncIterator[ReadTransaction]:
        async with self._statements("BEGIN") as tx:
            yield tx

    @asynccontextmanager
    async def writing(self, *, tenant_id: str | None = None
                      ) -> AsyncIterator[WriteTransaction]:
        async with self._statements("BEGIN IMMEDIATE") as tx:
            yield tx

    @asynccontextmanager
    async def _statements(self, begin: str) -> AsyncIterator[SqliteTransaction]:
        writer = self._require(self._writer)
        loop = asyncio.get_running_loop()

        def hop(call: Callable[[], Any]) -> Awaitable[Any]:
            self.stats.hops += 1
            return loop.run_in_executor(writer, call)

        async with self._write_lock:
            conn: sqlite3.Connection = await hop(self._writer_connection)
            try:
                with translated("write" if begin != "BEGIN" else "read"):
                    await hop(lambda: conn.execute(begin))
                tx = SqliteTransaction(conn, hop=hop, delta_max=self._delta_max)
                yield tx
                if begin != "BEGIN":
                    await tx.seal()
                with translated("commit"):
                    await hop(lambda: conn.execute("COMMIT"))
            except BaseException:
                # Queued behind whatever statement is in flight on the writer thread;
                # awaited even while being cancelled, so the lock is never released over
                # an open transaction.
                await _settled(hop(lambda: self._rollback(conn)), threading.Event())
                raise
            if begin != "BEGIN":
                self.stats.commits += 1
                if tx.erased_any:
                    await hop(lambda: self._scrub_sync(conn))
        if begin != "BEGIN":
            self._report_full(tx.full_deltas)

    # -- connections ----------------------------------------------------------------------

    def _writer_connection(self) -> sqlite3.Connection:
        """The writer's connection (on the writer thread); reopened if it was discarded."""
        if self._writer_conn is None:
            self._writer_conn = connect(self._path, self._busy_timeout_ms, writer=True)
        return self._writer_conn

    def _rollback(self, conn: sqlite3.Connection) -> None:
        """End the transaction; a connection that still holds one afterwards is closed and
        replaced (closing releases its locks)."""
        self._roll_back(conn)
        if conn.in_transaction:
            logger.warning("sqlite connection still in a transaction after rollback; "
                           "replacing it")
            if self._writer_conn is conn:
                self._writer_conn = None
            with contextlib.suppress(sqlite3.Error):
                conn.close()

    def _roll_back(self, conn: sqlite3.Connection) -> None:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:  # e.g. "no transaction is active" after a failed BEGIN
            logger.debug("sqlite rollback failed", exc_info=True)

    def _require(self, executor: ThreadPoolExecutor | None) -> ThreadPoolExecutor:
        if executor is None:
            raise MemoryUnavailableError("the sqlite backend is not open")
        return executor


async def _settled(future: Awaitable[T], cancel: threading.Event) -> T:
    """Await a unit running on a storage thread; if the caller is cancelled, flag the
    unit to stop and wait until the thread is done with it before re-raising."""
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError as cancelled:
        cancel.set()
        waiting = asyncio.ensure_future(future)
        while not waiting.done():
            try:
                await asyncio.shield(waiting)
            except asyncio.CancelledError:
                continue
            except BaseException:  # the unit's own outcome no longer matters
                break
        if waiting.done() and not waiting.cancelled():
            waiting.exception()  # retrieved, so it is not reported as never retrieved
        raise cancelled
