"""Registers the Redis search-cache store, working-state store and rate store, the same
way a third-party plugin would.

``redis`` is an optional dependency: the store is registered either way, and building
it without the package installed names the extra to install.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from governed_memory import hookimpl
from governed_memory.errors import MemoryConfigurationError


def _build(config: Mapping[str, Any]) -> Any:
    try:
        from governed_memory_redis.store import build_redis_store
    except ImportError:
        raise MemoryConfigurationError(
            "cache store 'redis' needs the redis package: pip install 'governed-memory[redis]'"
        ) from None
    return build_redis_store(config)


@hookimpl
def register_cache_stores(register: Callable[..., None]) -> None:
    register("redis", _build, description="Shared search cache on Redis (TTL, size bound)")


def _build_working_state(config: Mapping[str, Any], clock: Any) -> Any:
    try:
        from governed_memory_redis.working_state import build_redis_working_state_store
    except ImportError:
        raise MemoryConfigurationError(
            "working-state store 'redis' needs the redis package: "
            "pip install 'governed-memory[redis]'"
        ) from None
    return build_redis_working_state_store(config, clock)


@hookimpl
def register_working_state_stores(register: Callable[..., None]) -> None:
    register("redis", _build_working_state,
             description="Per-run working state on Redis (TTL, merge under WATCH)")


def _build_rates(config: Mapping[str, Any]) -> Any:
    try:
        from governed_memory_redis.rates import build_redis_rate_windows
    except ImportError:
        raise MemoryConfigurationError(
            "rate store 'redis' needs the redis package: pip install 'governed-memory[redis]'"
        ) from None
    return build_redis_rate_windows(config)


@hookimpl
def register_rate_stores(register: Callable[..., None]) -> None:
    register("redis", _build_rates,
             description="Write-rate windows on Redis, shared by every process and node "
                         "(one Lua script per admit)")
