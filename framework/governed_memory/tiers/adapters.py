"""Tier stores presented to the activity port as targets.

Each tier request sends itself to one of these (``send``), reaching the store it holds,
so a turn append or a working-state update is validated, decided, traced, checked and
recorded by the same code as a memory write, with nothing tier-specific in the port.
An adapter only names its store and says what it promises; it offers none of a
provider's optional features.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from governed_memory.capabilities import Capabilities
from governed_memory.errors import MemoryNotFoundError, MemoryValidationError
from governed_memory.profiles.blocks import BlockSection
from governed_memory.provider_kit import NoOptionalFeatures
from governed_memory.scope import Scope
from governed_memory.tiers.blocks import Block, BlockSet, BlockStore, BlockVersion
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


class BlockTier(NoOptionalFeatures):
    """The block store and the profile's declarations: a stored version becomes a
    ``Block`` with its limit and description, and a block never written reads as its
    declared initial text at version 0."""

    def __init__(self, store: BlockStore, specs: Mapping[str, BlockSection]) -> None:
        self.store = store
        self.specs = specs
        self.name = f"blocks:{store.name}"
        self.revision = str(getattr(store, "revision", "1"))

    def capabilities(self) -> Capabilities:
        return _capabilities(bool(getattr(self.store, "durable", False)))

    def block(self, scope_hash: str, name: str, stored: BlockVersion | None) -> Block:
        spec = self.specs[name]
        if stored is None:
            return Block(scope_hash, name, spec.initial, 0, spec.limit, spec.description)
        return Block(scope_hash, name, stored.value, stored.version, spec.limit,
                     spec.description, stored.updated_at)

    def _declared(self, name: str) -> None:
        if name not in self.specs:
            raise MemoryNotFoundError(f"no block named {name!r} is declared by the profile")

    async def read(self, scope: Scope, names: Sequence[str]) -> BlockSet:
        for name in names:
            self._declared(name)
        stored = await self.store.current(scope, tuple(names))
        return BlockSet(scope.scope_hash, tuple(
            self.block(scope.scope_hash, name, stored.get(name)) for name in names))

    async def write(self, scope: Scope, name: str, value: str, *, expected_version: int,
                    edit: str, now: float) -> Block:
        self._declared(name)
        limit = self.specs[name].limit
        if len(value) > limit:  # a policy's rewrite may have lengthened it
            raise MemoryValidationError(
                f"value would be {len(value)} characters; the block holds at most {limit}",
                field="value")
        written = await self.store.write(scope, name, value,
                                         expected_version=expected_version, edit=edit,
                                         now=now)
        return self.block(scope.scope_hash, name, written)
