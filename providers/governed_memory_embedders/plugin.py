"""Registers the built-in embedders, the same way a third-party plugin would.

Registration imports no embedder module at all (every ``PluginManager.load()`` runs
it): each is imported when first built. ``minilm`` is registered whether or not the
``embeddings`` extra is installed, and building it without the extra names the extra.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from governed_memory.hookspecs import hookimpl


def _build_hashing(config: Mapping[str, Any]) -> Any:
    from governed_memory_embedders.hashing import build_hashing_embedder

    return build_hashing_embedder(config)


def _build_minilm(config: Mapping[str, Any]) -> Any:
    from governed_memory_embedders.minilm import build_minilm_embedder

    return build_minilm_embedder(config)


@hookimpl
def register_embedders(register: Callable[..., None]) -> None:
    register("hashing", _build_hashing,
             description="Deterministic feature hashing of words and trigrams (tests, no model)")
    register("minilm", _build_minilm,
             description="all-MiniLM-L6-v2, int8 ONNX on ONNX Runtime (the embeddings extra)")
