"""Mem0 behind the governed contract (in-process ``mem0ai`` and the hosted Platform).

The names are imported on first use (PEP 562): every ``PluginManager.load()`` imports
this package to register the provider, and a process that never builds it should not
pay for the provider's modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from governed_memory.exports import lazy_exports

if TYPE_CHECKING:
    from governed_memory_mem0.embedding import HashingEmbedder, Mem0EmbedderBridge
    from governed_memory_mem0.factory import build_mem0_provider
    from governed_memory_mem0.provider import Mem0MemoryProvider

_MODULE_OF = {"HashingEmbedder": "embedding", "Mem0EmbedderBridge": "embedding",
              "build_mem0_provider": "factory", "Mem0MemoryProvider": "provider"}


__getattr__, __dir__ = lazy_exports(__name__, _MODULE_OF)


__all__ = ["HashingEmbedder", "Mem0EmbedderBridge", "Mem0MemoryProvider",
           "build_mem0_provider"]
