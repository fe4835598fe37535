"""The smallest correct provider passes the whole suite; with review and usage added,
so does the suite's review and usage area."""

from __future__ import annotations

from example_provider import ExampleProvider
from governed_memory.clock import Clock
from governed_memory.provider import MemoryProvider
from governed_memory_conformance import ProviderConformance
from reviewing_provider import ReviewingExampleProvider


class TestExampleProvider(ProviderConformance):
    provider_name = "example"

    async def make_provider(self, clock: Clock) -> MemoryProvider:
        provider = ExampleProvider(clock)
        await provider.start()
        return provider


class TestReviewingExampleProvider(ProviderConformance):
    provider_name = "example-reviewing"

    async def make_provider(self, clock: Clock) -> MemoryProvider:
        provider = ReviewingExampleProvider(clock)
        await provider.start()
        return provider
