"""Registers the built-in embedders, the same way a third-party plugin would.

Registration imports no model runtime: ``minilm`` is registered whether or not the
``embeddings`` extra is installed, and building it without the extra names the extra.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from governed_memory.hookspecs import hookimpl

from governed_memory_embedders.hashing import build_hashing_embedder


def _build_minilm(config: Mapping[str, Any]) -> Any:
    from governed_memory_embedders.minilm import build_minilm_embedder

    return build_minilm_embedder(config)


@hookimpl
def register_embedders(register: Callable[..., None]) -> None:
    register("hashing", build_hashing_embedder,
             description="Deterministic feature hashing of words and trigrams (tests, no model)")
    register("minilm", _build_minilm,
             description="all-MiniLM-L6-v2, int8 ONNX on ONNX Runtime (the embeddings extra)")
