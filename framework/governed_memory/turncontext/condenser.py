"""Step 7: one model call turns the question into a standalone retrieval query and
says which memory types it asks for.

A model that cannot answer in structure is asked once more in plain text (query only,
no type hint). An empty or implausibly long rewrite is rejected and the question is
used as it is; ``rewritten`` is true only when the model actually changed it.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from governed_memory.language_models import LanguageModel
from governed_memory.records import MemoryType
from governed_memory.tiers.turns import Turn
from governed_memory.turncontext.degrade import Degradations
from governed_memory.turncontext.prompts import (
    CONDENSE_SCHEMA,
    CONDENSE_SYSTEM,
    CONDENSE_TEXT_SYSTEM,
    condense_user,
)
from governed_memory.turncontext.ranking import RECALL_MEMORY_TYPES

MAX_WANTED_TYPES = 3
MAX_QUERY_CHARS = 2000


@attrs.frozen(slots=True)
class Condensed:
    query: str
    rewritten: bool = False
    wanted_types: tuple[MemoryType, ...] = ()


def plausible(query: object, question: str) -> str | None:
    if not isinstance(query, str):
        return None
    query = " ".join(query.split())
    limit = min(MAX_QUERY_CHARS, max(400, 4 * len(question)))
    if not query or len(query) > limit:
        return None
    return query


def parse_types(value: object) -> tuple[MemoryType, ...]:
    if not isinstance(value, list):
        return ()
    out: list[MemoryType] = []
    for item in value:
        try:
            kind = MemoryType(item)
        except (ValueError, TypeError):
            continue
        if kind in RECALL_MEMORY_TYPES and kind not in out:
            out.append(kind)
    return tuple(out[:MAX_WANTED_TYPES])


async def condense(model: LanguageModel, summary: str | None, window: Sequence[Turn],
                   question: str, degraded: Degradations) -> Condensed:
    user = condense_user(summary, window, question)
    query: str | None = None
    types: tuple[MemoryType, ...] = ()
    try:
        answer = await model.generate_structured(system=CONDENSE_SYSTEM, user=user,
                                                 schema=CONDENSE_SCHEMA)
        query = plausible(answer.get("query"), question)
        if query is None:
            degraded.add("rewrite.rejected")
            return Condensed(question)
        types = parse_types(answer.get("wanted_types"))
    except Exception as exc:
        degraded.add("rewrite.structured_failed", exc)
        try:
            text = await model.generate_text(system=CONDENSE_TEXT_SYSTEM, user=user)
        except Exception as again:
            degraded.add("rewrite.failed", again)
            return Condensed(question)
        query = plausible(text, question)
        if query is None:
            degraded.add("rewrite.rejected")
            return Condensed(question)
    return Condensed(query, query != question, types)
