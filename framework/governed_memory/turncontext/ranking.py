"""Pure scoring rules for recall, kept apart so they can be tested as arithmetic.

``final = relevance * (1 + recency) * (1 + importance) * (1 + entity) * (1 + type)``

- ``recency = 0.5 ** (hours_since_event / half_life)``, from the record's ``event_time``
  (when it happened, else when it was first written);
- ``entity = entity_overlap_weight * overlapping / max(1, len(memory.entity_ids))``;
- ``type = type_affinity_weight`` when the memory's type was asked for, else 0.

Every factor is at least one, so anchors and type hints only re-rank: they can never
push a relevant memory out by themselves scoring zero.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from governed_memory.records import MemoryRecord, MemoryType
from governed_memory.scope import ScopeLevel
from governed_memory.turncontext.scoping import NARROWNESS

RECALL_MEMORY_TYPES: tuple[MemoryType, ...] = (
    MemoryType.FACT, MemoryType.PREFERENCE, MemoryType.DECISION, MemoryType.EPISODE,
    MemoryType.NOTE,
)
"""What recall may return. Rolling summaries are not recalled: they already are the
context's ``summary``."""


def is_valid_at(record: MemoryRecord, moment: float) -> bool:
    """Inside the record's validity interval ``[valid_from, invalid_at)``."""
    return record.is_valid_at(moment)


@attrs.frozen(slots=True)
class Scored:
    record: MemoryRecord
    level: ScopeLevel
    score: float
    relevance: float
    recency: float
    entity: float
    type_boost: float

    def sort_key(self) -> tuple[float, int, str]:
        # Best first; ties toward the narrower scope, then the id for a stable order.
        return (-self.score, NARROWNESS[self.level], self.record.id)


def recency(record: MemoryRecord, now: float, half_life_hours: float) -> float:
    hours = max(0.0, now - record.event_time) / 3600.0
    return float(0.5 ** (hours / half_life_hours))


def entity_overlap(record: MemoryRecord, anchors: frozenset[str], weight: float) -> float:
    if not anchors or weight == 0 or not record.entity_ids:
        return 0.0
    shared = sum(1 for entity in set(record.entity_ids) if entity in anchors)
    return weight * shared / max(1, len(set(record.entity_ids)))


def score(record: MemoryRecord, level: ScopeLevel, relevance: float, *, now: float,
          half_life_hours: float, anchors: frozenset[str], entity_weight: float,
          wanted: frozenset[MemoryType], type_weight: float) -> Scored:
    rec = recency(record, now, half_life_hours)
    ent = entity_overlap(record, anchors, entity_weight)
    typ = type_weight if record.memory_type in wanted else 0.0
    final = relevance * (1 + rec) * (1 + record.importance) * (1 + ent) * (1 + typ)
    return Scored(record, level, final, relevance, rec, ent, typ)


def ranked(candidates: Iterable[Scored]) -> list[Scored]:
    return sorted(candidates, key=Scored.sort_key)
