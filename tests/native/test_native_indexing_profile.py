"""A profile wires the embedder, the indexing mode and the ranking into the native
provider through the framework's indexing protocol (no plugin import in the framework)."""

from __future__ import annotations

from pathlib import Path

import pytest
from governed_memory import GovernedMemoryManager
from governed_memory.errors import MemoryConfigurationError
from governed_memory.indexing import IndexingMode
from governed_memory.plugins import PluginManager
from governed_memory.profiles import loads_profile
from governed_memory.profiles.build import build_components
from governed_memory_native import NativeMemoryProvider

PROFILE = """
spec_version = 1
id = "hybrid-test"
version = "1.0.0"

[provider]
name = "native"
config = {{ backend = "memory" }}

[stores.embedder]
kind = "hashing"
config = {{ dimension = 32 }}

[indexing]
mode = "{mode}"

[retrieval]
modes = ["lexical", "vector"]
recency_half_life_s = 3600.0

[retrieval.weights]
lexical = 1.0
vector = 2.0
recency = 0.5
"""


def _plugins() -> PluginManager:
    return PluginManager.load(blocked=[])


@pytest.mark.parametrize("mode", ["sync", "async_outbox"])
def test_profile_configures_embedder_mode_and_ranking(mode: str) -> None:
    spec = loads_profile(PROFILE.format(mode=mode))
    parts = build_components(spec, _plugins(), clock=None)  # type: ignore[arg-type]
    provider = parts.provider
    assert isinstance(provider, NativeMemoryProvider)
    indexing = provider.indexing_settings
    assert indexing.mode is IndexingMode(mode)
    assert indexing.embedder is not None
    assert (indexing.embedder.identity.id, indexing.embedder.identity.dimension) == (
        "hashing", 32)
    assert indexing.ranking.modes == ("lexical", "vector")
    assert indexing.ranking.weight("vector") == 2.0
    assert indexing.ranking.recency_half_life_s == 3600.0
    assert provider.capabilities().vector_search


def test_vector_mode_without_an_embedder_is_refused() -> None:
    text = PROFILE.format(mode="sync").replace(
        '[stores.embedder]\nkind = "hashing"\nconfig = { dimension = 32 }\n', "")
    spec = loads_profile(text)
    with pytest.raises(MemoryConfigurationError, match=r"retrieval\.modes"):
        build_components(spec, _plugins(), clock=None)  # type: ignore[arg-type]


def test_unknown_embedder_and_bad_config_name_their_path() -> None:
    spec = loads_profile(PROFILE.format(mode="sync").replace('kind = "hashing"',
                                                             'kind = "nope"'))
    with pytest.raises(MemoryConfigurationError, match=r"stores\.embedder\.kind"):
        build_components(spec, _plugins(), clock=None)  # type: ignore[arg-type]
    spec = loads_profile(PROFILE.format(mode="sync").replace("dimension = 32",
                                                             "dimension = 3"))
    with pytest.raises(MemoryConfigurationError, match=r"stores\.embedder\.config"):
        build_components(spec, _plugins(), clock=None)  # type: ignore[arg-type]


async def test_manager_from_profile_indexes_through_the_outbox(tmp_path: Path) -> None:
    spec = loads_profile(PROFILE.format(mode="async_outbox"))
    manager = GovernedMemoryManager.from_profile(spec, plugins=_plugins())
    provider = manager._provider
    assert isinstance(provider, NativeMemoryProvider)
    async with manager:
        from governed_memory import Principal, Scope

        principal = Principal("alice", "user", "acme", user_id="alice",
                              permissions=["memory:read", "memory:write"])
        scope = Scope(tenant_id="acme", user_id="alice")
        await manager.add(principal, scope, "green tea every morning")
        assert (await provider.outbox_status()).pending == 1
        assert (await provider.process_index_jobs(worker_id="w")).indexed == 1
