"""The profile's ``[cache]`` section turns the search cache on and picks its store."""

from __future__ import annotations

import attrs
import pytest
from actors import ALICE, ALICE_SCOPE
from governed_memory import GovernedMemoryManager
from governed_memory.cache import CachedMemoryProvider
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryConfigurationError
from governed_memory.events import InMemoryEventSink
from governed_memory.plugins import PluginManager
from governed_memory.profiles import ProfileRegistry
from governed_memory.profiles.spec import CacheStore
from governed_memory_native import NativeMemoryProvider
from profile_support import installed

MEMORY = {"backend": "memory"}


@pytest.fixture(scope="module")
def plugins() -> PluginManager:
    return installed()


async def test_a_cached_profile_serves_repeat_searches_from_the_cache(
        plugins: PluginManager) -> None:
    spec = ProfileRegistry.from_plugins(plugins).get("chat-assistant@1.0.0")
    assert spec.cache.enabled and spec.cache.store is CacheStore.MEMORY
    sink = InMemoryEventSink()
    manager = GovernedMemoryManager.from_profile(spec, plugins=plugins, clock=ManualClock(),
                                                 sinks=[sink], provider_config_overrides=MEMORY)
    assert isinstance(manager._provider, CachedMemoryProvider)
    async with manager:
        await manager.add(ALICE, ALICE_SCOPE, "Alice drinks green tea")
        first = await manager.search(ALICE, ALICE_SCOPE, "green tea")
        second = await manager.search(ALICE, ALICE_SCOPE, "green tea")
        assert second == first
        outcomes = [e.type for e in sink.events if e.type.startswith("memory.cache.")]
        assert "memory.cache.fill" in outcomes and "memory.cache.hit" in outcomes
        # A write invalidates: the next search sees it at once.
        await manager.add(ALICE, ALICE_SCOPE, "Alice also likes green apples")
        third = await manager.search(ALICE, ALICE_SCOPE, "green")
        assert len(third.hits) == 2


async def test_an_uncached_profile_talks_to_the_provider(plugins: PluginManager) -> None:
    spec = ProfileRegistry.from_plugins(plugins).get("compliance-strict@1.0.0")
    assert not spec.cache.enabled
    manager = GovernedMemoryManager.from_profile(spec, plugins=plugins, clock=ManualClock(),
                                                 provider_config_overrides=MEMORY)
    assert isinstance(manager._provider, NativeMemoryProvider)


def test_the_redis_store_is_a_registered_plugin(plugins: PluginManager) -> None:
    assert plugins.cache_stores.get("redis").plugin == "redis"


def test_an_unregistered_store_is_a_configuration_error(plugins: PluginManager) -> None:
    from governed_memory.profiles.build import wrap_with_cache

    spec = ProfileRegistry.from_plugins(plugins).get("chat-assistant@1.0.0")
    redis_spec = attrs.evolve(spec, cache=attrs.evolve(spec.cache, store=CacheStore.REDIS))
    bare = PluginManager.load(entry_points=False)
    with pytest.raises(MemoryConfigurationError, match="cache store"):
        wrap_with_cache(NativeMemoryProvider.__new__(NativeMemoryProvider), redis_spec, bare,
                        ManualClock(), None)  # type: ignore[arg-type]
