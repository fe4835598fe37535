"""``RedisRateWindows``: write-rate windows on Redis, shared by every process and node.

A profile picks it with ``[quotas] rate_store = "redis"`` and configures it with
``[stores.rates]`` (``url``, else ``$GOVERNED_MEMORY_REDIS_URL``, else the local server;
``key_prefix``, default ``gm:rate:``; ``socket_timeout_s``; ``connect_timeout_s``;
``max_connections``; ``retries``; no other key).

Each window is a sorted set of its events scored by their time, under
``{prefix}{<tenant tag>}:<hash of the window's key>``: the tag (a hash of the tenant)
keeps a tenant's windows in one Redis Cluster slot, and no key holds a tenant id or a
scope hash in the clear. One Lua script does a whole admit atomically on the server:
it drops each window's expired events, refuses with the first window that is full, or
adds the event to every window and sets each set's expiry to its period, so an idle
window disappears on its own. One round trip per admit. A Redis error or timeout
raises, and the quotas policy denies the write: a window that cannot be checked never
lets a write through.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs
import redis.asyncio as redis_asyncio
from governed_memory.errors import (
    MemoryStorageError,
    MemoryUnavailableError,
)
from governed_memory.rates import RateLimit, check_limits, stored_key, tenant_tag
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from governed_memory_redis.config import DEFAULT_URL, read_config

DEFAULT_PREFIX: Final = "gm:rate:"

ADMIT: Final = """
-- KEYS[1..n]: the windows; ARGV[1]: now; ARGV[2]: the event's member;
-- ARGV[2i+1], ARGV[2i+2]: window i's limit and period in seconds
local now = tonumber(ARGV[1])
for i, key in ipairs(KEYS) do
  local limit = tonumber(ARGV[2 * i + 1])
  local period = tonumber(ARGV[2 * i + 2])
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - period)
  if redis.call('ZCARD', key) >= limit then
    return i
  end
end
for i, key in ipairs(KEYS) do
  local period = tonumber(ARGV[2 * i + 2])
  redis.call('ZADD', key, now, ARGV[2])
  redis.call('PEXPIRE', key, math.ceil(period * 1000))
end
return 0
"""


@attrs.frozen(slots=True)
class RedisRatesConfig:
    url: str = attrs.field(default=DEFAULT_URL, repr=False)
    """May hold a password: never in a repr or an error."""
    key_prefix: str = DEFAULT_PREFIX
    """Every key starts with it, so one Redis can hold several deployments."""
    socket_timeout_s: float = 1.0
    connect_timeout_s: float = 1.0
    max_connections: int = 32
    retries: int = 1
    """Retries of a command after a dropped connection; a retry of an admit that did run
    counts the event twice, which errs toward refusing, never toward admitting."""


_FLOATS: Final = {"socket_timeout_s": (0.001, 60.0), "connect_timeout_s": (0.001, 60.0)}
_INTS: Final = {"max_connections": (1, 10_000), "retries": (0, 5)}


def parse_rates_config(raw: Mapping[str, Any],
                       environ: Mapping[str, str] | None = None) -> RedisRatesConfig:
    """A profile's ``[stores.rates]`` table, checked strictly, without connecting."""
    return RedisRatesConfig(**read_config(raw, "rate store", _INTS, _FLOATS,
                                          default_prefix=DEFAULT_PREFIX, environ=environ))


class RedisRateWindows:
    """``governed_memory.rates.RateWindows`` on Redis (``redis.asyncio``)."""

    name = "redis"
    shared = True
    """Every process and node using the same Redis and prefix counts into the same
    windows."""

    def __init__(self, config: RedisRatesConfig | None = None) -> None:
        """Connects nothing: the client is built on the first admit (and again after
        :meth:`close`), so building the store from a profile does no I/O."""
        self.config = config or RedisRatesConfig()
        self._client: redis_asyncio.Redis | None = None
        self._script: Any = None
        self._member_prefix = secrets.token_hex(8) + ":"
        self._members = 0

    def window_key(self, limit: RateLimit) -> str:
        """Where ``limit``'s window is kept."""
        return f"{self.config.key_prefix}{{{tenant_tag(limit)}}}:{stored_key(limit.key)}"

    async def admit(self, limits: Sequence[RateLimit], now: float) -> RateLimit | None:
        check_limits(limits, now)
        if not limits:
            return None
        script = self._admit_script()
        self._members += 1
        # Unique per event: two events at the same instant are two members.
        args: list[Any] = [repr(float(now)), f"{self._member_prefix}{self._members}"]
        for limit in limits:
            args += [limit.limit, repr(float(limit.period_s))]
        try:
            reply = await script(keys=[self.window_key(limit) for limit in limits], args=args)
        except (RedisError, OSError) as exc:
            raise MemoryUnavailableError(
                f"redis rate store: {type(exc).__name__}; the write rate cannot be checked"
            ) from None
        if isinstance(reply, bool) or not isinstance(reply, int) or not 0 <= reply <= len(limits):
            raise MemoryStorageError("redis rate store: malformed answer")
        return None if reply == 0 else limits[reply - 1]

    def _admit_script(self) -> Any:
        if self._client is None:
            pool = redis_asyncio.ConnectionPool.from_url(
                self.config.url, max_connections=self.config.max_connections,
                socket_timeout=self.config.socket_timeout_s,
                socket_connect_timeout=self.config.connect_timeout_s,
                retry=Retry(NoBackoff(), self.config.retries))
            self._client = redis_asyncio.Redis(connection_pool=pool)
            self._script = self._client.register_script(ADMIT)
        return self._script

    async def close(self) -> None:
        client, self._client, self._script = self._client, None, None
        if client is not None:
            closer = getattr(client, "aclose", None) or client.close
            await closer()
            await client.connection_pool.disconnect()


def build_redis_rate_windows(config: Mapping[str, Any]) -> RedisRateWindows:
    """Profile config in (``[stores.rates]``), windows out, no I/O."""
    return RedisRateWindows(parse_rates_config(config))
