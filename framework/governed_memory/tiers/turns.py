"""The conversation tier: the turns of one session, in order.

A turn is what a chat or agent loop said or was told: a user message, an assistant
reply (possibly calling tools), a tool result answering one call, or a system note.
Stores keep them per exact session scope (``narrow(scope, SESSION)``: tenant, user and
session, not the project) with a sequence number the store assigns, so "the last
twelve" and "everything after turn 40" are exact, whatever the clocks say.

A caller may name a turn (``turn_id``); appending the same named turn again returns
the stored one instead of a duplicate, and a different turn under that name is a
conflict. That is what makes a retried append safe.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping, Sequence, Set
from typing import Any, Protocol, runtime_checkable

import attrs

from governed_memory.canonical import canonical_json
from governed_memory.errors import MemoryConflictError, MemoryValidationError
from governed_memory.ids import new_id
from governed_memory.limits import (
    MAX_CONTENT_BYTES,
    check_identifier,
    check_metadata_budget,
    check_text,
)
from governed_memory.records import _frozen_mapping, json_copy
from governed_memory.request import Audited, Checked, summarised
from governed_memory.scope import Scope

MAX_TOOL_CALLS = 64


class Role(enum.StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


@attrs.frozen(slots=True)
class ToolCall:
    """One tool call an assistant turn made; ``arguments`` is the JSON text as the model
    wrote it (stored, never parsed or executed here)."""

    id: str
    name: str
    arguments: str = "{}"

    def validate(self, field: str) -> None:
        check_identifier(self.id, f"{field}.id")
        check_text(self.name, f"{field}.name", max_bytes=256)
        check_text(self.arguments, f"{field}.arguments", max_bytes=MAX_CONTENT_BYTES,
                   allow_empty=True)


def _tool_calls(value: object) -> tuple[ToolCall, ...]:
    if isinstance(value, ToolCall):
        return (value,)
    if not isinstance(value, list | tuple):
        raise TypeError("tool_calls must be a sequence of ToolCall")
    return tuple(value)


@attrs.frozen(slots=True)
class TurnDraft:
    """A turn as the caller hands it to ``append``."""

    role: Role = attrs.field(converter=Role)
    content: str
    name: str | None = None
    tool_call_id: str | None = None
    """For a tool result: the id of the assistant's call it answers."""
    tool_calls: tuple[ToolCall, ...] = attrs.field(default=(), converter=_tool_calls)
    metadata: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_mapping)
    turn_id: str | None = None
    """Caller-chosen id: appending the same turn twice stores it once."""

    # One constructor per role; each takes the other fields by keyword, with their
    # defaults (``validate`` refuses a field the role cannot have, as for ``TurnDraft``).

    @classmethod
    def user(cls, content: str, *, name: str | None = None,
             tool_call_id: str | None = None, tool_calls: Sequence[ToolCall] = (),
             metadata: Mapping[str, Any] | None = None,
             turn_id: str | None = None) -> TurnDraft:
        return cls(Role.USER, content, name=name, tool_call_id=tool_call_id,
                   tool_calls=tool_calls, metadata=metadata, turn_id=turn_id)

    @classmethod
    def assistant(cls, content: str, *, name: str | None = None,
                  tool_call_id: str | None = None, tool_calls: Sequence[ToolCall] = (),
                  metadata: Mapping[str, Any] | None = None,
                  turn_id: str | None = None) -> TurnDraft:
        return cls(Role.ASSISTANT, content, name=name, tool_call_id=tool_call_id,
                   tool_calls=tool_calls, metadata=metadata, turn_id=turn_id)

    @classmethod
    def tool(cls, tool_call_id: str, content: str, *, name: str | None = None,
             tool_calls: Sequence[ToolCall] = (), metadata: Mapping[str, Any] | None = None,
             turn_id: str | None = None) -> TurnDraft:
        return cls(Role.TOOL, content, name=name, tool_call_id=tool_call_id,
                   tool_calls=tool_calls, metadata=metadata, turn_id=turn_id)

    @classmethod
    def system(cls, content: str, *, name: str | None = None,
               tool_call_id: str | None = None, tool_calls: Sequence[ToolCall] = (),
               metadata: Mapping[str, Any] | None = None,
               turn_id: str | None = None) -> TurnDraft:
        return cls(Role.SYSTEM, content, name=name, tool_call_id=tool_call_id,
                   tool_calls=tool_calls, metadata=metadata, turn_id=turn_id)

    def validate(self) -> None:
        calls = self.role is Role.ASSISTANT and bool(self.tool_calls)
        # An assistant turn that only calls tools may be empty; nothing else may.
        check_text(self.content, "turn.content", max_bytes=MAX_CONTENT_BYTES,
                   allow_empty=calls)
        if self.name is not None:
            check_text(self.name, "turn.name", max_bytes=256)
        if self.turn_id is not None:
            check_identifier(self.turn_id, "turn.turn_id")
        if self.role is Role.TOOL:
            if self.tool_call_id is None:
                raise MemoryValidationError("a tool turn names the call it answers",
                                            field="turn.tool_call_id")
            check_identifier(self.tool_call_id, "turn.tool_call_id")
        elif self.tool_call_id is not None:
            raise MemoryValidationError("only a tool turn answers a call",
                                        field="turn.tool_call_id")
        if self.tool_calls and self.role is not Role.ASSISTANT:
            raise MemoryValidationError("only an assistant turn calls tools",
                                        field="turn.tool_calls")
        if len(self.tool_calls) > MAX_TOOL_CALLS:
            raise MemoryValidationError(f"a turn makes at most {MAX_TOOL_CALLS} tool calls",
                                        field="turn.tool_calls")
        for i, call in enumerate(self.tool_calls):
            if not isinstance(call, ToolCall):
                raise MemoryValidationError("tool_calls must hold ToolCall values",
                                            field=f"turn.tool_calls[{i}]")
            call.validate(f"turn.tool_calls[{i}]")
        check_metadata_budget(self.metadata, {})

    def body(self) -> dict[str, Any]:
        """Everything but the id, as plain JSON (what "the same turn" compares)."""
        return {
            "role": self.role.value, "content": self.content, "name": self.name,
            "tool_call_id": self.tool_call_id,
            "tool_calls": [[c.id, c.name, c.arguments] for c in self.tool_calls],
            "metadata": json_copy(dict(self.metadata)),
        }

    def fingerprint(self) -> str:
        return "sha256:" + hashlib.sha256(canonical_json(self.body()).encode()).hexdigest()


@attrs.frozen(slots=True)
class Turn(Audited):
    """A stored turn. ``seq`` counts from 1 within its session and never repeats."""

    turn_id: str
    seq: int
    scope_hash: str
    role: Role
    content: str
    created_at: float
    name: str | None = None
    tool_call_id: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    metadata: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_mapping)

    def draft(self) -> TurnDraft:
        return TurnDraft(self.role, self.content, self.name, self.tool_call_id,
                         self.tool_calls, self.metadata, self.turn_id)

    def audit(self, allowed: Set[str]) -> Checked[Turn]:
        if self.scope_hash not in allowed:
            from governed_memory.errors import MemoryStorageError

            raise MemoryStorageError("the turn store answered for another scope")
        return summarised(self, record_ids=(self.turn_id,), versions=(self.seq,), count=1)


@attrs.frozen(slots=True)
class TurnPage(Audited):
    """Turns of one session, oldest first."""

    scope_hash: str
    turns: tuple[Turn, ...]

    def audit(self, allowed: Set[str]) -> Checked[TurnPage]:
        kept = tuple(t for t in self.turns if t.scope_hash in allowed
                     and self.scope_hash in allowed)
        stray = tuple(t.turn_id for t in self.turns if t not in kept)
        return summarised(attrs.evolve(self, turns=kept),
                         record_ids=tuple(t.turn_id for t in kept),
                         versions=tuple(t.seq for t in kept), count=len(kept), stray=stray)


def new_turn(scope: Scope, draft: TurnDraft, seq: int, now: float) -> Turn:
    return Turn(turn_id=draft.turn_id or new_id(), seq=seq, scope_hash=scope.scope_hash,
                role=draft.role, content=draft.content, created_at=now, name=draft.name,
                tool_call_id=draft.tool_call_id, tool_calls=draft.tool_calls,
                metadata=draft.metadata)


def replayed(existing: Turn, draft: TurnDraft) -> Turn:
    """The stored turn for a retried append, or a conflict if the name was reused."""
    if existing.draft().fingerprint() != draft.fingerprint():
        raise MemoryConflictError("turn_id already names a different turn in this session")
    return existing


@runtime_checkable
class TurnStore(Protocol):
    """Where the conversation tier keeps turns. Every method takes the exact session
    scope; a store never reads across scopes. Stores register through
    ``register_turn_stores``."""

    name: str
    durable: bool

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def append(self, scope: Scope, draft: TurnDraft, now: float) -> Turn:
        """Store one validated turn as the session's next; a named turn already stored
        is returned as it is (``MemoryConflictError`` if it differs)."""
        ...

    async def recent(self, scope: Scope, limit: int) -> tuple[Turn, ...]:
        """The newest ``limit`` turns, oldest first."""
        ...

    async def after(self, scope: Scope, after_seq: int, limit: int) -> tuple[Turn, ...]:
        """Up to ``limit`` turns with ``seq > after_seq``, oldest first."""
        ...

    async def clear(self, scope: Scope) -> int:
        """Remove every turn of the session; returns how many."""
        ...

    async def delete_user(self, tenant_id: str, user_id: str) -> int:
        """Remove every turn of one user in one tenant (erasure); returns how many."""
        ...


@attrs.define
class _Session:
    tenant_id: str
    user_id: str | None
    turns: list[Turn] = attrs.field(factory=list)
    by_id: dict[str, Turn] = attrs.field(factory=dict)
    last_seq: int = 0


class InMemoryTurnStore:
    """Turns in a dict: for tests and single-process demos (``durable = False``).

    Sequence numbers keep counting after a clear, as the durable stores' do, so a
    summary frontier from before a clear can never cover a later turn.
    """

    name = "memory"
    durable = False

    def __init__(self) -> None:
        self._sessions: dict[str, _Session] = {}

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def append(self, scope: Scope, draft: TurnDraft, now: float) -> Turn:
        draft.validate()
        session = self._sessions.setdefault(
            scope.scope_hash, _Session(scope.tenant_id, scope.user_id))
        if draft.turn_id is not None and draft.turn_id in session.by_id:
            return replayed(session.by_id[draft.turn_id], draft)
        session.last_seq += 1
        turn = new_turn(scope, draft, session.last_seq, now)
        session.turns.append(turn)
        session.by_id[turn.turn_id] = turn
        return turn

    async def recent(self, scope: Scope, limit: int) -> tuple[Turn, ...]:
        session = self._sessions.get(scope.scope_hash)
        return () if session is None else tuple(session.turns[-limit:])

    async def after(self, scope: Scope, after_seq: int, limit: int) -> tuple[Turn, ...]:
        session = self._sessions.get(scope.scope_hash)
        if session is None:
            return ()
        return tuple(t for t in session.turns if t.seq > after_seq)[:limit]

    async def clear(self, scope: Scope) -> int:
        session = self._sessions.get(scope.scope_hash)
        if session is None:
            return 0
        removed = len(session.turns)
        session.turns.clear()
        session.by_id.clear()
        return removed

    async def delete_user(self, tenant_id: str, user_id: str) -> int:
        removed = 0
        for key, session in list(self._sessions.items()):
            if (session.tenant_id, session.user_id) == (tenant_id, user_id):
                removed += len(session.turns)
                del self._sessions[key]
        return removed
