"""The conformance suite over the native provider's two backends."""

from __future__ import annotations

from governed_memory.clock import Clock
from governed_memory.provider import MemoryProvider
from governed_memory_conformance import ProviderConformance
from governed_memory_native import build_native_provider


class TestNativeMemory(ProviderConformance):
    provider_name = "native"

    async def make_provider(self, clock: Clock) -> MemoryProvider:
        provider = build_native_provider({"backend": "memory"}, clock)
        await provider.start()
        return provider


class TestNativeSqlite(ProviderConformance):
    provider_name = "native"

    async def make_provider(self, clock: Clock) -> MemoryProvider:
        path = self.fresh_directory() / "memory.db"
        provider = build_native_provider({"backend": "sqlite", "path": str(path)}, clock)
        await provider.start()
        return provider
