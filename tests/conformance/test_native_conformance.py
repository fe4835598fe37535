"""The conformance suite over the native provider's backends. The durable ones reopen
their storage (``reopen_provider``) for the durability tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from governed_memory.clock import Clock
from governed_memory.provider import MemoryProvider
from governed_memory_conformance import ConformanceSettings, ProviderConformance
from governed_memory_native import build_native_provider
from postgres_support import drop_schemas, postgres_config


class TestNativeMemory(ProviderConformance):
    provider_name = "native"

    async def make_provider(self, clock: Clock) -> MemoryProvider:
        provider = build_native_provider({"backend": "memory"}, clock)
        await provider.start()
        return provider


class TestNativeSqlite(ProviderConformance):
    provider_name = "native"
    _path: Path | None = None

    async def make_provider(self, clock: Clock) -> MemoryProvider:
        self._path = self.fresh_directory() / "memory.db"
        return await self._open(clock)

    async def reopen_provider(self, clock: Clock) -> MemoryProvider:
        return await self._open(clock)

    async def _open(self, clock: Clock) -> MemoryProvider:
        assert self._path is not None
        provider = build_native_provider({"backend": "sqlite", "path": str(self._path)}, clock)
        await provider.start()
        return provider


@pytest.fixture(scope="module", autouse=True)
def _drop_postgres_schemas() -> Iterator[None]:
    """Each PostgreSQL provider gets a private schema; drop them once the module is done."""
    yield
    drop_schemas()


class TestNativePostgres(ProviderConformance):
    """Skips when PostgreSQL is absent (fails under CI=true), like every service test.

    Every example of the two properties gets a fresh schema, which costs a migration
    (a dozen tables and indexes), so the default run uses fewer examples; the thorough
    ``slow`` variants keep their 10,000."""

    provider_name = "native"
    conformance_settings = ConformanceSettings(isolation_examples=10, machine_examples=10)
    _directory: Path | None = None

    async def make_provider(self, clock: Clock) -> MemoryProvider:
        self._directory = self.fresh_directory()  # names the schema
        return await self.reopen_provider(clock)

    async def reopen_provider(self, clock: Clock) -> MemoryProvider:
        assert self._directory is not None
        provider = build_native_provider(postgres_config(self._directory), clock)
        await provider.start()
        return provider
