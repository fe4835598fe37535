"""A provider's indexing settings from a profile: the embedder a plugin registered
under ``[stores.embedder] kind``, the ``[indexing] mode``, the ranking and snapshots of
``[retrieval]``.

This is the profile build path's, apart from :mod:`governed_memory.indexing`: that
module declares the protocol a provider implements (``MemoryProvider.indexing`` names
it), so it must not depend on the plugin registry, whose factory types name the
provider.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from governed_memory.embedding import Embedder
from governed_memory.embedding_batch import BatchingEmbedder
from governed_memory.errors import MemoryConfigurationError
from governed_memory.indexing import (
    HasIndexing,
    IndexingMode,
    IndexingSettings,
    ranking_from_profile,
)

if TYPE_CHECKING:
    from governed_memory.plugins import PluginManager
    from governed_memory.profiles.spec import MemoryProfileSpec

__all__ = ["build_embedder", "configure_from_profile"]


def build_embedder(spec: MemoryProfileSpec, plugins: PluginManager) -> Embedder | None:
    """The embedder the profile's ``[stores.embedder]`` names, built (not loaded)."""
    store = spec.stores.get("embedder")
    if store is None:
        return None
    try:
        registration = plugins.embedders.get(store.kind)
    except MemoryConfigurationError as exc:
        raise MemoryConfigurationError(f"stores.embedder.kind: {exc}") from None
    config = {str(k): _plain(v) for k, v in store.config.items()}
    try:
        embedder = registration.factory(config)
    except MemoryConfigurationError as exc:
        raise MemoryConfigurationError(f"stores.embedder.config: {exc}") from None
    if not isinstance(embedder, Embedder):
        raise MemoryConfigurationError(
            f"stores.embedder: the factory of {store.kind!r} built no embedder")
    # Concurrent writes (add_many, a busy server) share model calls.
    return BatchingEmbedder(embedder)


def _plain(value: Any) -> Any:
    """A mutable copy of a frozen profile config value, as factories expect."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def configure_from_profile(provider: HasIndexing, spec: MemoryProfileSpec,
                           plugins: PluginManager) -> None:
    """Hand an indexing provider its settings; refuse a profile asking a provider that
    cannot index for an embedder or an outbox (it would silently not get them).
    Errors read ``"<profile path>: <detail>"``."""
    embedder = build_embedder(spec, plugins)
    mode = IndexingMode(spec.indexing.mode.value)
    indexing = provider.indexing
    if indexing is not None:
        indexing.configure_indexing(IndexingSettings(
            mode=mode, embedder=embedder, ranking=ranking_from_profile(spec),
            snapshots=spec.retrieval.snapshots))
        return
    if spec.retrieval.snapshots is not None:
        raise MemoryConfigurationError(
            f"retrieval.snapshots: provider {spec.provider.name!r} stores no retrieval "
            "snapshots")
    if embedder is not None:
        raise MemoryConfigurationError(
            f"stores.embedder: provider {spec.provider.name!r} does not keep vectors")
    if mode is IndexingMode.ASYNC_OUTBOX:
        raise MemoryConfigurationError(
            f"indexing.mode: provider {spec.provider.name!r} has no indexing outbox")
