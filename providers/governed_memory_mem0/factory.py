"""``build_mem0_provider``: profile config in, unstarted provider out, no I/O.

The plugin module registers this function, so importing this module is part of every
``PluginManager.load()``: the provider, its clients and its embedder bridge are imported
when the function first runs (``mem0ai`` itself only when a provider starts).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from governed_memory.clock import Clock
    from governed_memory.embedding import Embedder

    from governed_memory_mem0.clients import Mem0Client
    from governed_memory_mem0.config import EmbedderConfig
    from governed_memory_mem0.embedding import Mem0EmbedderBridge
    from governed_memory_mem0.provider import Mem0MemoryProvider


def build_embedder(config: EmbedderConfig) -> Embedder:
    """The deterministic embedder, or one a plugin registered under that name."""
    from governed_memory.errors import MemoryConfigurationError

    from governed_memory_mem0.config import DEFAULT_DIMENSION
    from governed_memory_mem0.embedding import HashingEmbedder

    if config.name == "deterministic":
        return HashingEmbedder(config.dimension or DEFAULT_DIMENSION)
    from governed_memory.plugins import PluginManager

    try:
        registration = PluginManager.load().embedders.get(config.name)
    except Exception:
        raise MemoryConfigurationError(
            f"embedder.name: no embedder {config.name!r} is registered") from None
    embedder: Embedder = registration.factory(dict(config.options))
    if config.dimension is not None and embedder.identity.dimension != config.dimension:
        raise MemoryConfigurationError(
            f"embedder.dimension: {config.name} produces {embedder.identity.dimension} "
            f"dimensions, the config says {config.dimension}")
    return embedder


def build_mem0_provider(config: Mapping[str, Any], clock: Clock, *,
                        embedder: Embedder | None = None) -> Mem0MemoryProvider:
    from governed_memory_mem0.clients import LocalMem0, PlatformMem0
    from governed_memory_mem0.config import ClientKind, parse_config
    from governed_memory_mem0.embedding import Mem0EmbedderBridge
    from governed_memory_mem0.provider import Mem0MemoryProvider

    settings = parse_config(config)
    client: Mem0Client
    bridge: Mem0EmbedderBridge | None = None
    if settings.client is ClientKind.LOCAL:
        assert settings.local is not None  # parse_config fills it for the local client
        bridge = Mem0EmbedderBridge(embedder or build_embedder(settings.local.embedder),
                                    timeout_s=settings.timeout_seconds)
        client = LocalMem0(settings.local, bridge)
        path = settings.local.vector_path
        identity = (("local", os.path.abspath(path), settings.local.collection)
                    if path != ":memory:" else ("local-memory", str(id(client))))
    else:
        assert settings.platform is not None
        client = PlatformMem0(settings.platform, settings.timeout_seconds)
        identity = ("platform", settings.platform.host, settings.namespace_prefix)
    return Mem0MemoryProvider(settings, clock, client, bridge, identity)
