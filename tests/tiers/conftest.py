"""Fixtures for the tier tests: a governed manager on the native in-memory backend, an
event sink, spans (from ``manager_fixtures``), and the tiers facade over in-memory turn
and working stores."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from governed_memory import GovernedMemoryManager
from governed_memory.tiers import InMemoryTurnStore, InMemoryWorkingStateStore, MemoryTiers
from manager_fixtures import clock, manager, sink, spans, tracer_provider

__all__ = ["clock", "manager", "sink", "spans", "tiers", "tracer_provider"]


@pytest.fixture
async def tiers(manager: GovernedMemoryManager) -> AsyncIterator[MemoryTiers]:
    memory = MemoryTiers(long_term=manager, turns=InMemoryTurnStore(),
                         working=InMemoryWorkingStateStore())
    await memory.start()
    yield memory
