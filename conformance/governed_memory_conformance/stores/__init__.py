"""Contract suites for the stores beside a provider: conversation turns, working state,
memory blocks and the search cache. Each is a class a store's tests subclass, as
``ProviderConformance`` is for providers, so a third-party store is held to the same
contract as ours."""

from governed_memory_conformance.stores.base import StoreConformanceBase, store_scenario
from governed_memory_conformance.stores.blocks import BlockStoreConformance
from governed_memory_conformance.stores.cache import CacheStoreConformance
from governed_memory_conformance.stores.turns import TurnStoreConformance
from governed_memory_conformance.stores.working import WorkingStateStoreConformance

SUITES = (TurnStoreConformance, WorkingStateStoreConformance, BlockStoreConformance,
          CacheStoreConformance)
"""Every store suite (the plugin guards subclasses of each)."""

__all__ = [
    "SUITES",
    "BlockStoreConformance",
    "CacheStoreConformance",
    "StoreConformanceBase",
    "TurnStoreConformance",
    "WorkingStateStoreConformance",
    "store_scenario",
]
