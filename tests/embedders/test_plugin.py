"""The built-in embedders arrive through the ``embedders`` entry point like any plugin,
and registering them loads no model runtime."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from governed_memory.embedding import Embedder, EmbedderIdentity
from governed_memory.errors import MemoryConfigurationError
from governed_memory.hookspecs import hookimpl
from governed_memory.plugins import PluginManager


def test_both_embedders_are_registered_by_the_entry_point() -> None:
    manager = PluginManager.load()
    assert "embedders" in manager.plugin_names
    hashing = manager.embedders.get("hashing")
    minilm = manager.embedders.get("minilm")
    assert hashing.plugin == minilm.plugin == "embedders"
    assert "ONNX" in minilm.description
    built = hashing.factory({"dimension": 16})
    assert isinstance(built, Embedder)
    assert built.identity.dimension == 16


def test_an_unknown_embedder_lists_the_registered_ones() -> None:
    with pytest.raises(MemoryConfigurationError, match="registered: hashing, minilm"):
        PluginManager.load().embedders.get("word2vec")


def test_a_blocked_plugin_registers_nothing() -> None:
    manager = PluginManager.load(blocked={"embedders"})
    with pytest.raises(MemoryConfigurationError, match="unknown embedder 'hashing'"):
        manager.embedders.get("hashing")


def test_a_third_party_embedder_registers_the_same_way() -> None:
    class Constant:
        identity = EmbedderIdentity("constant", "1", 2)

        async def embed(self, texts: Any) -> Any:
            return [(1.0, 0.0) for _ in texts]

        async def close(self) -> None:
            return None

    class ThirdParty:
        @hookimpl
        def register_embedders(self, register: Callable[..., None]) -> None:
            register("constant", lambda config: Constant(), description="test double")

    manager = PluginManager.load([ThirdParty()])
    assert manager.embedders.get("constant").plugin != "embedders"
    assert isinstance(manager.embedders.get("constant").factory({}), Embedder)


def test_a_second_registration_of_a_name_stops_start_up() -> None:
    class Clash:
        @hookimpl
        def register_embedders(self, register: Callable[..., None]) -> None:
            register("hashing", lambda config: None)

    # Registries fill on first use (governed_memory.plugins): the first lookup refuses.
    with pytest.raises(MemoryConfigurationError, match="embedder 'hashing' registered twice"):
        PluginManager.load([Clash()]).embedders.get("hashing")


def test_loading_plugins_and_hashing_imports_no_model_runtime() -> None:
    code = (
        "import asyncio, sys\n"
        "from governed_memory.plugins import PluginManager\n"
        "m = PluginManager.load()\n"
        "e = m.embedders.get('hashing').factory({})\n"
        "asyncio.run(e.embed(['some text']))\n"
        "import governed_memory_embedders\n"
        "print(sorted(n for n in ('onnxruntime', 'tokenizers') if n in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"
