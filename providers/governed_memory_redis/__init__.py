"""Redis-backed stores for governed-memory: the shared search-cache store and the
shared write-rate windows.

The names are loaded lazily so that the plugin module (and so every ``PluginManager``)
imports without the optional ``redis`` package; only using the store needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from governed_memory_redis.config import RedisStoreConfig, parse_redis_config
    from governed_memory_redis.rates import RedisRateWindows, build_redis_rate_windows
    from governed_memory_redis.store import RedisCacheStore, build_redis_store

__all__ = ["RedisCacheStore", "RedisRateWindows", "RedisStoreConfig",
           "build_redis_rate_windows", "build_redis_store", "parse_redis_config"]

_HOMES = {
    "RedisStoreConfig": "governed_memory_redis.config",
    "parse_redis_config": "governed_memory_redis.config",
    "RedisCacheStore": "governed_memory_redis.store",
    "build_redis_store": "governed_memory_redis.store",
    "RedisRateWindows": "governed_memory_redis.rates",
    "build_redis_rate_windows": "governed_memory_redis.rates",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'governed_memory_redis' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(home), name)
