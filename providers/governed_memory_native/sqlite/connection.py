"""Opening a SQLite connection the way every native connection must be opened.

The writer, the readers and the caller-thread point reader all get the same pragmas
and SQL functions, so a statement behaves the same whichever connection runs it. Only
the writer migrates; readers are ``query_only``, so a bug can never write through them.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from governed_memory.errors import MemoryConfigurationError

from governed_memory_native.retrieval.bm25 import idf
from governed_memory_native.retrieval.tokens import index_text, word_count
from governed_memory_native.sqlite.errors import translated
from governed_memory_native.sqlite.schema import LATEST_VERSION, MIGRATIONS
from governed_memory_native.storage.migrations import pending


def connect(path: Path, busy_timeout_ms: int, *, writer: bool) -> sqlite3.Connection:
    """A configured connection in autocommit mode (transactions are explicit).

    ``check_same_thread=False``: each connection is used by one thread at a time (the
    writer thread, one reader thread, or the caller holding the point-read lock), but
    it is opened and closed from another.
    """
    with translated("open"):
        conn = sqlite3.connect(path, isolation_level=None, timeout=busy_timeout_ms / 1000,
                               check_same_thread=False, cached_statements=256)
    try:
        with translated("open"):
            configure(conn, busy_timeout_ms, writer=writer)
    except BaseException:
        conn.close()
        raise
    return conn


def configure(conn: sqlite3.Connection, busy_timeout_ms: int, *, writer: bool) -> None:
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {busy_timeout_ms:d}")
    row = conn.execute("PRAGMA journal_mode = WAL").fetchone()
    if row is None or str(row[0]).lower() != "wal":
        raise MemoryConfigurationError("path: the database cannot use WAL journaling")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA secure_delete = ON")
    if not writer:
        conn.execute("PRAGMA query_only = ON")
    register_functions(conn)


def register_functions(conn: sqlite3.Connection) -> None:
    """SQL functions that call the Python the other backends run, so results agree:
    migrations rebuild derived data with the tokenizer the writes use, and search weighs
    terms with the memory backend's idf."""
    conn.create_function("gm_index_text", 1, index_text, deterministic=True)
    conn.create_function("gm_word_count", 1, word_count, deterministic=True)
    conn.create_function("gm_bm25_idf", 2, idf, deterministic=True)


def current_version(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'"
                       " AND name = 'schema_migrations'").fetchone()
    if row is None or row[0] == 0:
        return 0
    row = conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()
    return int(row[0]) if row is not None else 0


def migrate(conn: sqlite3.Connection, applied_at: float) -> int:
    """Bring the schema to ``LATEST_VERSION`` in one transaction; the caller holds none."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at REAL NOT NULL)"
        )
        for migration in pending(MIGRATIONS, current_version(conn), "path"):
            for statement in migration.statements:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO schema_migrations (version, description, applied_at)"
                " VALUES (?, ?, ?)",
                (migration.version, migration.description, applied_at),
            )
        conn.execute(f"PRAGMA user_version = {LATEST_VERSION:d}")
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    return LATEST_VERSION
