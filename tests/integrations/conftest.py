"""The LangGraph and LangChain integration over the real native provider.

Principals of one tenant (two users, an admin bound to no user) and of another; the
async manager and the sync facade over the in-memory backend with a manual clock and a
captured event trail; the stores over each.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from governed_memory import GovernedMemoryManager
from governed_memory.clock import ManualClock
from governed_memory.events import InMemoryEventSink
from governed_memory.sync import SyncMemoryManager
from governed_memory_langgraph import GovernedStore
from langgraph_support import native_manager
from manager_fixtures import clock, sink

__all__ = ["clock", "sink"]  # the shared fixtures, re-exported for pytest


@pytest.fixture
async def manager(clock: ManualClock,
                  sink: InMemoryEventSink) -> AsyncIterator[GovernedMemoryManager]:
    async with native_manager(clock, sink) as m:
        yield m


@pytest.fixture
def sync_manager(clock: ManualClock, sink: InMemoryEventSink) -> Iterator[SyncMemoryManager]:
    with SyncMemoryManager(native_manager(clock, sink)) as m:
        yield m


@pytest.fixture
def store(manager: GovernedMemoryManager) -> GovernedStore:
    return GovernedStore(manager)


@pytest.fixture
def sync_store(sync_manager: SyncMemoryManager) -> GovernedStore:
    return GovernedStore(sync_manager)
