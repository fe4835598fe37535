"""What ``remember`` reads and answers: the messages of a conversation, checked one by
one, and the decision made for each fact, as values every surface shares.

``governed_memory.remembering`` does the work; this module is what a caller, a route or
a tool needs to speak to it without loading the work itself.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Iterable, Mapping
from typing import Any, Final

import attrs

from governed_memory.canonical import canonical_json
from governed_memory.errors import MemoryValidationError
from governed_memory.language_models import LanguageModel
from governed_memory.limits import MAX_CONTENT_BYTES, check_identifier, check_text
from governed_memory.records import MemoryType
from governed_memory.tiers.turns import Role

DEFAULT_WINDOW: Final = 20
"""Messages per model call: a 600-message conversation is 30 extraction calls."""
MAX_WINDOW: Final = 100
MAX_MESSAGES: Final = 1000
DEFAULT_CONFIDENCE_FLOOR: Final = 0.5
CLOSE_PER_FACT: Final = 5
"""Stored memories a fact is compared with (mem0 compares with five too)."""
MAX_SOURCE_TURN_IDS: Final = 50
MARKS_KEY: Final = "remembered_from"
MAX_MARKS: Final = 32
"""Marks a memory carries of the (messages, fact) pairs written into it or into the
memories it replaced, newest first: how a retry tells its own earlier writes from new
statements after later messages changed them."""

CONVERSATION: Final = "conversation"
INFERRED: Final = "inferred"
"""The source type of a fact the model was not sure of (under the confidence floor)."""
TOOL: Final = "tool"

MODEL_SETTING: Final = "[stores.language_model]"

SCOPE_PROBE_KEY: Final = "remember.scope-check"
"""The key ``remember`` looks up (a miss) to have the scope read, governed, before the
model sees anything."""
NO_MODEL: Final = (
    f"remember needs a language model and this manager has none: name one in the "
    f"profile's {MODEL_SETTING} (kind = a model registered through "
    "register_language_models, such as \"openai\", and its config), or pass "
    "language_model= when building the manager")


def _role(value: object) -> Role:
    try:
        return Role(value if isinstance(value, str) else "")
    except ValueError:
        raise MemoryValidationError(f"role is one of {', '.join(r.value for r in Role)}",
                                    field="role") from None


@attrs.frozen(slots=True, kw_only=True)
class Message:
    """One message of a conversation. ``turn_id`` names it in provenance and keys the
    writes it leads to (default: from its position and text); ``source_type`` says
    where its text came from when that is not the conversation itself (``web``; a
    ``tool`` message is ``tool`` unless it says otherwise)."""

    role: Role = attrs.field(converter=_role)
    content: str
    turn_id: str | None = None
    source_type: str | None = None


@attrs.frozen(slots=True)
class SourceTurn:
    """A message as ``remember`` reads it: validated, its turn id and source type
    settled."""

    role: Role
    content: str
    turn_id: str
    source_type: str


class Decision(enum.StrEnum):
    ADDED = "added"
    UPDATED = "updated"
    SUPERSEDED = "superseded"
    UNCHANGED = "unchanged"
    HELD = "held_for_review"
    REFUSED = "refused"


@attrs.frozen(slots=True, kw_only=True)
class MemoryDecision:
    """What one proposed fact did. ``record_id``/``version`` name the memory written (or,
    when unchanged, the one that already says it); ``previous_id`` the one updated,
    superseded or (when held) that it would replace. A refused fact carries the
    refusal's ``error_code`` and no ``content`` (it may hold what a policy keeps out)."""

    decision: Decision
    reason: str
    content: str | None
    memory_type: MemoryType
    source_turn_ids: tuple[str, ...]
    record_id: str | None = None
    version: int | None = None
    previous_id: str | None = None
    error_code: str | None = None

    def summary(self) -> dict[str, Any]:
        """The decision as a tool answers a model: ids, decision, reason and source
        turns, never the fact's content (the model wrote it; echoing it back would only
        carry it further)."""
        return {key: value for key, value in (
            ("decision", self.decision.value), ("record_id", self.record_id),
            ("previous_id", self.previous_id), ("reason", self.reason),
            ("error_code", self.error_code),
            ("source_turn_ids", list(self.source_turn_ids))) if value is not None}


@attrs.frozen(slots=True, kw_only=True)
class RememberResult:
    decisions: tuple[MemoryDecision, ...] = ()
    model: str = ""
    """The model's identity (``name``, with its ``model`` when it has one)."""
    model_calls: int = 0
    windows: int = 0

    def count(self, decision: Decision | str) -> int:
        return sum(1 for d in self.decisions if d.decision == decision)


def model_identity(model: LanguageModel) -> str:
    """``name``, or ``name:model`` for an adapter that serves a named model."""
    name = str(getattr(model, "name", "") or type(model).__name__)
    served = getattr(model, "model", None)
    return f"{name}:{served}" if isinstance(served, str) and served else name


def parse_messages(messages: Iterable[Message | Mapping[str, Any]]) -> tuple[SourceTurn, ...]:
    """The conversation, validated; a bad message names its index and field."""
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
        raise MemoryValidationError("messages is a list of {role, content} objects",
                                    field="messages")
    turns: list[SourceTurn] = []
    given: set[str] = set()
    for index, item in enumerate(messages):
        if index >= MAX_MESSAGES:
            raise MemoryValidationError(f"remember takes at most {MAX_MESSAGES} messages",
                                        field="messages")
        turn = _turn(index, item)
        if turn.turn_id in given:
            raise MemoryValidationError("two messages have the same turn_id",
                                        field=f"messages[{index}].turn_id")
        given.add(turn.turn_id)
        turns.append(turn)
    if not turns:
        raise MemoryValidationError("remember needs at least one message", field="messages")
    return tuple(turns)


def _turn(index: int, item: Message | Mapping[str, Any]) -> SourceTurn:
    field = f"messages[{index}]"
    role: object
    content: object
    turn_id: object
    source: object
    if isinstance(item, Message):
        role, content, turn_id, source = item.role, item.content, item.turn_id, item.source_type
    elif isinstance(item, Mapping):
        unknown = set(item) - {"role", "content", "turn_id", "source_type"}
        if unknown:
            raise MemoryValidationError(f"{field} has unknown keys: {sorted(unknown)}",
                                        field=f"{field}.{sorted(unknown)[0]}")
        role, content = item.get("role"), item.get("content")
        turn_id, source = item.get("turn_id"), item.get("source_type")
    else:
        raise MemoryValidationError(f"{field} is not a message", field=field)
    try:
        kind = Role(role if isinstance(role, str) else "")
    except ValueError:
        raise MemoryValidationError(f"{field}.role is one of "
                                    f"{', '.join(r.value for r in Role)}",
                                    field=f"{field}.role") from None
    text = check_text(content, f"{field}.content", max_bytes=MAX_CONTENT_BYTES,
                      allow_empty=True)
    if turn_id is None:
        digest = hashlib.sha256(canonical_json([kind.value, text]).encode("utf-8"))
        turn_id = f"m{index}:{digest.hexdigest()[:16]}"
    else:
        check_identifier(turn_id, f"{field}.turn_id")
    if source is None:
        source = TOOL if kind is Role.TOOL else CONVERSATION
    else:
        check_identifier(source, f"{field}.source_type")
    return SourceTurn(kind, text, str(turn_id), str(source))
