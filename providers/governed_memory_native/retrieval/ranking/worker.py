"""A ranking worker: a process of its own that runs lexical searches on the store its
provider has open, for :mod:`retrieval.ranking.pool`. Started as
``python -m governed_memory_native.retrieval.ranking.worker``; it reads requests on stdin and
answers on stdout (:mod:`retrieval.ranking.wire`), one search at a time, until stdin closes.

Why a process: a lexical search ranks in Python (:mod:`retrieval.lexical`), and Python code
holds the interpreter's lock whatever thread runs it, so searches on the provider's
threads neither run beside each other nor leave the event loop alone. A worker has a
lock of its own: on two cores, two workers rank two searches at once while the provider's
process serves the rest.

A worker runs exactly the code the provider would (``tx.postings.ranked`` in a read
transaction of its own), on a read-only connection: a SQLite ``query_only`` connection
to the same file (WAL: it reads beside the provider's writer), or a PostgreSQL session
of the same schema and settings at REPEATABLE READ, READ ONLY. It never migrates or
writes; its answer is ranked rows, which the provider decodes.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from governed_memory_native.retrieval.ranking import wire
from governed_memory_native.retrieval.ranking.wire import ROW_COLUMNS
from governed_memory_native.sql.records import RankedRows
from governed_memory_native.storage.values import SearchQuery


class _Store(Protocol):
    async def search(self, query: SearchQuery, tenant_id: str | None,
                     revisions: bool) -> tuple[tuple[int, ...] | None, RankedRows]:
        """The search in a read transaction, left open for :meth:`finish` (the answer
        goes out first: a read's COMMIT cannot change it)."""
        ...

    async def finish(self) -> None:
        """End the last search's transaction, if it is still open."""
        ...

    async def close(self) -> None: ...


class _SqliteStore:
    def __init__(self, path: str, busy_timeout_ms: int) -> None:
        from governed_memory_native.sqlite.connection import connect

        self._conn = connect(Path(path), busy_timeout_ms, writer=False)

    async def search(self, query: SearchQuery, tenant_id: str | None,
                     revisions: bool) -> tuple[tuple[int, ...] | None, RankedRows]:
        from governed_memory_native.sqlite.transaction import SqliteTransaction

        conn = self._conn
        conn.execute("BEGIN")
        try:
            tx = SqliteTransaction(conn)
            state = None
            if revisions and tenant_id is not None:
                state = (await tx.revisions.read(tenant_id, query.scope_hashes,
                                                 query.now)).revisions
            return state, await tx.postings.ranked(query)
        except BaseException:
            await self.finish()
            raise

    async def finish(self) -> None:
        """A read: ending it either way releases its snapshot."""
        if self._conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")

    async def close(self) -> None:
        await self.finish()
        self._conn.close()


class _PostgresStore:
    def __init__(self, dsn: str, schema: str, busy_timeout_ms: int) -> None:
        self._dsn = dsn
        self._schema = schema
        self._busy_timeout_ms = busy_timeout_ms
        self._conn: Any = None
        self._open: Any = None
        """The last search's transaction, until :meth:`finish`."""

    async def _connection(self) -> Any:
        import psycopg

        from governed_memory_native.postgres.backend import PostgresBackend

        if self._conn is None or self._conn.closed:
            settings = PostgresBackend(self._dsn, schema=self._schema, pool_min_size=0,
                                       pool_max_size=1, busy_timeout_ms=self._busy_timeout_ms)
            self._conn = await psycopg.AsyncConnection.connect(
                self._dsn, **settings.connection_kwargs(role="ranking"))
        return self._conn

    async def search(self, query: SearchQuery, tenant_id: str | None,
                     revisions: bool) -> tuple[tuple[int, ...] | None, RankedRows]:
        from governed_memory_native.postgres.backend import BEGIN_READ
        from governed_memory_native.postgres.transaction import (
            PostgresStats,
            PostgresTransaction,
        )

        tx = PostgresTransaction(await self._connection(), begin=BEGIN_READ,
                                 stats=PostgresStats())
        try:
            state = None
            if revisions and tenant_id is not None:
                state = (await tx.revisions.read(tenant_id, query.scope_hashes,
                                                 query.now)).revisions
            found = await tx.postings.ranked(query)
        except BaseException:
            await tx.roll_back()
            raise
        self._open = tx
        return state, found

    async def finish(self) -> None:
        tx, self._open = self._open, None
        if tx is not None:
            try:
                await tx.commit()
            except Exception:  # the answer stands; the next search reconnects if need be
                await tx.roll_back()

    async def close(self) -> None:
        await self.finish()
        if self._conn is not None:
            await self._conn.close()


def _open(spec: Mapping[str, Any]) -> _Store:
    if spec["backend"] == "postgres":
        return _PostgresStore(spec["dsn"], spec["schema"], spec["busy_timeout_ms"])
    return _SqliteStore(spec["path"], spec["busy_timeout_ms"])


def _row(row: Any) -> tuple[Any, ...]:
    return tuple(bytes(value) if isinstance(value, memoryview) else value
                 for value in (row[name] for name in ROW_COLUMNS))


def _read(stream: BinaryIO) -> tuple[Any, ...] | None:
    header = stream.read(wire.HEADER.size)
    if len(header) < wire.HEADER.size:
        return None
    (size,) = wire.HEADER.unpack(header)
    if size > wire.MAX_MESSAGE:
        raise ValueError("a ranking message longer than any search's")
    payload = stream.read(size)
    if len(payload) < size:
        return None
    return wire.decode(payload)


def _write(stream: BinaryIO, message: tuple[Any, ...]) -> None:
    stream.write(wire.encode(message))
    stream.flush()


async def _answer(store: _Store, request: tuple[Any, ...]) -> tuple[Any, ...]:
    _, request_id, tenant_id, revisions, fields = request
    try:
        query = wire.query_from_fields(fields)
        state, found = await store.search(query, tenant_id, bool(revisions))
        rows = found.rows
        answer = ("found", request_id, None if state is None else list(state),
                  found.candidates, [(score, _row(rows[doc])) for doc, score in found.ranked])
        wire.encode(answer)  # a value marshal cannot write: retried by the provider
    except Exception:
        return ("retry", request_id)
    return answer


def serve(requests: BinaryIO, answers: BinaryIO) -> int:
    """Answer requests until ``requests`` closes; the process's exit status."""
    opening = _read(requests)
    if opening is None or opening[0] != "open":
        return 2
    loop = asyncio.new_event_loop()
    try:
        try:
            store = _open(opening[1])
        except Exception as exc:
            _write(answers, ("failed", type(exc).__name__))
            return 1
        _write(answers, ("ready",))
        try:
            while (request := _read(requests)) is not None:
                if request[0] == "search":
                    _write(answers, loop.run_until_complete(_answer(store, request)))
                    loop.run_until_complete(store.finish())
        finally:
            loop.run_until_complete(store.close())
    finally:
        loop.close()
    return 0


def main() -> None:
    sys.exit(serve(sys.stdin.buffer, sys.stdout.buffer))


if __name__ == "__main__":
    main()
