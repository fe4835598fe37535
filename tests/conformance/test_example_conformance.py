"""The smallest correct provider passes the whole suite."""

from __future__ import annotations

from example_provider import ExampleProvider
from governed_memory import Clock, MemoryProvider
from governed_memory_conformance import ProviderConformance


class TestExampleProvider(ProviderConformance):
    provider_name = "example"

    async def make_provider(self, clock: Clock) -> MemoryProvider:
        provider = ExampleProvider(clock)
        await provider.start()
        return provider
