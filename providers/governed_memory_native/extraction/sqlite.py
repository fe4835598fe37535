"""The extraction queue in the SQLite database file, beside the memories.

The jobs are kept in the memory database itself (one file to back up, erased with it),
on a connection of their own opened on first use, with the native connection's settings
(WAL, ``synchronous = FULL``, ``secure_delete``): a queued job survives a crash once
``enqueue`` returns. Every change is one ``BEGIN IMMEDIATE`` transaction, so leases from
several processes sharing the file never take the same job: a process picks the due
jobs and leases them before any other writer can look. A wait for the file's write lock
is bounded by the provider's ``busy_timeout_ms``; past it the call is unavailable, and
the worker's round simply comes again.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Final, TypeVar

from governed_memory.extraction_jobs import (
    EnqueuedJob,
    ExtractionJob,
    ExtractionJobState,
    ExtractionQueueStatus,
    Settlement,
)

from governed_memory_native.extraction.rows import (
    COLUMNS,
    COUNTS,
    DUE,
    ERASE_USER,
    IN_STATE,
    INSERT,
    OLDEST,
    REQUEUE,
    SETTLE,
    STATE_OF,
    TABLE,
    decode,
    encode,
    settle_values,
)
from governed_memory_native.sqlite.connection import connect
from governed_memory_native.sqlite.errors import translated

T = TypeVar("T")

SCHEMA: Final = (
    f"""CREATE TABLE IF NOT EXISTS {TABLE} (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        job_id TEXT NOT NULL UNIQUE,
        tenant_id TEXT NOT NULL,
        user_id TEXT,
        scope_hash TEXT NOT NULL,
        owner TEXT NOT NULL,
        principal TEXT NOT NULL,
        turn_ids TEXT NOT NULL,
        first_seq INTEGER NOT NULL,
        last_seq INTEGER NOT NULL,
        state TEXT NOT NULL,
        attempts INTEGER NOT NULL,
        next_attempt_at REAL NOT NULL,
        created_at REAL NOT NULL,
        lease_owner TEXT,
        lease_expires_at REAL,
        last_error_code TEXT,
        finished_at REAL
    )""",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_due ON {TABLE} (state, next_attempt_at)",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_user ON {TABLE} (tenant_id, user_id)",
)


class SqliteExtractionJobs:
    """``governed_memory.extraction_jobs.ExtractionJobStore`` in a SQLite file."""

    def __init__(self, path: Path, *, busy_timeout_ms: int) -> None:
        self.path = path
        self.busy_timeout_ms = busy_timeout_ms
        self._executor: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None

    async def _run(self, action: str, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work`` on the queue's one connection and thread (opened on first use)."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1,
                                                thread_name_prefix="gm-extraction-sqlite")
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, self._call, action, work)

    def _call(self, action: str, work: Callable[[sqlite3.Connection], T]) -> T:
        with translated(f"extraction queue {action}"):
            if self._conn is None:
                conn = connect(self.path, self.busy_timeout_ms, writer=True)
                try:
                    _write(conn, lambda c: [c.execute(s) for s in SCHEMA])
                except BaseException:
                    conn.close()
                    raise
                self._conn = conn
            return work(self._conn)

    async def enqueue(self, job: ExtractionJob) -> EnqueuedJob:
        def work(conn: sqlite3.Connection) -> EnqueuedJob:
            def body(c: sqlite3.Connection) -> EnqueuedJob:
                if c.execute(INSERT, encode(job)).rowcount == 1:
                    return EnqueuedJob(job.job_id, job.state, created=True)
                row = c.execute(STATE_OF, (job.job_id,)).fetchone()
                return EnqueuedJob(job.job_id, ExtractionJobState(row[0]), created=False)
            return _write(conn, body)
        return await self._run("enqueue", work)

    async def lease(self, owner: str, now: float, lease_until: float,
                    limit: int) -> list[ExtractionJob]:
        def body(c: sqlite3.Connection) -> list[ExtractionJob]:
            ids = [row[0] for row in c.execute(
                f"SELECT job_id FROM {TABLE} WHERE {DUE} ORDER BY seq LIMIT ?",
                (now, now, limit))]
            if not ids:
                return []
            marks = ", ".join("?" * len(ids))
            c.execute(f"UPDATE {TABLE} SET state = 'leased', lease_owner = ?,"
                      " lease_expires_at = ?, attempts = attempts + 1"
                      f" WHERE job_id IN ({marks})", (owner, lease_until, *ids))
            rows = c.execute(f"SELECT {COLUMNS} FROM {TABLE} WHERE job_id IN ({marks})"
                             " ORDER BY seq", ids).fetchall()
            return [decode(tuple(row)) for row in rows]
        return await self._run("lease", lambda conn: _write(conn, body))

    async def settle(self, settlement: Settlement, now: float) -> bool:
        values = settle_values(settlement, now)
        return await self._run("settle", lambda conn: _write(
            conn, lambda c: c.execute(SETTLE, values).rowcount == 1))

    async def status(self) -> ExtractionQueueStatus:
        def work(conn: sqlite3.Connection) -> ExtractionQueueStatus:
            counts = {str(state): int(n) for state, n in conn.execute(COUNTS)}
            oldest = conn.execute(OLDEST).fetchone()[0]
            return ExtractionQueueStatus(
                pending=counts.get("pending", 0), leased=counts.get("leased", 0),
                done=counts.get("done", 0), dead=counts.get("dead", 0),
                oldest_pending_at=None if oldest is None else float(oldest))
        return await self._run("status", work)

    async def jobs(self, state: ExtractionJobState, limit: int) -> list[ExtractionJob]:
        return await self._run("read", lambda conn: [
            decode(tuple(row)) for row in conn.execute(IN_STATE, (state.value, limit))])

    async def requeue_dead(self, job_ids: Sequence[str] | None, now: float) -> int:
        def body(c: sqlite3.Connection) -> int:
            if job_ids is None:
                return int(c.execute(REQUEUE, (now,)).rowcount)
            total = 0
            chosen = sorted(set(job_ids))
            for start in range(0, len(chosen), 500):
                chunk = chosen[start:start + 500]
                total += c.execute(f"{REQUEUE} AND job_id IN ({', '.join('?' * len(chunk))})",
                                   (now, *chunk)).rowcount
            return total
        return await self._run("requeue", lambda conn: _write(conn, body))

    async def erase_user(self, tenant_id: str, user_id: str) -> int:
        return await self._run("erasure", lambda conn: _write(
            conn, lambda c: int(c.execute(ERASE_USER, (tenant_id, user_id)).rowcount)))

    async def close(self) -> None:
        executor, self._executor = self._executor, None
        if executor is None:
            return
        conn, self._conn = self._conn, None
        if conn is not None:
            def shut() -> None:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            await asyncio.get_running_loop().run_in_executor(executor, shut)
        executor.shutdown(wait=True)


def _write(conn: sqlite3.Connection, body: Callable[[sqlite3.Connection], T]) -> T:
    """``body`` in one ``BEGIN IMMEDIATE`` transaction: committed if it returns, rolled
    back if it raises."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = body(conn)
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return result
