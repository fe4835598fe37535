"""API keys in PostgreSQL: one set of keys, and every revocation, for every worker
process and every node.

Where: a schema of the key store's own (default ``governed_memory_keys``), one table
``api_keys`` with the SQLite store's columns; never the memory provider's schema, so a
memory export, backup or erasure never carries or touches a credential, and the
database's roles can keep who reads memories apart from who reads key hashes. The
schema and table are created on first use (``open``) under an advisory lock, so
several workers starting together never race on ``CREATE``; ``keys list`` and
``keys revoke`` ask :meth:`PostgresApiKeyStore.exists` first and create nothing.

How fast a revocation is seen. Each process keeps what one lookup read about a key
(its bindings, the digest of its secret, whether it is revoked) for at most
``cache_ttl_s`` (default 0.5 s, at most 1 s: the promise is that every node sees a
revocation within a second), counted from *before* the read was sent, so no answer
older than that is ever used; a lookup still in flight is joined only while it is that
young. So a request costs one point read of the primary key at most, and none while
its key was read less than ``cache_ttl_s`` ago; concurrent requests with one key share
one read. Nothing else is needed for the bound, which is why there is no LISTEN/NOTIFY:
a notification lost while a connection was down would break a bound that relied on it,
and the time-to-live alone keeps it. Unknown key ids are never cached (each is a point
read, as in the SQLite store), so made-up ids cannot push real keys out of the bounded
cache (``cache_size`` entries, least recently used first out).

Failures are typed and say nothing private: a database that cannot be reached is
``MemoryUnavailableError`` (HTTP 503 with ``Retry-After``, never 401 or 500), and no
message carries the DSN. psycopg (the ``postgres`` extra) is imported here only.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from typing import Any, Final

import attrs
from governed_memory.errors import (
    MemoryConfigurationError,
    MemoryNotFoundError,
    MemoryStorageError,
    MemoryUnavailableError,
)

from governed_memory_service.api_keys import (
    KEY_COLUMNS,
    ApiKey,
    KeyStoreBase,
    StoredKey,
    key_from_row,
    permissions_text,
)

__all__ = ["DEFAULT_CACHE_TTL_S", "DEFAULT_KEY_SCHEMA", "MAX_CACHE_TTL_S", "KeyLookupStats",
           "PostgresApiKeyStore", "check_schema_name"]

log = logging.getLogger(__name__)

DEFAULT_KEY_SCHEMA: Final = "governed_memory_keys"
DEFAULT_CACHE_TTL_S: Final = 0.5
MAX_CACHE_TTL_S: Final = 1.0
"""A revocation is seen by every process within this long: no cache may hold longer."""
DEFAULT_CACHE_SIZE: Final = 10_000
DEFAULT_TIMEOUT_S: Final = 5.0
POSTGRES_EXTRA_HINT: Final = "pip install 'governed-memory[postgres]'"


def check_schema_name(schema: str) -> str:
    """``schema`` when it is a plain lower-case PostgreSQL identifier (the rule the
    native provider's ``schema`` follows), else a configuration error naming it."""
    ok = (0 < len(schema) <= 63 and (schema[0].isalpha() or schema[0] == "_")
          and all(c.isdigit() or c == "_" or ("a" <= c <= "z") for c in schema)
          and schema.isascii() and not schema.startswith("pg_"))
    if not ok:
        raise MemoryConfigurationError(
            f"keys schema {schema!r}: must be a lower-case PostgreSQL identifier (letters, "
            "digits and _, at most 63 characters, not starting with a digit or pg_)")
    return schema


@attrs.define
class KeyLookupStats:
    """Counters for benchmarks and tests: how many verifications asked for a key, how
    many the cache answered, and how many point reads reached PostgreSQL."""

    lookups: int = 0
    cache_hits: int = 0
    reads: int = 0


@attrs.frozen
class _Entry:
    read_at: float
    """The clock when the read that produced ``stored`` was sent."""
    stored: StoredKey


class PostgresApiKeyStore(KeyStoreBase):
    """Create, list, revoke and verify API keys in a PostgreSQL schema of their own.

    ``dsn`` is a libpq connection string or URI (it may hold a password: it is never
    put in a message or a ``repr``); ``clock`` is monotonic seconds (tests move it).
    """

    def __init__(self, dsn: str, *, schema: str = DEFAULT_KEY_SCHEMA,
                 cache_ttl_s: float = DEFAULT_CACHE_TTL_S,
                 cache_size: int = DEFAULT_CACHE_SIZE, pool_max_size: int = 4,
                 timeout_s: float = DEFAULT_TIMEOUT_S, description: str | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not 0 <= cache_ttl_s <= MAX_CACHE_TTL_S:
            raise MemoryConfigurationError(
                f"cache_ttl_s: {cache_ttl_s} is outside 0 to {MAX_CACHE_TTL_S} s (every "
                "process must see a revocation within a second)")
        if cache_size < 1 or pool_max_size < 1 or timeout_s <= 0:
            raise MemoryConfigurationError("cache_size, pool_max_size and timeout_s must "
                                           "be positive")
        try:
            import psycopg  # noqa: F401
            import psycopg_pool  # noqa: F401
        except ImportError:
            raise MemoryConfigurationError(
                f"a PostgreSQL key store needs psycopg: {POSTGRES_EXTRA_HINT}") from None
        self._dsn = dsn
        self.schema = check_schema_name(schema)
        self.description = description or f"the PostgreSQL key store (schema {schema})"
        self.cache_ttl_s = cache_ttl_s
        self._cache_size = cache_size
        self._pool_max_size = pool_max_size
        self._timeout_s = timeout_s
        self._clock = clock
        self._pool: Any = None
        self._opening: asyncio.Lock | None = None
        self._cache: OrderedDict[str, _Entry] = OrderedDict()
        self._pending: dict[str, tuple[float, asyncio.Task[StoredKey | None]]] = {}
        self._revoked_here: dict[str, float] = {}
        """Keys this store revoked, by when: a read sent before then is never cached."""
        self.stats = KeyLookupStats()
        self._sql = _Statements(schema)

    def __repr__(self) -> str:
        return f"PostgresApiKeyStore(schema={self.schema!r})"

    # -- lifecycle ----------------------------------------------------------------------

    async def open(self) -> None:
        """Connect and create the schema and table when they are missing."""
        await self._connect()
        async with self._connection("create the key store") as conn, conn.transaction():
            # Workers that start together serialise here instead of racing on CREATE.
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._sql.lock_key,))
            await conn.execute(self._sql.create_schema)
            await conn.execute(self._sql.create_table)
            await conn.execute(self._sql.create_index)

    async def _connect(self) -> None:
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._pool is not None:
                return
            import psycopg
            from psycopg_pool import AsyncConnectionPool

            pool = AsyncConnectionPool(
                self._dsn, min_size=1, max_size=self._pool_max_size, open=False,
                timeout=self._timeout_s, name=f"governed-memory/{self.schema}",
                kwargs={"autocommit": True, "application_name":
                        f"governed-memory/{self.schema}",
                        "connect_timeout": max(1, round(self._timeout_s))},
                connection_class=psycopg.AsyncConnection)
            try:
                with _translated("connect to the key store"):
                    await pool.open(wait=True, timeout=self._timeout_s)
            except BaseException:
                await pool.close()
                raise
            self._pool = pool

    async def close(self) -> None:
        for _, task in self._pending.values():
            task.cancel()
        self._pending.clear()
        self._cache.clear()
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    @contextlib.asynccontextmanager
    async def _connection(self, action: str) -> AsyncIterator[Any]:
        await self._connect()
        with _translated(action):
            async with asyncio.timeout(self._timeout_s):
                async with self._pool.connection(timeout=self._timeout_s) as conn:
                    yield conn

    async def exists(self) -> bool:
        async with self._connection("look for the key store") as conn:
            row = await (await conn.execute("SELECT to_regclass(%s) IS NOT NULL",
                                            (self._sql.qualified_table,))).fetchone()
        return bool(row and row[0])

    async def check(self) -> None:
        async with self._connection("check the key store") as conn:
            await conn.execute(self._sql.probe)

    # -- administration -----------------------------------------------------------------

    async def _insert(self, key: ApiKey, digest: str) -> None:
        async with self._connection("create a key") as conn:
            await conn.execute(self._sql.insert, (
                key.key_id, digest, key.principal_id, key.kind.value, key.tenant_id,
                key.user_id, permissions_text(key.permissions), key.label, key.created_at))

    async def list(self, *, tenant_id: str | None = None,
                   include_revoked: bool = True) -> tuple[ApiKey, ...]:
        async with self._connection("list keys") as conn:
            rows = await (await conn.execute(self._sql.select_all, {
                "tenant": tenant_id, "all": include_revoked})).fetchall()
        return tuple(key_from_row(tuple(row)) for row in rows)

    async def revoke(self, key_id: str) -> bool:
        """Revoke a key; every process that checks keys here refuses it within
        ``cache_ttl_s`` (at most 1 s). ``False`` if no active key has that id."""
        async with self._connection("revoke a key") as conn:
            cursor = await conn.execute(self._sql.revoke, (time.time(), key_id))
            revoked = bool(cursor.rowcount == 1)
        # This process sees it at once: its entry goes, a read sent before now is
        # neither joined nor cached.
        now = self._clock()
        self._cache.pop(key_id, None)
        self._pending.pop(key_id, None)
        self._revoked_here = {k: t for k, t in self._revoked_here.items()
                              if now - t < MAX_CACHE_TTL_S}
        self._revoked_here[key_id] = now
        if revoked:
            log.info("api key %s revoked", key_id)
        return revoked

    # -- verification -------------------------------------------------------------------

    async def _lookup(self, key_id: str) -> StoredKey | None:
        self.stats.lookups += 1
        now = self._clock()
        entry = self._cache.get(key_id)
        if entry is not None and now - entry.read_at < self.cache_ttl_s:
            self._cache.move_to_end(key_id)
            self.stats.cache_hits += 1
            return entry.stored
        pending = self._pending.get(key_id)
        if pending is None or now - pending[0] >= self.cache_ttl_s:
            task = asyncio.get_running_loop().create_task(self._read(key_id, now))
            pending = (now, task)
            self._pending[key_id] = pending
            task.add_done_callback(lambda done: self._forget(key_id, done))
        # Shielded: a caller that gives up does not cancel the read others wait for.
        return await asyncio.shield(pending[1])

    def _forget(self, key_id: str, task: asyncio.Task[StoredKey | None]) -> None:
        current = self._pending.get(key_id)
        if current is not None and current[1] is task:
            del self._pending[key_id]
        if not task.cancelled():
            task.exception()  # retrieved: a failure is the waiters' to raise, not the loop's

    async def _read(self, key_id: str, sent_at: float) -> StoredKey | None:
        async with self._connection("check a key") as conn:
            row = await (await conn.execute(self._sql.select_one, (key_id,))).fetchone()
        self.stats.reads += 1
        if row is None:
            self._cache.pop(key_id, None)
            return None
        stored = StoredKey(key=key_from_row(tuple(row[:9])), digest=str(row[9]))
        if self.cache_ttl_s > 0 and sent_at >= self._revoked_here.get(key_id, sent_at):
            self._cache[key_id] = _Entry(read_at=sent_at, stored=stored)
            self._cache.move_to_end(key_id)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return stored


class _Statements:
    """The store's SQL for one schema, composed once (identifiers quoted by psycopg)."""

    def __init__(self, schema: str) -> None:
        from psycopg import sql

        table = sql.Identifier(schema, "api_keys")
        self.lock_key = _lock_key(schema)
        self.qualified_table = f'"{schema}".api_keys'
        self.create_schema = sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
            sql.Identifier(schema))
        self.create_table = sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (key_id text PRIMARY KEY,"
            " secret_sha256 text NOT NULL, principal_id text NOT NULL, kind text NOT NULL,"
            " tenant_id text NOT NULL, user_id text, permissions text NOT NULL, label text,"
            " created_at double precision NOT NULL, revoked_at double precision)"
        ).format(table)
        self.create_index = sql.SQL(
            "CREATE INDEX IF NOT EXISTS api_keys_by_tenant ON {} (tenant_id, created_at)"
        ).format(table)
        self.probe = sql.SQL("SELECT 1 FROM {} LIMIT 1").format(table)
        self.insert = sql.SQL(
            "INSERT INTO {} (key_id, secret_sha256, principal_id, kind, tenant_id, user_id,"
            " permissions, label, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"
        ).format(table)
        columns = sql.SQL(KEY_COLUMNS)
        self.select_all = sql.SQL(
            "SELECT {} FROM {} WHERE (%(tenant)s::text IS NULL OR tenant_id = %(tenant)s)"
            " AND (%(all)s OR revoked_at IS NULL) ORDER BY created_at, key_id"
        ).format(columns, table)
        self.select_one = sql.SQL("SELECT {}, secret_sha256 FROM {} WHERE key_id = %s"
                                  ).format(columns, table)
        self.revoke = sql.SQL(
            "UPDATE {} SET revoked_at = %s WHERE key_id = %s AND revoked_at IS NULL"
        ).format(table)


def _lock_key(schema: str) -> int:
    """The advisory lock key that serialises creating ``schema``'s table, as a bigint."""
    digest = hashlib.sha256(b"governed-memory/keys/" + schema.encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


@contextlib.contextmanager
def _translated(action: str) -> Any:
    """psycopg's failures as the library's errors, with nothing of the server's message
    (it can quote host names and SQL): unreachable or timed out is ``unavailable``, a
    missing table is ``not_found``, anything else a storage error."""
    import psycopg
    from psycopg import errors as pg_errors
    from psycopg_pool import PoolTimeout

    try:
        yield
    except TimeoutError:
        raise MemoryUnavailableError(f"{action}: PostgreSQL did not answer in time"
                                     ) from None
    except PoolTimeout:
        raise MemoryUnavailableError(f"{action}: no connection to PostgreSQL in time"
                                     ) from None
    except pg_errors.UndefinedTable:
        raise MemoryNotFoundError(f"{action}: there is no key store in this schema "
                                  "(`governed-memory keys create` makes one)") from None
    except (pg_errors.InvalidPassword, pg_errors.InvalidAuthorizationSpecification,
            pg_errors.InvalidCatalogName):
        raise MemoryConfigurationError(f"{action}: PostgreSQL refused the connection "
                                       "(check the role, password and database)") from None
    except pg_errors.InsufficientPrivilege:
        raise MemoryConfigurationError(f"{action}: the PostgreSQL role lacks a privilege"
                                       ) from None
    except (psycopg.OperationalError, psycopg.InterfaceError):
        log.debug("key store: %s failed", action, exc_info=True)
        raise MemoryUnavailableError(f"{action}: PostgreSQL is unreachable") from None
    except psycopg.Error as exc:
        log.debug("key store: %s failed", action, exc_info=True)
        raise MemoryStorageError(f"{action} failed ({type(exc).__name__})") from None
