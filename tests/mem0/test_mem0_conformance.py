"""The conformance suite over the Mem0 provider: in-process mem0ai and the Platform
client against the local wire server. Every skip names a capability the provider does
not declare (lexical_search, review, dedup), or is a thorough run not requested."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from governed_memory.clock import Clock
from governed_memory.provider import MemoryProvider
from governed_memory_conformance import ConformanceSettings, ProviderConformance
from governed_memory_mem0 import build_mem0_provider
from mem0_support import local_config, platform_config, wire_server

# Every provider is a fresh mem0 store (~0.1 s to build, and faiss rewrites its files on
# every write); keep the generated workload modest by default. The thorough variants run
# under -m slow, with 2,000 examples each (about an hour per client on one core).
SETTINGS = ConformanceSettings(isolation_examples=10, machine_examples=10, machine_steps=25,
                               concurrent_writers=10, thorough_examples=2_000)


class TestMem0Local(ProviderConformance):
    provider_name = "mem0"
    conformance_settings = SETTINGS
    _directory: Path | None = None

    async def make_provider(self, clock: Clock) -> MemoryProvider:
        self._directory = self.fresh_directory()
        return await self.reopen_provider(clock)

    async def reopen_provider(self, clock: Clock) -> MemoryProvider:
        """The same faiss files, history database and ledger, opened again."""
        assert self._directory is not None
        provider = build_mem0_provider(local_config(self._directory), clock)
        await provider.start()
        return provider


class TestMem0Platform(ProviderConformance):
    provider_name = "mem0"
    conformance_settings = SETTINGS
    _directory: Path | None = None
    _server: Any = None

    async def make_provider(self, clock: Clock) -> MemoryProvider:
        self._server = wire_server()
        self._directory = self.fresh_directory()
        return await self.reopen_provider(clock)

    async def reopen_provider(self, clock: Clock) -> MemoryProvider:
        """The same Platform (the wire server keeps its memories) and the same ledger."""
        assert self._directory is not None
        provider = build_mem0_provider(platform_config(self._server, self._directory), clock)
        await provider.start()
        return provider
