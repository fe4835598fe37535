"""Built-in embedders: a deterministic one for tests and MiniLM on ONNX Runtime.

Importing this package imports no model runtime, and no embedder module either: the
names are imported on first use (PEP 562), since every ``PluginManager.load()`` imports
the package to register them. ``minilm`` needs the ``embeddings`` extra only when it is
built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from governed_memory.exports import lazy_exports

if TYPE_CHECKING:
    from governed_memory_embedders.hashing import HashingEmbedder, build_hashing_embedder
    from governed_memory_embedders.minilm import MiniLMEmbedder, build_minilm_embedder

_MODULE_OF = {"HashingEmbedder": "hashing", "build_hashing_embedder": "hashing",
              "MiniLMEmbedder": "minilm", "build_minilm_embedder": "minilm"}


__getattr__, __dir__ = lazy_exports(__name__, _MODULE_OF)


__all__ = ["HashingEmbedder", "MiniLMEmbedder", "build_hashing_embedder",
           "build_minilm_embedder"]
