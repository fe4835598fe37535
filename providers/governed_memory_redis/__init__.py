"""Redis-backed stores for governed-memory: the shared search-cache store."""

from governed_memory_redis.config import RedisStoreConfig, parse_redis_config
from governed_memory_redis.store import RedisCacheStore, build_redis_store

__all__ = ["RedisCacheStore", "RedisStoreConfig", "build_redis_store", "parse_redis_config"]
