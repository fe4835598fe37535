"""One SQLite transaction: the connection, the dialect hooks the shared statements run
on, and the transaction's repositories.

Statements only ever take bound parameters; the few pieces spliced into SQL text are
placeholders we generate. A unit of work drives its statements on the thread that holds
the connection (or hops to it, for the statement-at-a-time contexts tooling uses).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeVar

from governed_memory.records import MemoryRecord

from governed_memory_native.config import DEFAULT_LEXICAL_DELTA_MAX
from governed_memory_native.sql.dialect import Params
from governed_memory_native.sql.idempotency import SqlIdempotency
from governed_memory_native.sql.jobs import SqlIndexJobs
from governed_memory_native.sql.outbox import SqlOutbox
from governed_memory_native.sql.revisions import SqlScopeRevisions
from governed_memory_native.sql.snapshots import SqlSnapshots
from governed_memory_native.sql.versions import SqlVersions
from governed_memory_native.sqlite.errors import translated
from governed_memory_native.sqlite.lexical import LexicalWrites
from governed_memory_native.sqlite.rows import record_from_row
from governed_memory_native.sqlite.statements import (
    SqliteErasure,
    SqliteLexicalSearch,
    SqliteRecords,
    SqliteVectors,
)

T = TypeVar("T")

_CHUNK: Final = 500
"""Ids bound per statement; far below SQLite's variable limit."""


class UnitCancelled(Exception):
    """The caller of a unit of work was cancelled: stop before the next statement."""


class SqliteTransaction:
    """Runs on a connection that already holds ``BEGIN`` (reads) or ``BEGIN IMMEDIATE``."""

    __slots__ = ("_cancel", "_conn", "_hop", "erased_any", "erasure", "idempotency", "jobs",
                 "lexical", "outbox", "postings", "records", "revisions", "snapshots", "vectors",
                 "versions")

    chunk = _CHUNK
    content_bytes = "LENGTH(CAST(content AS BLOB))"

    def __init__(self, conn: sqlite3.Connection, *,
                 hop: Callable[[Callable[[], Any]], Awaitable[Any]] | None = None,
                 cancel: threading.Event | None = None,
                 delta_max: int = DEFAULT_LEXICAL_DELTA_MAX) -> None:
        """``conn`` already holds the transaction. Without ``hop`` the statements run
        right here, on the thread driving the unit of work; with it each statement is
        sent to the connection's thread (the ``reading()``/``writing()`` contexts that
        tooling uses). ``cancel`` set means the caller is gone: the next statement
        raises :class:`UnitCancelled` instead of running, so the unit rolls back.
        ``delta_max`` bounds each scope's lexical delta (see :mod:`sqlite.lexical`)."""
        self._conn = conn
        self._hop = hop
        self._cancel = cancel
        self.erased_any = False
        """Set once this transaction erased a record, so its commit must also clear the
        WAL of the erased bytes."""
        self.lexical = LexicalWrites(self, delta_max)
        self.records = SqliteRecords(self)
        self.postings = SqliteLexicalSearch(self)
        self.versions = SqlVersions(self)
        self.idempotency = SqlIdempotency(self)
        self.outbox = SqlOutbox(self)
        self.jobs = SqlIndexJobs(self)
        self.vectors = SqliteVectors(self)
        self.snapshots = SqlSnapshots(self)
        self.erasure = SqliteErasure(self)
        self.revisions = SqlScopeRevisions(self)

    @property
    def full_deltas(self) -> frozenset[int]:
        """Scopes (ids) this transaction left with a full lexical delta: once it
        commits, they are due for a merge."""
        return frozenset(self.lexical.due)

    async def seal(self) -> None:
        """Run just before COMMIT. Nothing is left to do here since schema v9: the
        lexical index is plain tables whose erased rows ``secure_delete`` zeroes, so
        erasure no longer merges (rewrites) a global FTS5 index of every tenant."""

    async def merge_lexical_delta(self, scope_ids: Sequence[int], at_least: int) -> int:
        """Merge the lexical delta of those scopes holding at least ``at_least`` rows
        into the main tables; how many rows were merged."""
        return await self.lexical.merge(scope_ids, at_least)

    async def compute(self, work: Callable[[], T]) -> T:
        """Inline: a unit of work already runs on a storage thread (the statement-at-a-
        time contexts run on the event loop, but only tooling uses them)."""
        self.check_cancel()
        return work()

    def check_cancel(self) -> None:
        if self._cancel is not None and self._cancel.is_set():
            raise UnitCancelled

    # -- the dialect hooks (sql_dialect.SqlDialect) -----------------------------------

    def q(self, sql: str) -> str:
        return sql

    def member(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        return f"{column} IN ({', '.join('?' * len(values))})", list(values)

    def text(self, value: str | None) -> Any:
        return value  # SQLite TEXT holds any string, U+0000 included

    def untext(self, value: Any) -> str | None:
        return None if value is None else str(value)

    def record_from_row(self, row: Any) -> MemoryRecord:
        return record_from_row(row)

    async def rows(self, sql: str, params: Params = (), *,
                   lock_free: bool = False) -> list[Any]:
        if self._hop is not None:
            rows: list[Any] = await self._hop(lambda: self._fetch(sql, params))
            return rows
        return self._fetch(sql, params)

    async def tuples(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        """Like :meth:`rows`, as plain tuples: postings come by the ten thousand, and a
        tuple costs a fraction of an ``sqlite3.Row``."""
        if self._hop is not None:
            rows: list[tuple[Any, ...]] = await self._hop(lambda: self._fetch_tuples(sql, params))
            return rows
        return self._fetch_tuples(sql, params)

    async def write(self, sql: str, params: Params = (), *, lock_free: bool = False) -> int:
        if self._hop is not None:
            changed: int = await self._hop(lambda: self._change(sql, params)[0])
            return changed
        return self._change(sql, params)[0]

    async def queue(self, sql: str, params: Params = (), *, lock_free: bool = False) -> None:
        """Run now: a statement costs no round trip here."""
        await self.write(sql, params)

    async def write_many(self, statements: Sequence[tuple[str, Params]], *,
                         lock_free: bool = False) -> list[int]:
        return [await self.write(sql, params) for sql, params in statements]

    async def vector_pairs(self, sql: str, params: Params) -> list[tuple[str, bytes]]:
        return [(str(row[0]), bytes(row[1])) for row in await self.tuples(sql, params)]

    # -- what sqlite_lexical and sqlite_statements need besides -----------------------

    async def fetch(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Rows as tuples, of a read or of a write with ``RETURNING``
        (:class:`sqlite_lexical.Statements`)."""
        return await self.tuples(sql, params)

    async def execute(self, sql: str, params: Sequence[Any]) -> int:
        return await self.write(sql, params)

    async def insert_row(self, sql: str, params: Params) -> int:
        """Run an INSERT; returns the new row's rowid."""
        if self._hop is not None:
            rowid: int = await self._hop(lambda: self._change(sql, params)[1])
            return rowid
        return self._change(sql, params)[1]

    async def returning(self, sql: str, params: Params) -> list[tuple[Any, ...]]:
        """Run a write with ``RETURNING``; the rows it returned."""
        if self._hop is not None:
            rows: list[tuple[Any, ...]] = await self._hop(
                lambda: self._change_returning(sql, params))
            return rows
        return self._change_returning(sql, params)

    # -- on the connection's thread ---------------------------------------------------

    def _change_returning(self, sql: str, params: Params) -> list[tuple[Any, ...]]:
        self.check_cancel()
        with translated("write"):
            cursor = self._conn.cursor()
            cursor.row_factory = None
            return cursor.execute(sql, params).fetchall()

    def _fetch(self, sql: str, params: Params) -> list[Any]:
        self.check_cancel()
        with translated("read"):
            return self._conn.execute(sql, params).fetchall()

    def _fetch_tuples(self, sql: str, params: Params) -> list[tuple[Any, ...]]:
        self.check_cancel()
        with translated("read"):
            cursor = self._conn.cursor()
            cursor.row_factory = None
            return cursor.execute(sql, params).fetchall()

    def _change(self, sql: str, params: Params) -> tuple[int, int]:
        self.check_cancel()
        with translated("write"):
            cursor = self._conn.execute(sql, params)
            return int(cursor.rowcount), int(cursor.lastrowid or 0)
