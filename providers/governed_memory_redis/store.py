"""``RedisCacheStore``: the shared search-cache store on Redis (``redis.asyncio``).

Revisions are plain counters raised with ``INCR``; each step a lookup, fill or bump
needs to be atomic is one Lua script. Keys look like::

    {prefix}{<tenant tag>}:r:<scope hash | epoch>    revision counter (never expires)
    {prefix}{<tenant tag>}:x:<scope hash>            expiry marks (sorted set, expires)
    {prefix}{<tenant tag>}:e:<digest>:<revisions>    cached entry (TTL)
    {prefix}{<tenant tag>}:i                         the tenant's entries (sorted set by
                                                     the instant each entry's TTL ends)

The index is what lets ``delete_user`` remove every cached answer of a tenant at once
(:meth:`RedisCacheStore.erase_tenant`) in bounded batches, without ``KEYS`` or a scan:
each fill adds its entry to it in the same script, and trims members whose entries have
expired, so it stays as large as the tenant's live entries.

No key holds query text or content; entry values hold the cached search result (with
record content), bounded by ``max_value_bytes`` and ``max_ttl_s``. Revision counters
never expire: one small key per scope ever written is the price of revisions that
never go back (an expiring counter could restart at a value an old entry still uses).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any

import redis.asyncio as redis_asyncio
from governed_memory.cache.store import (
    MARK_GRACE_S,
    CacheStoreError,
    CacheStoreTimeout,
    CacheStoreUnavailable,
    CacheValueTooLarge,
    Lookup,
    entry_suffix,
)
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

import governed_memory_redis.scripts as scripts
from governed_memory_redis.config import RedisStoreConfig, parse_redis_config

ERASE_BATCH = 256
"""Entries one erasure script removes; a tenant's erasure runs as many as it needs, so
no single script holds the server long."""
MAX_ERASE_ROUNDS = 100_000
"""A bound on rounds, against a tenant that fills faster than it is erased."""


class RedisCacheStore:
    name = "redis"
    shared = True
    """Every process of the deployment reads and erases the same entries."""

    def __init__(self, config: RedisStoreConfig | None = None, *,
                 client: redis_asyncio.Redis | None = None) -> None:
        """Builds the pool without connecting (the first command connects). Pass
        ``client`` to share one you own; it is then not closed by :meth:`close`."""
        self.config = config or RedisStoreConfig()
        self._owns_client = client is None
        if client is None:
            pool = redis_asyncio.ConnectionPool.from_url(
                self.config.url,
                max_connections=self.config.max_connections,
                socket_timeout=self.config.socket_timeout_s,
                socket_connect_timeout=self.config.connect_timeout_s,
                retry=Retry(NoBackoff(), self.config.retries),
            )
            client = redis_asyncio.Redis(connection_pool=pool)
        self._client = client
        self._lookup = client.register_script(scripts.LOOKUP)
        self._fill = client.register_script(scripts.FILL)
        self._bump = client.register_script(scripts.BUMP)
        self._erase = client.register_script(scripts.ERASE)

    @property
    def client(self) -> redis_asyncio.Redis:
        return self._client

    # -- keys -------------------------------------------------------------------------

    def _base(self, tenant: str) -> str:
        return f"{self.config.key_prefix}{{{tenant}}}:"

    def revision_key(self, tenant: str, name: str) -> str:
        return f"{self._base(tenant)}r:{name}"

    def marks_key(self, tenant: str, name: str) -> str:
        return f"{self._base(tenant)}x:{name}"

    def entry_key(self, tenant: str, digest: str, revisions: Sequence[int]) -> str:
        return f"{self._base(tenant)}e:{entry_suffix(digest, revisions)}"

    def index_key(self, tenant: str) -> str:
        return f"{self._base(tenant)}i"

    # -- the port -----------------------------------------------------------------------

    async def lookup(self, tenant: str, names: Sequence[str], digest: str,
                     now: float) -> Lookup:
        if not names:
            # Revisions checked by the caller (the provider's own, read from its
            # storage): the entry is one plain GET, a single key in one cluster slot.
            value = await self._command(self._client.get(self.entry_key(tenant, digest, ())))
            if not (value is None or isinstance(value, bytes)):
                raise CacheStoreError("malformed lookup reply")
            return Lookup((), None, value)
        keys = [*(self.revision_key(tenant, n) for n in names),
                *(self.marks_key(tenant, n) for n in names)]
        reply = await self._run(self._lookup, keys,
                                [len(names), f"{self._base(tenant)}e:{digest}:", repr(now)])
        try:
            raw_revisions, raw_horizon, value = reply
            revisions = tuple(int(item) for item in raw_revisions)
            horizon = None if raw_horizon is None else float(raw_horizon)
        except (TypeError, ValueError):
            raise CacheStoreError("malformed lookup reply") from None
        if len(revisions) != len(names) or not (value is None or isinstance(value, bytes)):
            raise CacheStoreError("malformed lookup reply")
        return Lookup(revisions, horizon, value)

    async def fill(self, tenant: str, names: Sequence[str], revisions: Sequence[int],
                   digest: str, value: bytes, ttl_s: float) -> bool:
        if len(value) > self.config.max_value_bytes:
            raise CacheValueTooLarge(
                f"{len(value)} bytes; the bound is {self.config.max_value_bytes}")
        ttl_ms = max(1, math.ceil(min(ttl_s, self.config.max_ttl_s) * 1000))
        keys = [*(self.revision_key(tenant, n) for n in names),
                self.entry_key(tenant, digest, revisions), self.index_key(tenant)]
        args: list[Any] = [len(names), *(str(r) for r in revisions), value, ttl_ms,
                           entry_suffix(digest, revisions)]
        return bool(await self._run(self._fill, keys, args))

    async def erase_tenant(self, tenant: str) -> int:
        """Remove every cached entry of one tenant (an erasure), a batch per script,
        through the tenant's index; returns how many entries were removed (entries
        that had already expired are not counted)."""
        removed = 0
        for _ in range(MAX_ERASE_ROUNDS):
            reply = await self._run(self._erase, [self.index_key(tenant)],
                                    [f"{self._base(tenant)}e:", ERASE_BATCH])
            try:
                batch, left = (int(item) for item in reply)
            except (TypeError, ValueError):
                raise CacheStoreError("malformed erase reply") from None
            removed += batch
            if left == 0:
                return removed
        raise CacheStoreError("the tenant's entries grew faster than they were erased")

    async def bump(self, tenant: str, names: Sequence[str], expiries: Sequence[float],
                   now: float) -> None:
        keys = [*(self.revision_key(tenant, n) for n in names),
                *(self.marks_key(tenant, n) for n in names)]
        await self._run(self._bump, keys,
                        [len(names), repr(now), repr(MARK_GRACE_S), *(repr(e) for e in expiries)])

    async def close(self) -> None:
        if self._owns_client:
            # ``aclose`` arrived in redis 5.0.1; 5.0.0 only has ``close``.
            closer = getattr(self._client, "aclose", None) or self._client.close
            await closer()

    async def ping(self) -> bool:
        """Whether the server answers; for health checks and tests."""
        try:
            return bool(await self._client.ping())
        except RedisError:
            return False

    async def _run(self, script: Any, keys: Sequence[str], args: Sequence[Any]) -> Any:
        return await self._command(script(keys=list(keys), args=list(args)))

    async def _command(self, call: Awaitable[Any]) -> Any:
        try:
            return await call
        except RedisTimeoutError as exc:
            raise CacheStoreTimeout(str(exc) or "redis timed out") from None
        except (RedisConnectionError, OSError) as exc:
            raise CacheStoreUnavailable(str(exc) or "redis unreachable") from None
        except RedisError as exc:
            raise CacheStoreError(type(exc).__name__) from None


def build_redis_store(config: Mapping[str, Any]) -> RedisCacheStore:
    """Profile config in, store out, no I/O: ``{"url": ..., "key_prefix": ...}``."""
    return RedisCacheStore(parse_redis_config(config))
