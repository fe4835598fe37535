"""The conformance suite over the search cache wrapping each native backend.

The cache is a provider in its own right, so it answers to the same contract: a
cached search may never show a record that was since deleted, updated or expired.
"""

from __future__ import annotations

from governed_memory.cache import CachedMemoryProvider, InMemoryCacheStore
from governed_memory.clock import Clock
from governed_memory.provider import MemoryProvider
from governed_memory_conformance import ProviderConformance
from governed_memory_native import build_native_provider


class TestCachedNativeMemory(ProviderConformance):
    provider_name = "native+search-cache"

    async def make_provider(self, clock: Clock) -> MemoryProvider:
        inner = build_native_provider({"backend": "memory"}, clock)
        provider = CachedMemoryProvider(inner, InMemoryCacheStore(), clock=clock)
        await provider.start()
        return provider


class TestCachedNativeSqlite(ProviderConformance):
    provider_name = "native+search-cache"

    async def make_provider(self, clock: Clock) -> MemoryProvider:
        path = self.fresh_directory() / "memory.db"
        inner = build_native_provider({"backend": "sqlite", "path": str(path)}, clock)
        provider = CachedMemoryProvider(inner, InMemoryCacheStore(), clock=clock)
        await provider.start()
        return provider
