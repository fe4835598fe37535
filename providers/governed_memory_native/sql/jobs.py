"""The indexing outbox on SQL: jobs that give a record its vector (or take it away),
leased by workers and settled by the lease that took them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from governed_memory.indexing import IndexJob, JobState

from governed_memory_native.sql.dialect import Params, SqlDialect, chunks
from governed_memory_native.sql.rows import JOB_COLUMNS, JOB_FIELDS, job_from_row, job_value

_HELD: Final = "job_id = ? AND state = 'leased' AND lease_owner = ? AND attempts = ?"
"""The job is still leased as the settling worker saw it."""


class SqlIndexJobs:
    __slots__ = ("_db",)

    def __init__(self, db: SqlDialect) -> None:
        self._db = db

    async def in_state(self, state: JobState, limit: int) -> list[IndexJob]:
        db = self._db
        rows = await db.rows(db.q(
            f"SELECT {JOB_COLUMNS} FROM index_jobs WHERE state = ? ORDER BY seq LIMIT ?"
        ), (state.value, limit))
        return [job_from_row(row) for row in rows]

    async def counts(self) -> tuple[dict[str, int], float | None]:
        db = self._db
        rows = await db.tuples("SELECT state, count(*) FROM index_jobs GROUP BY state")
        pending = await db.tuples(
            "SELECT min(created_at) FROM index_jobs WHERE state = 'pending'")
        oldest = pending[0][0] if pending else None
        return ({str(state): int(n) for state, n in rows},
                None if oldest is None else float(oldest))

    async def enqueue(self, job: IndexJob) -> None:
        db = self._db
        await db.queue(db.q(
            "DELETE FROM index_jobs WHERE record_id = ? AND state = 'pending' AND version <= ?"
        ), (job.record_id, job.version))
        await db.queue(db.q(
            f"INSERT INTO index_jobs ({JOB_COLUMNS}) VALUES ({', '.join('?' * len(JOB_FIELDS))})"
        ), [job_value(job, name) for name in JOB_FIELDS])

    async def lease(self, owner: str, now: float, lease_until: float,
                    limit: int) -> list[IndexJob]:
        """Pick the due jobs, lease them, read them back: under a single writer nothing
        can take them in between (PostgreSQL's writers do not wait for each other here,
        and lease with ``SKIP LOCKED`` instead)."""
        db = self._db
        rows = await db.tuples(db.q(
            "SELECT job_id FROM index_jobs"
            " WHERE (state = 'pending' AND next_attempt_at <= ?)"
            " OR (state = 'leased' AND lease_expires_at <= ?) ORDER BY seq LIMIT ?"
        ), (now, now, limit))
        if not rows:
            return []
        ids, params = db.member("job_id", [str(row[0]) for row in rows])
        await db.write(db.q(
            "UPDATE index_jobs SET state = 'leased', lease_owner = ?, lease_expires_at = ?,"
            f" attempts = attempts + 1 WHERE {ids}"), [owner, lease_until, *params])
        leased = await db.rows(db.q(
            f"SELECT {JOB_COLUMNS} FROM index_jobs WHERE {ids} ORDER BY seq"), params)
        return [job_from_row(row) for row in leased]

    async def settle(self, job: IndexJob, *, done: bool,
                     next_attempt_at: float | None = None,
                     error_code: str | None = None) -> bool:
        db = self._db
        lease = (job.job_id, job.lease_owner, job.attempts)
        if done:
            return await db.write(db.q(f"DELETE FROM index_jobs WHERE {_HELD}"), lease) == 1
        state = JobState.DEAD if next_attempt_at is None else JobState.PENDING
        return await db.write(db.q(
            "UPDATE index_jobs SET state = ?, next_attempt_at = coalesce(?, next_attempt_at),"
            f" lease_owner = NULL, lease_expires_at = NULL, last_error_code = ? WHERE {_HELD}"
        ), (state.value, next_attempt_at, error_code, *lease)) == 1

    async def requeue_dead(self, job_ids: Sequence[str] | None, now: float) -> int:
        db = self._db
        update = ("UPDATE index_jobs SET state = 'pending', attempts = 0, next_attempt_at = ?"
                  " WHERE state = 'dead'")
        if job_ids is None:
            return await db.write(db.q(update), (now,))
        statements: list[tuple[str, Params]] = []
        for chunk in chunks(sorted(set(job_ids)), db.chunk):
            ids, params = db.member("job_id", chunk)
            statements.append((db.q(f"{update} AND {ids}"), [now, *params]))
        return sum(await db.write_many(statements)) if statements else 0
