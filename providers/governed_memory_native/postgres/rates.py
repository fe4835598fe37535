"""Write-rate windows in the provider's PostgreSQL schema: one window per tenant and per
scope for every process and node on that database.

Two UNLOGGED tables beside the memory tables (``rate_windows``: one row per window with
how many events it holds; ``rate_events``: the events) and one function,
``rate_admit_v1``, that does a whole admit server-side, so an admit is one statement and
one round trip:

1. each window's row is created if missing, then all are locked ``FOR UPDATE`` in key
   order (admits that share a window run one at a time; two admits never wait for each
   other in a cycle);
2. each window's expired events are deleted and its count compared with its limit (each
   statement of the function sees what the previous holder of the row committed);
3. if every window admits, the event is inserted in each and the counts raised (one
   statement).

Nothing here takes the memory writers' advisory locks or touches their rows, so an
admit never waits for a write (or a write for an admit). The sessions are this module's
own (a small pool beside the provider's), with ``synchronous_commit = off``: an admit's
commit does not wait for a WAL flush (the tables are unlogged anyway), and
``lock_timeout`` bounds the wait for a busy window (the provider's ``busy_timeout_ms``,
at least :data:`MIN_LOCK_MS`): past it the admit raises and the write is denied.

UNLOGGED: after a PostgreSQL crash the tables come back empty, so every window starts
again from nothing, at most one period of writes forgotten; a clean restart keeps them.
Window names are hashes of the policy's keys (``governed_memory.rates.stored_key``):
no tenant id or scope hash is stored. Windows idle for a whole period are swept, from
the admit of every :data:`~governed_memory.rates.SWEEP_EVERY`-th call of a process,
skipping any window another admit holds.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from typing import Any, Final

import psycopg
from governed_memory.errors import MemoryStorageError
from governed_memory.rates import SWEEP_EVERY, RateLimit, check_limits, stored_key
from psycopg import sql
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from governed_memory_native.postgres.errors import translate

MIN_LOCK_MS: Final = 100
"""The shortest wait for a busy window (PostgreSQL's ``lock_timeout = 0`` would wait
for ever; an admit holds a window for well under a millisecond)."""
POOL_MAX: Final = 4
"""Sessions one process keeps for admits at most (one, while idle)."""
SETUP_LOCK_SALT: Final = b"governed-memory rate windows v1:"

_TABLES: Final = (
    "CREATE UNLOGGED TABLE IF NOT EXISTS {schema}.rate_windows ("
    " key text PRIMARY KEY, period_s double precision NOT NULL, live integer NOT NULL,"
    " last_at double precision NOT NULL)",
    "CREATE UNLOGGED TABLE IF NOT EXISTS {schema}.rate_events ("
    " key text NOT NULL, at double precision NOT NULL)",
    "CREATE INDEX IF NOT EXISTS rate_events_key_at ON {schema}.rate_events (key, at)",
)

_FUNCTION: Final = """
CREATE OR REPLACE FUNCTION {schema}.rate_admit_v1(
    keys text[], limits integer[], periods double precision[], now_s double precision,
    sweep boolean) RETURNS integer LANGUAGE plpgsql AS $fn$
DECLARE
    i integer;
    removed integer;
    held integer;
BEGIN
    INSERT INTO {schema}.rate_windows AS w (key, period_s, live, last_at)
        SELECT u.k, u.p, 0, now_s FROM unnest(keys, periods) AS u(k, p) ORDER BY u.k
        ON CONFLICT (key) DO NOTHING;
    PERFORM 1 FROM {schema}.rate_windows AS w WHERE w.key = ANY(keys)
        ORDER BY w.key FOR UPDATE;
    FOR i IN 1 .. cardinality(keys) LOOP
        DELETE FROM {schema}.rate_events AS e
            WHERE e.key = keys[i] AND e.at <= now_s - periods[i];
        GET DIAGNOSTICS removed = ROW_COUNT;
        IF removed > 0 THEN
            UPDATE {schema}.rate_windows AS w SET live = w.live - removed
                WHERE w.key = keys[i] RETURNING w.live INTO held;
        ELSE
            SELECT w.live INTO held FROM {schema}.rate_windows AS w WHERE w.key = keys[i];
        END IF;
        IF held >= limits[i] THEN
            RETURN i;
        END IF;
    END LOOP;
    WITH added AS (
        INSERT INTO {schema}.rate_events (key, at) SELECT k, now_s FROM unnest(keys) AS k)
    UPDATE {schema}.rate_windows AS w
        SET live = w.live + 1, last_at = greatest(w.last_at, now_s),
            period_s = greatest(w.period_s, periods[array_position(keys, w.key)])
        WHERE w.key = ANY(keys);
    IF sweep THEN
        WITH idle AS (
            SELECT w.key FROM {schema}.rate_windows AS w
            WHERE w.last_at <= now_s - w.period_s AND NOT (w.key = ANY(keys))
            LIMIT 1000 FOR UPDATE SKIP LOCKED),
        gone AS (
            DELETE FROM {schema}.rate_windows AS w USING idle WHERE w.key = idle.key
            RETURNING w.key)
        DELETE FROM {schema}.rate_events AS e USING gone WHERE e.key = gone.key;
    END IF;
    RETURN 0;
END
$fn$
"""

ADMIT: Final = ("SELECT rate_admit_v1(%s::text[], %s::integer[], %s::double precision[],"
                " %s::double precision, %s) AS refused")


def setup_lock_key(schema: str) -> int:
    """The advisory lock that serialises creating the tables and the function (two
    processes starting at once would otherwise race on the catalog)."""
    digest = hashlib.sha256(SETUP_LOCK_SALT + schema.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class PostgresRateWindows:
    """``governed_memory.rates.RateWindows`` in a PostgreSQL schema."""

    shared = True
    """Every process and node on the same database and schema counts into the same
    windows."""

    def __init__(self, dsn: str, *, schema: str, busy_timeout_ms: int) -> None:
        self._dsn = dsn
        self.schema = schema
        self.lock_timeout_ms = max(busy_timeout_ms, MIN_LOCK_MS)
        self._pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] | None = None
        self._opening = asyncio.Lock()
        self._admits = 0

    @property
    def _wait_s(self) -> float:
        return max(self.lock_timeout_ms / 1000, 0.05)

    async def admit(self, limits: Sequence[RateLimit], now: float) -> RateLimit | None:
        check_limits(limits, now)
        if not limits:
            return None
        pool = await self._open()
        self._admits += 1
        sweep = self._admits % SWEEP_EVERY == 0
        params = ([stored_key(limit.key) for limit in limits], [limit.limit for limit in limits],
                  [float(limit.period_s) for limit in limits], float(now), sweep)
        row = None
        for attempt in (1, 2):
            used: psycopg.AsyncConnection[Any] | None = None
            try:
                async with pool.connection(timeout=self._wait_s) as conn:
                    used = conn
                    cursor = await conn.execute(ADMIT, params)
                    row = await cursor.fetchone()
                break
            except psycopg.OperationalError as exc:
                # A pooled session the server dropped (a restart): the pool discards
                # it, and one more try takes a fresh one. Should the first try have
                # counted before the break, the event counts twice: toward refusing.
                if attempt == 2 or isinstance(exc, PoolTimeout) or used is None \
                        or not used.closed:
                    raise translate(exc, "rate window") from None
            except psycopg.Error as exc:
                raise translate(exc, "rate window") from None
        index = None if row is None else row[0]
        if not isinstance(index, int) or not 0 <= index <= len(limits):
            raise MemoryStorageError("postgres rate window: malformed answer")
        return None if index == 0 else limits[index - 1]

    async def _open(self) -> AsyncConnectionPool[psycopg.AsyncConnection[Any]]:
        if self._pool is not None:
            return self._pool
        async with self._opening:
            if self._pool is not None:
                return self._pool
            pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]] = AsyncConnectionPool(
                self._dsn, min_size=1, max_size=POOL_MAX, open=False, timeout=self._wait_s,
                name=f"governed-memory/{self.schema}/rates",
                kwargs={"autocommit": True, "options": (
                    f"-c search_path={self.schema} -c synchronous_commit=off"
                    f" -c lock_timeout={self.lock_timeout_ms}ms"),
                    "application_name": f"governed-memory/{self.schema}/rates"},
            )
            try:
                await pool.open(wait=True, timeout=max(self._wait_s, 1.0))
                async with pool.connection() as conn:
                    await _set_up(conn, self.schema)
            except psycopg.Error as exc:
                await pool.close()
                raise translate(exc, "rate window setup") from None
            except BaseException:
                await pool.close()
                raise
            self._pool = pool
            return pool

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()


async def _set_up(conn: psycopg.AsyncConnection[Any], schema: str) -> None:
    """The tables and the function, once per schema version, under an advisory lock."""
    name = sql.Identifier(schema)
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (setup_lock_key(schema),))
        cursor = await conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
        if await cursor.fetchone() is None:  # the provider's migration creates it first
            await conn.execute(sql.SQL("CREATE SCHEMA {}").format(name))
        for statement in _TABLES:
            await conn.execute(sql.SQL(statement).format(schema=name))
        cursor = await conn.execute(
            "SELECT 1 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
            " WHERE n.nspname = %s AND p.proname = 'rate_admit_v1'", (schema,))
        if await cursor.fetchone() is None:
            await conn.execute(sql.SQL(_FUNCTION).format(schema=name))
