"""Built-in embedders: a deterministic one for tests and MiniLM on ONNX Runtime.

Importing this package imports no model runtime; ``minilm`` needs the ``embeddings``
extra only when it is built.
"""

from governed_memory_embedders.hashing import HashingEmbedder, build_hashing_embedder
from governed_memory_embedders.minilm import MiniLMEmbedder, build_minilm_embedder

__all__ = ["HashingEmbedder", "MiniLMEmbedder", "build_hashing_embedder",
           "build_minilm_embedder"]
