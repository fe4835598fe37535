"""The conformance suite over the native provider's backends."""

from __future__ import annotations

from collections.abc import Iterator

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

    async def make_provider(self, clock: Clock) -> MemoryProvider:
        path = self.fresh_directory() / "memory.db"
        provider = build_native_provider({"backend": "sqlite", "path": str(path)}, clock)
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

    async def make_provider(self, clock: Clock) -> MemoryProvider:
        config = postgres_config(self.fresh_directory())
        provider = build_native_provider(config, clock)
        await provider.start()
        return provider
