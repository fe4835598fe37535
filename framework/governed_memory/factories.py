"""What a plugin registers under a name, kind by kind: the factory each registry of
:class:`governed_memory.plugins.PluginManager` holds.

The hooks (:mod:`governed_memory.hookspecs`) describe each factory in words, and a
registry cannot check a factory when a plugin registers it; these types say it to a
type checker instead, so every ``registration.factory(...)`` is checked where it is
called, and a plugin author can annotate a factory with its kind. Every factory builds
without I/O; its ``config`` is the profile's table for it.

A module of its own so that the registries can name these types without importing what
the factories build: this one imports the protocols, ``plugins`` imports only this one,
and no module it imports reaches back to the registry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from governed_memory.cache.store import CacheStore
from governed_memory.clock import Clock
from governed_memory.embedding import Embedder
from governed_memory.events import EventSink
from governed_memory.language_models import LanguageModel
from governed_memory.policy import MemoryPolicy
from governed_memory.profiles.spec import MemoryProfileSpec
from governed_memory.provider import ProviderFactory
from governed_memory.rates import RateWindows
from governed_memory.tiers.blocks import BlockStore
from governed_memory.tiers.turns import TurnStore
from governed_memory.tiers.working import WorkingStateStore

__all__ = [
    "BlockStoreFactory", "CacheStoreFactory", "EmbedderFactory", "EventSinkFactory",
    "LanguageModelFactory", "PolicyFactory", "ProviderFactory", "RateStoreFactory",
    "TurnStoreFactory", "WorkingStateStoreFactory",
]
"""``ProviderFactory`` is declared with the provider protocol
(``governed_memory.provider``) and named here with the others."""

Config = Mapping[str, Any]

PolicyFactory = Callable[[Config, MemoryProfileSpec], MemoryPolicy]
"""Builds the policy for one profile from its ``[policies.extra.<name>]`` table (empty
when absent); built-in policies read their own section of the profile instead."""

EventSinkFactory = Callable[[Config], EventSink]
"""Builds an event sink from an ``[audit.sinks.<name>]`` table (or the trail's)."""

CacheStoreFactory = Callable[[Config], CacheStore]
"""Builds an unconnected search-cache store from ``[stores.cache]``."""

EmbedderFactory = Callable[[Config], Embedder]
"""Builds an embedder (its model loads on first use) from ``[stores.embedder]``."""

RateStoreFactory = Callable[[Config], RateWindows]
"""Builds unconnected shared write-rate windows from ``[stores.rates]``."""

TurnStoreFactory = Callable[[Config, Clock], TurnStore]
"""Builds an unstarted conversation-turn store from ``[stores.turns]``."""

WorkingStateStoreFactory = Callable[[Config, Clock], WorkingStateStore]
"""Builds an unstarted working-state store from ``[stores.working_state]``."""

BlockStoreFactory = Callable[[Config, Clock], BlockStore]
"""Builds an unstarted memory-block store from ``[stores.blocks]``."""

LanguageModelFactory = Callable[[Config], LanguageModel]
"""Builds a language-model adapter (no model is ever required)."""
