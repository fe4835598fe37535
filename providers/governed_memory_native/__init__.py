"""The native governed-memory provider: one set of semantics, pluggable storage backends."""

from governed_memory_native.config import BackendKind, NativeConfig, parse_config
from governed_memory_native.factory import build_native_provider
from governed_memory_native.memory_backend import MemoryBackend
from governed_memory_native.provider import NativeMemoryProvider
from governed_memory_native.sqlite_backend import SqliteBackend

__all__ = [
    "BackendKind",
    "MemoryBackend",
    "NativeConfig",
    "NativeMemoryProvider",
    "SqliteBackend",
    "build_native_provider",
    "parse_config",
]
