"""Mem0 behind the governed contract (in-process ``mem0ai`` and the hosted Platform)."""

from governed_memory_mem0.embedding import HashingEmbedder, Mem0EmbedderBridge
from governed_memory_mem0.factory import build_mem0_provider
from governed_memory_mem0.provider import Mem0MemoryProvider

__all__ = ["HashingEmbedder", "Mem0EmbedderBridge", "Mem0MemoryProvider",
           "build_mem0_provider"]
