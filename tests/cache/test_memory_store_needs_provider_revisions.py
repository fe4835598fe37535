"""A profile's in-memory search cache over a provider that keeps no scope revisions is
refused at build: each process would cache its own pages and miss the others' writes
(issue 28, defect 1). With the provider's revisions it is built and checks every page."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest
from cache_support import WithoutScopeRevisions
from governed_memory import GovernedMemoryManager
from governed_memory.cache import CachedMemoryProvider
from governed_memory.clock import Clock, ManualClock
from governed_memory.errors import MemoryConfigurationError
from governed_memory.hookspecs import hookimpl
from governed_memory.plugins import PluginManager
from governed_memory.profiles.loading import parse_profile
from governed_memory_native import build_native_provider


def _without_revisions(config: Mapping[str, Any], clock: Clock) -> Any:
    return WithoutScopeRevisions(build_native_provider(dict(config), clock))


class RevisionlessPlugin:
    @staticmethod
    @hookimpl
    def register_memory_providers(register: Callable[..., None]) -> None:
        register("revisionless", _without_revisions)


def spec_for(provider: str) -> Any:
    return parse_profile({
        "spec_version": 1, "id": "cache-check", "version": "1.0.0",
        "provider": {"name": provider, "config": {"backend": "memory"}},
        "cache": {"enabled": True, "store": "memory"},
    }, source="test")


def test_memory_store_over_a_provider_without_revisions_is_refused() -> None:
    plugins = PluginManager.load([RevisionlessPlugin()])
    with pytest.raises(MemoryConfigurationError, match="scope revisions") as refused:
        GovernedMemoryManager.from_profile(spec_for("revisionless"), plugins=plugins,
                                           clock=ManualClock(), sinks=())
    assert "cache.store" in str(refused.value) and "redis" in str(refused.value)


def test_memory_store_over_the_native_provider_checks_its_revisions() -> None:
    plugins = PluginManager.load()
    manager = GovernedMemoryManager.from_profile(spec_for("native"), plugins=plugins,
                                                 clock=ManualClock(), sinks=())
    assert isinstance(manager._provider, CachedMemoryProvider)
    assert manager._provider.checks_provider_revisions
