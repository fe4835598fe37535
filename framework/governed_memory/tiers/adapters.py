"""Tier stores presented to the activity port as targets.

Each tier request sends itself to one of these (``send``), reaching the store it holds,
so a turn append or a working-state update is validated, decided, traced, checked and
recorded by the same code as a memory write, with nothing tier-specific in the port.
An adapter only names its store and says what it promises; it offers none of a
provider's optional features.
"""

from __future__ import annotations

from governed_memory.capabilities import Capabilities
from governed_memory.provider_kit import NoOptionalFeatures
from governed_memory.tiers.turns import TurnStore
from governed_memory.tiers.working import WorkingStateStore


def _capabilities(durable: bool) -> Capabilities:
    # The port asks only for optional capabilities (usage, review); tiers offer none.
    return Capabilities(durable=durable, transactional=True, usage=False, review=False)


class TurnTier(NoOptionalFeatures):
    def __init__(self, store: TurnStore) -> None:
        self.store = store
        self.name = f"turns:{store.name}"
        self.revision = str(getattr(store, "revision", "1"))

    def capabilities(self) -> Capabilities:
        return _capabilities(bool(getattr(self.store, "durable", False)))


class WorkingTier(NoOptionalFeatures):
    def __init__(self, store: WorkingStateStore) -> None:
        self.store = store
        self.name = f"working:{store.name}"
        self.revision = str(getattr(store, "revision", "1"))

    def capabilities(self) -> Capabilities:
        return _capabilities(bool(getattr(self.store, "durable", False)))


class ContextLedger(NoOptionalFeatures):
    """The target of ``record_context`` and ``record_extraction``: it stores nothing.
    The record exists for its decision and its event, which say which memory versions
    a prompt received (or an extraction stored)."""

    name = "context"
    revision = "1"

    def capabilities(self) -> Capabilities:
        return _capabilities(False)
