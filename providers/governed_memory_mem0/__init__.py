"""Mem0 behind the governed contract (in-process ``mem0ai`` and the hosted Platform).

The names are imported on first use (PEP 562): every ``PluginManager.load()`` imports
this package to register the provider, and a process that never builds it should not
pay for the provider's modules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from governed_memory_mem0.embedding import HashingEmbedder, Mem0EmbedderBridge
    from governed_memory_mem0.factory import build_mem0_provider
    from governed_memory_mem0.provider import Mem0MemoryProvider

_MODULE_OF = {"HashingEmbedder": "embedding", "Mem0EmbedderBridge": "embedding",
              "build_mem0_provider": "factory", "Mem0MemoryProvider": "provider"}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'governed_memory_mem0' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"governed_memory_mem0.{module}"), name)
    globals()[name] = value
    return value


__all__ = ["HashingEmbedder", "Mem0EmbedderBridge", "Mem0MemoryProvider",
           "build_mem0_provider"]
