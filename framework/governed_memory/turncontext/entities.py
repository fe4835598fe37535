"""Entity anchoring: memories link to knowledge-graph nodes by id, never by writing
into the graph.

With a resolver wired, extraction stores the node ids a fact's mentions resolve to at
or above the confidence floor; an unresolved or low-confidence mention is dropped (it
is noise for ranking, never a reason to drop the fact). A resolver that raises is
logged at WARNING and yields no anchors. Without a resolver, the model's mentions are
stored verbatim (those that are valid identifiers).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import attrs

from governed_memory.errors import MemoryValidationError
from governed_memory.limits import MAX_ENTITY_IDS, check_identifier
from governed_memory.turncontext.degrade import Degradations


@attrs.frozen(slots=True)
class ResolvedEntity:
    mention: str
    entity_id: str
    confidence: float


@runtime_checkable
class EntityResolver(Protocol):
    async def resolve_entities(self, mentions: Sequence[str], *,
                               tenant_id: str) -> tuple[ResolvedEntity, ...]: ...


def _valid(entity: object) -> str | None:
    if not isinstance(entity, str):
        return None
    try:
        return check_identifier(entity.strip(), "entity_ids")
    except MemoryValidationError:
        return None


def verbatim(mentions: Sequence[str]) -> tuple[str, ...]:
    out = dict.fromkeys(v for m in mentions if (v := _valid(m)) is not None)
    return tuple(out)[:MAX_ENTITY_IDS]


async def resolve(resolver: EntityResolver | None, mentions: Sequence[str], *,
                  tenant_id: str, floor: float, degraded: Degradations) -> tuple[str, ...]:
    if not mentions:
        return ()
    if resolver is None:
        return verbatim(mentions)
    try:
        resolved = await resolver.resolve_entities(tuple(mentions), tenant_id=tenant_id)
    except Exception as exc:
        degraded.add("extraction.entities_failed", exc)
        return ()
    out: dict[str, None] = {}
    for item in resolved or ():
        if not isinstance(item, ResolvedEntity):
            continue
        confidence = item.confidence
        if (isinstance(confidence, bool) or not isinstance(confidence, int | float)
                or not math.isfinite(confidence) or confidence < floor):
            continue
        entity = _valid(item.entity_id)
        if entity is not None:
            out.setdefault(entity)
    return tuple(out)[:MAX_ENTITY_IDS]
