"""Fixtures for the per-turn context tests: a governed manager over a native in-memory
provider that can be made to fail, in-memory turns, and the tiers facade."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from context_support import FlakyProvider
from governed_memory import GovernedMemoryManager
from governed_memory.clock import ManualClock
from governed_memory.events import InMemoryEventSink
from governed_memory.tiers import InMemoryTurnStore, MemoryTiers
from manager_fixtures import clock, sink

__all__ = ["clock", "flaky", "manager", "sink", "tiers"]


@pytest.fixture
async def flaky(clock: ManualClock) -> AsyncIterator[FlakyProvider]:
    from governed_memory_native import build_native_provider

    provider = FlakyProvider(build_native_provider({"backend": "memory"}, clock))
    yield provider


@pytest.fixture
async def manager(flaky: FlakyProvider, clock: ManualClock,
                  sink: InMemoryEventSink) -> AsyncIterator[GovernedMemoryManager]:
    async with GovernedMemoryManager(flaky, clock=clock, sinks=[sink]) as m:  # type: ignore[arg-type]
        yield m


@pytest.fixture
async def tiers(manager: GovernedMemoryManager) -> AsyncIterator[MemoryTiers]:
    memory = MemoryTiers(long_term=manager, turns=InMemoryTurnStore())
    await memory.start()
    yield memory
