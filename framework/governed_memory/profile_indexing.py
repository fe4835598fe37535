"""A provider's indexing settings from a profile: the embedder a plugin registered
under ``[stores.embedder] kind``, the ``[indexing] mode``, the ranking and snapshots of
``[retrieval]``.

This is the profile build path's, apart from :mod:`governed_memory.indexing`: that
module declares the protocol a provider implements (``MemoryProvider.indexing`` names
it), so it must not depend on the plugin registry, whose factory types name the
provider.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from governed_memory.embedding import Embedder
from governed_memory.embedding_batch import BatchingEmbedder
from governed_memory.errors import MemoryConfigurationError
from governed_memory.indexing import (
    HasIndexing,
    IndexingMode,
    IndexingSettings,
    ranking_from_profile,
)
from governed_memory.profile_stores import build_store

if TYPE_CHECKING:
    from governed_memory.plugins import PluginManager
from governed_memory.profiles.spec import MemoryProfileSpec

__all__ = ["build_embedder", "configure_from_profile"]


def build_embedder(spec: MemoryProfileSpec, plugins: PluginManager) -> Embedder | None:
    """The embedder the profile's ``[stores.embedder]`` names, built (not loaded)."""
    embedder = build_store(spec, "embedder", plugins.embedders.get, Embedder, "embedder")
    if embedder is None:
        return None
    # Concurrent writes (add_many, a busy server) share model calls.
    return BatchingEmbedder(embedder)


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
