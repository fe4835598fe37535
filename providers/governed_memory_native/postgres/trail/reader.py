"""Reading a PostgreSQL trail for the audit tools (``governed-memory audit verify
--store ...``): :class:`governed_memory.audit.stored.StoredTrail` over psycopg's
synchronous API.

One connection, one REPEATABLE READ, READ ONLY transaction for the reader's life: the
head record, the entries, the leaves and the lookups all see one snapshot, so a
sequencer committing meanwhile never makes the head and the entries disagree; only an
edit behind the sequencer's back can. Entries stream through a server-side cursor, so
a trail of millions of entries is verified in flat memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import psycopg
from governed_memory.audit.stored import StoredEntry, StoredHead, StoredOpening
from governed_memory.errors import MemoryStorageError, MemoryUnavailableError
from psycopg.conninfo import conninfo_to_dict

_CHUNK: Final = 5_000
"""Rows per fetch from the server-side cursors."""


def describe(dsn: str, schema: str) -> str:
    """Where a trail is, for messages: host, port, database and schema, never a password
    (nor anything else of the connection string)."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.Error:
        return f"postgresql (schema {schema})"
    host = parts.get("host") or "localhost"
    port = parts.get("port") or "5432"
    database = parts.get("dbname") or ""
    return f"postgresql://{host}:{port}/{database} (schema {schema})"


class PostgresStoredTrail:
    """A PostgreSQL trail, read-only, for one command (see the module docstring)."""

    def __init__(self, dsn: str, schema: str, *, timeout_s: float = 5.0) -> None:
        self._dsn = dsn
        self._schema = schema
        self._timeout_s = timeout_s
        self._conn: psycopg.Connection[tuple[Any, ...]] | None = None
        self._tables: bool | None = None

    @property
    def location(self) -> str:
        return describe(self._dsn, self._schema)

    def __enter__(self) -> PostgresStoredTrail:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _connection(self) -> psycopg.Connection[tuple[Any, ...]]:
        if self._conn is None:
            try:
                conn = psycopg.connect(self._dsn, connect_timeout=max(1, round(self._timeout_s)),
                                       options=f"-c search_path={self._schema}",
                                       application_name="governed-memory-audit")
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            except psycopg.Error as exc:
                raise MemoryUnavailableError(f"cannot read the trail at {self.location}: "
                                             f"{type(exc).__name__}") from None
            self._conn = conn
        return self._conn

    def _rows(self, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        try:
            return self._connection().execute(query, params).fetchall()
        except psycopg.Error as exc:
            raise self._failure(exc) from None

    def _failure(self, exc: psycopg.Error) -> Exception:
        if isinstance(exc, psycopg.OperationalError):
            return MemoryUnavailableError(f"cannot read the trail at {self.location}: "
                                          f"{type(exc).__name__}")
        return MemoryStorageError(f"reading the trail at {self.location} failed: "
                                  f"{type(exc).__name__} ({exc.sqlstate or 'no sqlstate'})")

    def _present(self) -> bool:
        """Whether the schema has the trail's tables (a schema without them, or none at
        all, holds no trail: that is not an error)."""
        if self._tables is None:
            found = self._rows("SELECT to_regclass('audit_chain') IS NOT NULL"
                               " AND to_regclass('audit_entries') IS NOT NULL"
                               " AND to_regclass('audit_intake') IS NOT NULL")
            self._tables = bool(found and found[0][0])
        return self._tables

    def opening(self) -> StoredOpening | None:
        if not self._present():
            return None
        rows = self._rows("SELECT chain_id, created_at, genesis FROM audit_chain WHERE id = 1")
        if not rows:
            return None
        chain_id, created_at, genesis = rows[0]
        return StoredOpening(str(chain_id), float(created_at), str(genesis))

    def head(self) -> StoredHead:
        if not self._present():
            return StoredHead(0, "", b"")
        rows = self._rows("SELECT entries, head, frontier FROM audit_chain WHERE id = 1")
        if not rows:
            return StoredHead(0, "", b"")
        entries, head, frontier = rows[0]
        return StoredHead(int(entries), str(head), bytes(frontier))

    def entries(self, upto: int | None = None) -> Iterator[StoredEntry]:
        query = "SELECT seq, event, prev, hash, leaf FROM audit_entries"
        params: tuple[Any, ...] = ()
        if upto is not None:
            query += " WHERE seq <= %s"
            params = (upto,)
        query += " ORDER BY seq"
        conn = self._connection()
        try:
            with conn.cursor(name="governed_memory_audit_entries") as cursor:
                cursor.itersize = _CHUNK
                cursor.execute(query, params)
                for seq, event, prev, digest, leaf in cursor:
                    yield StoredEntry(int(seq), str(event).encode("utf-8"), str(prev),
                                      str(digest), bytes(leaf))
        except psycopg.Error as exc:
            raise self._failure(exc) from None

    def find(self, event_id: str) -> StoredEntry | None:
        rows = self._rows("SELECT seq, event, prev, hash, leaf FROM audit_entries"
                          " WHERE event_id = %s", (event_id,))
        if not rows:
            return None
        seq, event, prev, digest, leaf = rows[0]
        return StoredEntry(int(seq), str(event).encode("utf-8"), str(prev), str(digest),
                           bytes(leaf))

    def leaves(self, upto: int) -> bytes:
        conn = self._connection()
        parts: list[bytes] = []
        try:
            with conn.cursor(name="governed_memory_audit_leaves") as cursor:
                cursor.itersize = 50_000
                cursor.execute("SELECT leaf FROM audit_entries WHERE seq <= %s ORDER BY seq",
                               (upto,))
                parts.extend(bytes(leaf) for (leaf,) in cursor)
        except psycopg.Error as exc:
            raise self._failure(exc) from None
        return b"".join(parts)

    def hash_at(self, seq: int) -> str | None:
        if seq == 0:
            opening = self.opening()
            return None if opening is None else opening.genesis
        rows = self._rows("SELECT hash FROM audit_entries WHERE seq = %s", (seq,))
        return str(rows[0][0]) if rows else None

    def waiting(self) -> int:
        if not self._present():
            return 0
        rows = self._rows("SELECT count(*) FROM audit_intake")
        return int(rows[0][0]) if rows else 0

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.rollback()
            finally:
                conn.close()
