"""``RedisWorkingStateStore``: per-run scratch state on Redis, shared by every worker.

One key per run scope, ``{key_prefix}{scope hash}``, holding the state as JSON
(state, updated_at, expires_at, revision) with a Redis TTL equal to the requested one,
so an abandoned run's state disappears on its own. An update is a read-merge-write
under ``WATCH``: if another worker changed the run's state in between, the transaction
is discarded and retried on the new state, so concurrent updates never lose each
other's keys. Redis errors become ``MemoryUnavailableError`` (the message names no key
or value).

Config: ``url`` (else ``GOVERNED_MEMORY_REDIS_URL``, else the local server),
``key_prefix`` (default ``gm:ws:``), ``socket_timeout_s``, ``connect_timeout_s``
(default 1.0), ``max_connections`` (32), ``max_retries`` (update retries under
contention, default 64).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
from collections.abc import Mapping
from typing import Any

import redis.asyncio as redis_asyncio
from governed_memory.canonical import canonical_json
from governed_memory.clock import Clock
from governed_memory.errors import (
    MemoryConfigurationError,
    MemoryStorageError,
    MemoryUnavailableError,
)
from governed_memory.records import json_copy
from governed_memory.scope import Scope
from governed_memory.tiers.results import WorkingState
from governed_memory.tiers.working import merged
from redis.exceptions import RedisError, WatchError

URL_ENV = "GOVERNED_MEMORY_REDIS_URL"
DEFAULT_URL = "redis://127.0.0.1:6379/0"
_KEYS = frozenset({"url", "key_prefix", "socket_timeout_s", "connect_timeout_s",
                   "max_connections", "max_retries"})


class RedisWorkingStateStore:
    name = "redis"
    durable = False
    """Redis persistence is the operator's choice; working state is scratch anyway."""
    revision = "1"

    def __init__(self, url: str = DEFAULT_URL, *, key_prefix: str = "gm:ws:",
                 socket_timeout_s: float = 1.0, connect_timeout_s: float = 1.0,
                 max_connections: int = 32, max_retries: int = 64) -> None:
        self.key_prefix = key_prefix
        self._max_retries = max_retries
        self._client = redis_asyncio.Redis.from_url(
            url, socket_timeout=socket_timeout_s, socket_connect_timeout=connect_timeout_s,
            max_connections=max_connections)

    def _key(self, scope: Scope) -> str:
        return self.key_prefix + scope.scope_hash

    async def start(self) -> None:
        try:
            await self._client.ping()
        except RedisError:
            raise MemoryUnavailableError("working-state store: redis is unreachable") from None

    async def close(self) -> None:
        await self._client.aclose()

    async def read(self, scope: Scope, now: float) -> WorkingState | None:
        try:
            raw = await self._client.get(self._key(scope))
        except RedisError:
            raise MemoryUnavailableError("working-state store: redis read failed") from None
        return _live(raw, scope, now)

    async def update(self, scope: Scope, changes: Mapping[str, Any], *, ttl_s: float,
                     replace: bool, now: float) -> WorkingState:
        key = self._key(scope)
        try:
            async with self._client.pipeline(transaction=True) as pipe:
                for attempt in range(self._max_retries):
                    try:
                        await pipe.watch(key)
                        current = _live(await pipe.get(key), scope, now)
                        state = merged(current, changes, replace=replace, ttl_s=ttl_s,
                                       now=now, scope=scope)
                        pipe.multi()  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
                        pipe.set(key, _encode(state), px=max(1, math.ceil(ttl_s * 1000)))
                        await pipe.execute()
                        return state
                    except WatchError:
                        # Another worker moved this run's state: retry on the new one,
                        # after a short random pause so contenders spread out.
                        await asyncio.sleep(random.uniform(0, 0.002 * (attempt + 1)))
                        continue
                    finally:
                        await pipe.reset()  # type: ignore[no-untyped-call]
        except RedisError:
            raise MemoryUnavailableError("working-state store: redis update failed") from None
        raise MemoryUnavailableError("working-state store: too much contention on one run; "
                                     "retry later")

    async def clear(self, scope: Scope) -> bool:
        try:
            return bool(await self._client.delete(self._key(scope)))
        except RedisError:
            raise MemoryUnavailableError("working-state store: redis delete failed") from None


def _encode(state: WorkingState) -> str:
    return canonical_json({"scope_hash": state.scope_hash, "state": json_copy(state.state),
                           "updated_at": state.updated_at, "expires_at": state.expires_at,
                           "revision": state.revision})


def _live(raw: bytes | str | None, scope: Scope, now: float) -> WorkingState | None:
    if raw is None:
        return None
    try:
        body = json.loads(raw)
        state = WorkingState(body["scope_hash"], body["state"], float(body["updated_at"]),
                             float(body["expires_at"]), int(body["revision"]))
    except (ValueError, KeyError, TypeError):
        raise MemoryStorageError("working-state store: a stored state is unreadable") from None
    if state.scope_hash != scope.scope_hash:
        raise MemoryStorageError("working-state store: a stored state names another scope")
    return None if state.expires_at <= now else state


def build_redis_working_state_store(config: Mapping[str, Any],
                                    clock: Clock) -> RedisWorkingStateStore:
    unknown = sorted(str(k) for k in config if k not in _KEYS)
    if unknown:
        raise MemoryConfigurationError(
            f"working-state store 'redis': unknown key(s) {', '.join(unknown)}")
    url = config.get("url", os.environ.get(URL_ENV) or DEFAULT_URL)
    prefix = config.get("key_prefix", "gm:ws:")
    for name, value in (("url", url), ("key_prefix", prefix)):
        if not isinstance(value, str) or not value.strip():
            raise MemoryConfigurationError(f"{name}: must be a non-empty string")
    kwargs: dict[str, Any] = {}
    for name in ("socket_timeout_s", "connect_timeout_s"):
        if name in config:
            value = config[name]
            if (isinstance(value, bool) or not isinstance(value, int | float)
                    or not math.isfinite(value) or not 0 < value <= 60):
                raise MemoryConfigurationError(f"{name}: seconds in (0, 60]")
            kwargs[name] = float(value)
    for name, high in (("max_connections", 10_000), ("max_retries", 1000)):
        if name in config:
            value = config[name]
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= high:
                raise MemoryConfigurationError(f"{name}: an integer from 1 to {high}")
            kwargs[name] = value
    return RedisWorkingStateStore(url, key_prefix=prefix, **kwargs)
