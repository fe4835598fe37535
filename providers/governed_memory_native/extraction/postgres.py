"""The extraction queue in the provider's PostgreSQL schema, shared by every process and
node that shares the schema.

One table, created on first use under an advisory lock (two processes starting at once
would otherwise race on the catalog), reached through a small pool of the queue's own,
so a lease never waits for a memory writer's lock or a writer for a lease. A lease is
one statement that picks the due jobs ``FOR UPDATE SKIP LOCKED`` and marks them leased:
workers on several nodes never take the same job, and none waits for another's.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from typing import Any, Final

import psycopg
from governed_memory.extraction_jobs import (
    EnqueuedJob,
    ExtractionJob,
    ExtractionJobState,
    ExtractionQueueStatus,
    Settlement,
)
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

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
from governed_memory_native.postgres.errors import translated

POOL_MAX: Final = 2
SETUP_LOCK_SALT: Final = b"governed-memory extraction jobs v1:"

_TABLE: Final = (
    f"""CREATE TABLE IF NOT EXISTS {{schema}}.{TABLE} (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        job_id TEXT NOT NULL UNIQUE,
        tenant_id TEXT NOT NULL,
        user_id TEXT,
        scope_hash TEXT NOT NULL,
        owner TEXT NOT NULL,
        principal TEXT NOT NULL,
        turn_ids TEXT NOT NULL,
        first_seq BIGINT NOT NULL,
        last_seq BIGINT NOT NULL,
        state TEXT NOT NULL,
        attempts INTEGER NOT NULL,
        next_attempt_at DOUBLE PRECISION NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        lease_owner TEXT,
        lease_expires_at DOUBLE PRECISION,
        last_error_code TEXT,
        finished_at DOUBLE PRECISION
    )""",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_due ON {{schema}}.{TABLE} (state, next_attempt_at)",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_user ON {{schema}}.{TABLE} (tenant_id, user_id)",
)
_LEASE: Final = (f"UPDATE {TABLE} SET state = 'leased', lease_owner = %s,"
                 " lease_expires_at = %s, attempts = attempts + 1"
                 f" WHERE job_id IN (SELECT job_id FROM {TABLE} WHERE {DUE.replace('?', '%s')}"
                 " ORDER BY seq LIMIT %s FOR UPDATE SKIP LOCKED)"
                 f" RETURNING seq, {COLUMNS}")


def _pg(statement: str) -> str:
    return statement.replace("?", "%s")


def setup_lock_key(schema: str) -> int:
    digest = hashlib.sha256(SETUP_LOCK_SALT + schema.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class PostgresExtractionJobs:
    """``governed_memory.extraction_jobs.ExtractionJobStore`` in a PostgreSQL schema."""

    def __init__(self, dsn: str, *, schema: str, busy_timeout_ms: int) -> None:
        self._dsn = dsn
        self.schema = schema
        self._wait_s = max(busy_timeout_ms / 1000, 1.0)
        self._pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] | None = None
        self._opening = asyncio.Lock()

    async def _open(self) -> AsyncConnectionPool[psycopg.AsyncConnection[Any]]:
        if self._pool is not None:
            return self._pool
        async with self._opening:
            if self._pool is not None:
                return self._pool
            name = f"governed-memory/{self.schema}/extraction"
            pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] = AsyncConnectionPool(
                self._dsn, min_size=1, max_size=POOL_MAX, open=False, timeout=self._wait_s,
                name=name, kwargs={"autocommit": True,
                                   "options": f"-c search_path={self.schema}",
                                   "application_name": name})
            try:
                with translated("extraction queue setup"):
                    await pool.open(wait=True, timeout=self._wait_s)
                    async with pool.connection() as conn:
                        await _set_up(conn, self.schema)
            except BaseException:
                await pool.close()
                raise
            self._pool = pool
            return pool

    async def enqueue(self, job: ExtractionJob) -> EnqueuedJob:
        pool = await self._open()
        with translated("extraction queue enqueue"):
            async with pool.connection() as conn, conn.transaction():
                cursor = await conn.execute(_pg(INSERT), encode(job))
                if cursor.rowcount == 1:
                    return EnqueuedJob(job.job_id, job.state, created=True)
                row = await (await conn.execute(_pg(STATE_OF), (job.job_id,))).fetchone()
        assert row is not None  # the conflicting row exists: jobs are never deleted here
        return EnqueuedJob(job.job_id, ExtractionJobState(row[0]), created=False)

    async def lease(self, owner: str, now: float, lease_until: float,
                    limit: int) -> list[ExtractionJob]:
        pool = await self._open()
        with translated("extraction queue lease"):
            async with pool.connection() as conn:
                cursor = await conn.execute(_LEASE, (owner, lease_until, now, now, limit))
                rows = await cursor.fetchall()
        return [decode(tuple(row[1:])) for row in sorted(rows, key=lambda r: int(r[0]))]

    async def settle(self, settlement: Settlement, now: float) -> bool:
        pool = await self._open()
        with translated("extraction queue settle"):
            async with pool.connection() as conn:
                cursor = await conn.execute(_pg(SETTLE), settle_values(settlement, now))
                return cursor.rowcount == 1

    async def status(self) -> ExtractionQueueStatus:
        pool = await self._open()
        with translated("extraction queue status"):
            async with pool.connection() as conn:
                counts = {str(state): int(n) for state, n in
                          await (await conn.execute(COUNTS)).fetchall()}
                row = await (await conn.execute(OLDEST)).fetchone()
        oldest = None if row is None or row[0] is None else float(row[0])
        return ExtractionQueueStatus(
            pending=counts.get("pending", 0), leased=counts.get("leased", 0),
            done=counts.get("done", 0), dead=counts.get("dead", 0), oldest_pending_at=oldest)

    async def jobs(self, state: ExtractionJobState, limit: int) -> list[ExtractionJob]:
        pool = await self._open()
        with translated("extraction queue read"):
            async with pool.connection() as conn:
                rows = await (await conn.execute(_pg(IN_STATE), (state.value, limit))
                              ).fetchall()
        return [decode(tuple(row)) for row in rows]

    async def requeue_dead(self, job_ids: Sequence[str] | None, now: float) -> int:
        pool = await self._open()
        with translated("extraction queue requeue"):
            async with pool.connection() as conn:
                if job_ids is None:
                    cursor = await conn.execute(_pg(REQUEUE), (now,))
                else:
                    cursor = await conn.execute(_pg(f"{REQUEUE} AND job_id = ANY(?)"),
                                                (now, sorted(set(job_ids))))
                return int(cursor.rowcount)

    async def erase_user(self, tenant_id: str, user_id: str) -> int:
        pool = await self._open()
        with translated("extraction queue erasure"):
            async with pool.connection() as conn:
                cursor = await conn.execute(_pg(ERASE_USER), (tenant_id, user_id))
                return int(cursor.rowcount)

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()


async def _set_up(conn: psycopg.AsyncConnection[Any], schema: str) -> None:
    name = sql.Identifier(schema)
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (setup_lock_key(schema),))
        await conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(name))
        for statement in _TABLE:
            await conn.execute(sql.SQL(statement).format(schema=name))
