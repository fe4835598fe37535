"""Built-in embedders: a deterministic one for tests and MiniLM on ONNX Runtime.

Importing this package imports no model runtime, and no embedder module either: the
names are imported on first use (PEP 562), since every ``PluginManager.load()`` imports
the package to register them. ``minilm`` needs the ``embeddings`` extra only when it is
built.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from governed_memory_embedders.hashing import HashingEmbedder, build_hashing_embedder
    from governed_memory_embedders.minilm import MiniLMEmbedder, build_minilm_embedder

_MODULE_OF = {"HashingEmbedder": "hashing", "build_hashing_embedder": "hashing",
              "MiniLMEmbedder": "minilm", "build_minilm_embedder": "minilm"}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'governed_memory_embedders' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"governed_memory_embedders.{module}"), name)
    globals()[name] = value
    return value


__all__ = ["HashingEmbedder", "MiniLMEmbedder", "build_hashing_embedder",
           "build_minilm_embedder"]
