"""The tiers: conversation turns, working state, memory blocks, long-term memories.

Kept light on purpose: importing a tier's values must not load the activity port.
``MemoryTiers`` and ``Governance`` are loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from governed_memory.tiers.blocks import (
    Block,
    BlockHistory,
    BlockSet,
    BlockStore,
    BlockVersion,
    InMemoryBlockStore,
)
from governed_memory.tiers.results import (
    Cleared,
    ContextRecord,
    InjectedVersion,
    WorkingState,
    WorkingStateRead,
)
from governed_memory.tiers.turns import (
    InMemoryTurnStore,
    Role,
    ToolCall,
    Turn,
    TurnDraft,
    TurnPage,
    TurnStore,
)
from governed_memory.tiers.working import InMemoryWorkingStateStore, WorkingStateStore

if TYPE_CHECKING:
    from governed_memory.tiers.block_ops import MemoryBlocks
    from governed_memory.tiers.facade import MemorySnapshot, MemoryTiers
    from governed_memory.tiers.governance import Governance

__all__ = [
    "Block",
    "BlockHistory",
    "BlockSet",
    "BlockStore",
    "BlockVersion",
    "Cleared",
    "ContextRecord",
    "Governance",
    "InMemoryBlockStore",
    "InMemoryTurnStore",
    "InMemoryWorkingStateStore",
    "InjectedVersion",
    "MemoryBlocks",
    "MemorySnapshot",
    "MemoryTiers",
    "Role",
    "ToolCall",
    "Turn",
    "TurnDraft",
    "TurnPage",
    "TurnStore",
    "WorkingState",
    "WorkingStateRead",
    "WorkingStateStore",
]

_LAZY = {"MemoryTiers": "facade", "MemorySnapshot": "facade", "Governance": "governance",
         "MemoryBlocks": "block_ops"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"governed_memory.tiers.{module}"), name)
