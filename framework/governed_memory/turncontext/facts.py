"""The model-facing fact schema, parsed defensively: the model's answer is untrusted."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs

from governed_memory.limits import MAX_CONTENT_BYTES
from governed_memory.records import MemoryType
from governed_memory.scope import ScopeLevel

FACT_TYPES = {t.value: t for t in (MemoryType.FACT, MemoryType.PREFERENCE,
                                   MemoryType.DECISION, MemoryType.EPISODE)}
FACT_SCOPES = {"user": ScopeLevel.USER, "project": ScopeLevel.PROJECT,
               "session": ScopeLevel.SESSION}
MAX_FACTS = 32
MAX_MENTIONS = 16


@attrs.frozen(slots=True)
class ProposedFact:
    content: str
    memory_type: MemoryType
    level: ScopeLevel
    importance: float
    mentions: tuple[str, ...] = ()
    replaces: str | None = None


def parse_facts(answer: Mapping[str, Any]) -> list[ProposedFact]:
    raw = answer.get("facts") if isinstance(answer, Mapping) else None
    if not isinstance(raw, list):
        return []
    facts = []
    for item in raw[:MAX_FACTS]:
        fact = _parse(item)
        if fact is not None:
            facts.append(fact)
    return facts


def fact_content(item: object) -> tuple[Mapping[str, Any], str] | None:
    """A fact a model proposed and its content, white space folded; ``None`` for what
    is not a fact (not an object, no text, over the content limit). Shared by every
    reader of a model's facts (extraction, ``remember``), so none accepts more."""
    if not isinstance(item, Mapping):
        return None
    content = item.get("content")
    if not isinstance(content, str) or not content.strip():
        return None
    content = " ".join(content.split())
    if len(content.encode("utf-8")) > MAX_CONTENT_BYTES:
        return None
    return item, content


def _parse(raw: object) -> ProposedFact | None:
    found = fact_content(raw)
    if found is None:
        return None
    item, content = found
    importance = item.get("importance")
    if (isinstance(importance, bool) or not isinstance(importance, int | float)
            or not math.isfinite(importance)):
        return None
    kind = FACT_TYPES.get(str(item.get("type", "")).strip().lower(), MemoryType.FACT)
    # TENANT, GLOBAL, or anything unparseable is never inferred from chat: SESSION.
    level = FACT_SCOPES.get(str(item.get("scope", "")).strip().lower(), ScopeLevel.SESSION)
    mentions_raw = item.get("entities")
    mentions = tuple(m for m in mentions_raw if isinstance(m, str) and m.strip()
                     )[:MAX_MENTIONS] if isinstance(mentions_raw, list) else ()
    replaces = item.get("replaces")
    ref = replaces.strip().strip("[]").lower() if isinstance(replaces, str) else None
    return ProposedFact(content, kind, level, min(1.0, max(0.0, float(importance))),
                        mentions, ref or None)
