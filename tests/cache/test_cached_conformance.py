"""The provider conformance suite over the cached native provider, once per store.

The cache is a provider in its own right and answers to the same contract: a cached
search may never show a record that was since written, deleted or expired. The Redis
variant gives every provider the suite builds (one per test and per hypothesis
example) its own key prefix, deleted when the provider closes.
"""

from __future__ import annotations

import pytest
from cache_support import REDIS_URL, require_redis, unique_prefix
from governed_memory.cache import CachedMemoryProvider, InMemoryCacheStore
from governed_memory.clock import Clock
from governed_memory.provider import MemoryProvider
from governed_memory_conformance import ProviderConformance
from recording_native import build_recording_native


class TestCachedNativeWithMemoryStore(ProviderConformance):
    provider_name = "native+cache(memory)"

    async def make_provider(self, clock: Clock) -> MemoryProvider:
        inner = build_recording_native({"backend": "memory"}, clock)
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

        class ScratchStore(RedisCacheStore):
            async def close(self) -> None:
                keys = [key async for key in self.client.scan_iter(
                    match=self.config.key_prefix + "*", count=1000)]
                if keys:
                    await self.client.delete(*keys)
                await super().close()

        store = ScratchStore(RedisStoreConfig(url=REDIS_URL,
                                              key_prefix=unique_prefix("conformance")))
        inner = build_recording_native({"backend": "memory"}, clock)
        provider = CachedMemoryProvider(inner, store, clock=clock)
        await provider.start()
        return provider
