"""The per-turn context: what one chat or agent turn gets from memory.

``MemoryContextBuilder`` assembles an immutable ``MemoryContext`` (window, rolling
summary, standalone query, wanted types, recalled memories as a quoted block, anchors,
degradations); ``MemoryRecall`` and ``MemoryExtractor`` read durable memories into a
turn and write the facts a finished turn stated. ``ContextPolicy`` holds every knob.

The names are imported on first use (PEP 562): the tiers' facade imports the recall and
scoping modules of this package, and the builder and the extractor import the facade,
so importing the package must not import the builder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from governed_memory.exports import lazy_exports

if TYPE_CHECKING:
    from governed_memory.turncontext.builder import MemoryContextBuilder
    from governed_memory.turncontext.entities import EntityResolver, ResolvedEntity
    from governed_memory.turncontext.extraction import ExtractionResult, MemoryExtractor
    from governed_memory.turncontext.policy import ContextPolicy
    from governed_memory.turncontext.ranking import RECALL_MEMORY_TYPES, is_valid_at
    from governed_memory.turncontext.recall import (
        MemoryRecall,
        RecalledMemory,
        RecallResult,
        recalled_entity_ids,
    )
    from governed_memory.turncontext.result import MemoryContext
    from governed_memory.turncontext.tokens import TokenCounter, approximate_tokens

_MODULE_OF = {
    "MemoryContextBuilder": "builder",
    "EntityResolver": "entities",
    "ResolvedEntity": "entities",
    "ExtractionResult": "extraction",
    "MemoryExtractor": "extraction",
    "ContextPolicy": "policy",
    "RECALL_MEMORY_TYPES": "ranking",
    "is_valid_at": "ranking",
    "MemoryRecall": "recall",
    "RecalledMemory": "recall",
    "RecallResult": "recall",
    "recalled_entity_ids": "recall",
    "MemoryContext": "result",
    "TokenCounter": "tokens",
    "approximate_tokens": "tokens",
}

__getattr__, __dir__ = lazy_exports(__name__, _MODULE_OF)

__all__ = [
    "RECALL_MEMORY_TYPES",
    "ContextPolicy",
    "EntityResolver",
    "ExtractionResult",
    "MemoryContext",
    "MemoryContextBuilder",
    "MemoryExtractor",
    "MemoryRecall",
    "RecallResult",
    "RecalledMemory",
    "ResolvedEntity",
    "TokenCounter",
    "approximate_tokens",
    "is_valid_at",
    "recalled_entity_ids",
]
