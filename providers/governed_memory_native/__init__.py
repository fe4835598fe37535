"""The native governed-memory provider: one set of semantics, pluggable storage backends.

The names are imported on first use (PEP 562): every ``PluginManager.load()`` imports
this package to register the provider, and a process that never builds it (``--help``,
another provider) should not pay for its storage backends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from governed_memory.exports import lazy_exports

from governed_memory_native import moved

if TYPE_CHECKING:
    from governed_memory_native.config import BackendKind, NativeConfig, parse_config
    from governed_memory_native.factory import build_native_provider
    from governed_memory_native.memory.backend import MemoryBackend
    from governed_memory_native.provider import NativeMemoryProvider
    from governed_memory_native.sqlite.backend import SqliteBackend

_MODULE_OF = {
    "BackendKind": "config", "NativeConfig": "config", "parse_config": "config",
    "build_native_provider": "factory", "MemoryBackend": "governed_memory_native.memory.backend",
    "NativeMemoryProvider": "provider", "SqliteBackend": "governed_memory_native.sqlite.backend",
}


__getattr__, __dir__ = lazy_exports(__name__, _MODULE_OF)
moved.install()


__all__ = [
    "BackendKind",
    "MemoryBackend",
    "NativeConfig",
    "NativeMemoryProvider",
    "SqliteBackend",
    "build_native_provider",
    "parse_config",
]
