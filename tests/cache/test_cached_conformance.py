"""The provider conformance suite over the cached native provider: with each store over
the in-memory backend, and over SQLite (where retrieval snapshots, the event outbox and
the indexing outbox live, and which reopens for the durability tests).

The cache is a provider in its own right and answers to the same contract: a cached
search may never show a record that was since written, deleted or expired. The Redis
variant gives every provider the suite builds (one per test and per hypothesis
example) its own key prefix, removed by the suite's cleanup hook.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from cache_support import REDIS_URL, require_redis, unique_prefix
from governed_memory.cache import CachedMemoryProvider, InMemoryCacheStore
from governed_memory.clock import Clock
from governed_memory.provider import MemoryProvider
from governed_memory_conformance import ConformanceSettings, ProviderConformance
from governed_memory_native import build_native_provider


class TestCachedNativeWithMemoryStore(ProviderConformance):
    provider_name = "native+cache(memory)"

    async def make_provider(self, clock: Clock) -> MemoryProvider:
        inner = build_native_provider({"backend": "memory"}, clock)
        provider = CachedMemoryProvider(inner, InMemoryCacheStore(), clock=clock)
        await provider.start()
        return provider


class TestCachedNativeSqliteWithMemoryStore(ProviderConformance):
    """Every property example opens a database file; the in-memory variant above runs the
    properties at full size, so this one runs fewer examples by default."""

    provider_name = "native(sqlite)+cache(memory)"
    conformance_settings = ConformanceSettings(isolation_examples=10, machine_examples=10)
    _path: Path | None = None

    async def make_provider(self, clock: Clock) -> MemoryProvider:
        self._path = self.fresh_directory() / "memory.db"
        return await self.reopen_provider(clock)

    async def reopen_provider(self, clock: Clock) -> MemoryProvider:
        """A new process would start with an empty cache over the same database."""
        assert self._path is not None
        inner = build_native_provider({"backend": "sqlite", "path": str(self._path)}, clock)
        provider = CachedMemoryProvider(inner, InMemoryCacheStore(), clock=clock)
        await provider.start()
        return provider


class TestCachedNativeWithRedisStore(ProviderConformance):
    provider_name = "native+cache(redis)"

    @pytest.fixture(autouse=True)
    def _needs_redis(self) -> None:
        require_redis()

    async def make_provider(self, clock: Clock) -> MemoryProvider:
        from governed_memory_redis import RedisCacheStore, RedisStoreConfig

        store = RedisCacheStore(RedisStoreConfig(url=REDIS_URL,
                                                 key_prefix=unique_prefix("conformance")))
        inner = build_native_provider({"backend": "memory"}, clock)
        provider = CachedMemoryProvider(inner, store, clock=clock)
        await provider.start()
        return provider

    async def cleanup_provider(self, provider: MemoryProvider) -> None:
        """The suite's cleanup hook: drop this instance's key prefix."""
        from governed_memory_redis import RedisCacheStore

        assert isinstance(provider, CachedMemoryProvider)
        store = provider.store
        assert isinstance(store, RedisCacheStore)
        keys = [key async for key in store.client.scan_iter(
            match=store.config.key_prefix + "*", count=1000)]
        if keys:
            await store.client.delete(*keys)
