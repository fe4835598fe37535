"""Fixtures for the search-cache tests: a native provider on the in-memory backend
(which records a hit's snapshot, ``record_snapshot``), wrapped, with a counting event
sink; Redis stores under a unique, cleaned-up prefix."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from cache_support import REDIS_URL, CountingSink, delete_prefix, require_redis, unique_prefix
from governed_memory.cache import CachedMemoryProvider, InMemoryCacheStore
from governed_memory.clock import ManualClock
from governed_memory.events import EventBus
from governed_memory_native import NativeMemoryProvider, build_native_provider


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def sink() -> CountingSink:
    return CountingSink(keep=True)


@pytest.fixture
async def native(clock: ManualClock) -> AsyncIterator[NativeMemoryProvider]:
    provider = build_native_provider({"backend": "memory"}, clock)
    await provider.start()
    try:
        yield provider
    finally:
        await provider.close()


@pytest.fixture
def memory_store() -> InMemoryCacheStore:
    return InMemoryCacheStore()


@pytest.fixture
async def cached(native: NativeMemoryProvider, memory_store: InMemoryCacheStore,
                 sink: CountingSink, clock: ManualClock) -> AsyncIterator[CachedMemoryProvider]:
    """Started over an already started inner provider: only the retry task starts."""
    provider = CachedMemoryProvider(native, memory_store, events=EventBus([sink]), clock=clock,
                                    quarantine_retry_s=None)
    yield provider


@pytest.fixture
def redis_prefix() -> Iterator[str]:
    require_redis()
    prefix = unique_prefix()
    try:
        yield prefix
    finally:
        delete_prefix(prefix)


@pytest.fixture
def redis_url() -> str:
    require_redis()
    return REDIS_URL
