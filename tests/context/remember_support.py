"""A scripted model for ``remember``: the facts each message states, and how a new fact
relates to a stored memory, both from small tables, so a test reads as a conversation.

``remember`` asks ``Task: remember`` per window (the conversation quoted as numbered
lines) and ``Task: reconcile`` when a fact has stored memories close to it (the facts
numbered, the memories as ``[M1] (type) content``)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from governed_memory.language_models import ModelCall, ScriptedModel

Fact = tuple[str, str, float]
"""(content, type, confidence)"""

STATES: dict[str, Fact] = {
    "I prefer green tea": ("Alice prefers green tea", "preference", 0.9),
    "GREEN tea is what I prefer": ("alice  prefers GREEN tea", "preference", 0.9),
    "I switched to coffee": ("Alice prefers coffee", "preference", 0.9),
    "green tea with honey": ("Alice prefers green tea with honey", "preference", 0.9),
    "I live in Lyon": ("Alice lives in Lyon", "fact", 0.95),
    "maybe I like jazz": ("Alice may like jazz", "preference", 0.2),
    "my password is": ("Alice's password is hunter2-XyZ", "fact", 0.9),
    "The page says the office moved": ("The office moved to Berlin", "fact", 0.9),
    "We use tabs": ("The team indents with tabs", "decision", 0.9),
}
"""A phrase a message says, and the fact it states."""

RELATIONS: list[tuple[str, str, str]] = [
    ("Alice prefers coffee", "Alice prefers green tea", "supersede"),
    ("Alice prefers coffee", "Alice prefers green tea with honey", "supersede"),
    ("Alice prefers green tea with honey", "Alice prefers green tea", "update"),
    ("The team indents with tabs", "The team uses tabs for indentation", "none"),
]
"""(new fact, stored memory, action); anything else is added."""

_LINE = re.compile(r"^\[(\d+)\] (\w+): (.*)$")
_FACT = re.compile(r"^(\d+)\. (\".*\")$")
_MEMORY = re.compile(r"^\[M(\d+)\] \((\w+)\) (.*)$")


def facts_of(user: str) -> dict[str, Any]:
    facts = []
    for line in user.splitlines():
        match = _LINE.match(line)
        if match is None:
            continue
        for phrase, (content, kind, confidence) in STATES.items():
            if phrase in match.group(3):
                facts.append({"content": content, "type": kind, "importance": 0.7,
                              "confidence": confidence, "turns": [int(match.group(1))]})
    return {"facts": facts}


def relations_of(user: str) -> dict[str, Any]:
    facts = {int(m.group(1)): json.loads(m.group(2))
             for m in map(_FACT.match, user.splitlines()) if m}
    memories = {int(m.group(1)): m.group(3) for m in map(_MEMORY.match, user.splitlines()) if m}
    decisions = []
    for number, fact in facts.items():
        for new, old, action in RELATIONS:
            ref = next((k for k, text in memories.items() if text == old), None)
            if fact == new and ref is not None:
                decisions.append({"fact": number, "action": action, "memory": f"M{ref}"})
    return {"decisions": decisions}


def responder(call: ModelCall) -> Mapping[str, Any]:
    if call.task == "remember":
        return facts_of(call.user)
    if call.task == "reconcile":
        return relations_of(call.user)
    raise ValueError(call.task)


def scripted() -> ScriptedModel:
    return ScriptedModel(responder=responder)


def says(*texts: str, prefix: str = "t") -> list[dict[str, str]]:
    """User messages with turn ids ``t1``, ``t2``, ...; each followed by an assistant
    acknowledgement (``t1a``)."""
    out: list[dict[str, str]] = []
    for n, text in enumerate(texts, start=1):
        out.append({"role": "user", "content": text, "turn_id": f"{prefix}{n}"})
        out.append({"role": "assistant", "content": "Noted.", "turn_id": f"{prefix}{n}a"})
    return out
