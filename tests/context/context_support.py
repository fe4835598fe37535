"""Helpers for the context tests: a provider whose search or listing can be made to
fail, a scripted model routed by task, and conversation helpers."""

from __future__ import annotations

import json
from typing import Any

import attrs
from governed_memory import Principal, PrincipalKind, Scope
from governed_memory.errors import MemoryStorageError
from governed_memory.language_models import ModelCall, ScriptedModel
from governed_memory.records import SignalScore
from governed_memory.tiers import MemoryTiers, Role, ToolCall, TurnDraft

ALICE = Principal("user:alice", PrincipalKind.USER, "acme", "alice")
BOB = Principal("user:bob", PrincipalKind.USER, "acme", "bob")
OWNER = Scope("acme", project_id="handbook", user_id="alice", session_id="s1")
"""Alice, working in the handbook project, in session s1: the owner a turn is built for."""
# The exact scope of each level of OWNER, spelled out (the reference's owner scoping):
# a user's memories and sessions follow them from project to project; only PROJECT
# keys on the project.
SESSION_SCOPE = Scope("acme", user_id="alice", session_id="s1")
USER_SCOPE = Scope("acme", user_id="alice")
PROJECT_SCOPE = Scope("acme", project_id="handbook")
TENANT_SCOPE = Scope("acme")
IN_OTHER_PROJECT = OWNER.replace(project_id="billing", session_id="s2")
"""Alice again, in another project and a later session."""


class FlakyProvider:
    """Delegates to a real provider; ``fail`` names operations that raise instead."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.fail: set[str] = set()
        self.calls: list[str] = []
        self.adds_left: int | None = None
        """Adds that still succeed before every further add fails (None: no limit)."""
        self.similarity: float | None = None
        """When set, every search hit carries a ``vector_cosine`` signal of this value
        (a provider that searches by vector)."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def search(self, request: Any, ctx: Any) -> Any:
        self.calls.append("search")
        if "search" in self.fail:
            raise MemoryStorageError("index down")
        result = await self._inner.search(request, ctx)
        if self.similarity is not None:
            result = attrs.evolve(result, hits=tuple(
                attrs.evolve(h, explanation=attrs.evolve(h.explanation, signals=(
                    *h.explanation.signals,
                    SignalScore("vector_cosine", self.similarity, 1))))
                for h in result.hits))
        return result

    async def list(self, request: Any, ctx: Any) -> Any:
        self.calls.append("list")
        if "list" in self.fail:
            raise MemoryStorageError("repository down")
        return await self._inner.list(request, ctx)

    async def get(self, request: Any, ctx: Any) -> Any:
        if "get" in self.fail:
            raise MemoryStorageError("repository down")
        return await self._inner.get(request, ctx)

    async def add(self, request: Any, ctx: Any) -> Any:
        if "add" in self.fail or self.adds_left == 0:
            raise MemoryStorageError("repository down")
        if self.adds_left is not None:
            self.adds_left -= 1
        return await self._inner.add(request, ctx)

    async def update(self, request: Any, ctx: Any) -> Any:
        if "update" in self.fail:
            raise MemoryStorageError("repository down")
        return await self._inner.update(request, ctx)


def summary_of(call: ModelCall) -> str:
    """A deterministic summary naming the turns it folded (and the prior summary)."""
    prior = "none"
    if "Prior summary:\n" in call.user:
        prior = call.user.split("Prior summary:\n", 1)[1].split("\n\nNew turns:", 1)[0]
    lines = call.user.split("<conversation>\n", 1)[1].split("\n</conversation>", 1)[0]
    count = len([ln for ln in lines.splitlines() if ":" in ln])
    return f"[{count} turns folded; before: {prior[:60]}]"


def routed(condense: Any = None, extract: Any = None) -> ScriptedModel:
    """A scripted model answering each task from a function of the call (or a value)."""

    def respond(call: ModelCall) -> Any:
        if call.task == "summarize":
            return summary_of(call)
        if call.task == "condense":
            value = condense(call) if callable(condense) else condense
            if value is None:
                question = json.loads(call.user.rsplit("Latest question:\n", 1)[1])
                return {"query": question, "wanted_types": []} if call.structured else question
            return value
        if call.task == "extract":
            value = extract(call) if callable(extract) else extract
            return value if value is not None else {"facts": []}
        raise AssertionError(f"unexpected task {call.task}")

    return ScriptedModel(responder=respond)


async def converse(tiers: MemoryTiers, pairs: int, *, words: int = 20,
                   owner: Scope = OWNER, start: int = 0) -> None:
    for i in range(start, start + pairs):
        text = " ".join(f"w{i}x{j}" for j in range(words))
        await tiers.append(ALICE, owner, TurnDraft.user(f"question {i}: {text}"))
        await tiers.append(ALICE, owner, TurnDraft.assistant(f"answer {i}: {text}"))


async def tool_chain(tiers: MemoryTiers, calls: int, *, owner: Scope = OWNER,
                     size: int = 40) -> None:
    await tiers.append(ALICE, owner, TurnDraft.user("run the whole pipeline please"))
    for i in range(calls):
        call = ToolCall(f"call_{i}", "step", json.dumps({"i": i}))
        await tiers.append(ALICE, owner, TurnDraft.assistant("", tool_calls=(call,)))
        await tiers.append(ALICE, owner, TurnDraft.tool(f"call_{i}", "r" * size))
    await tiers.append(ALICE, owner, TurnDraft.assistant("all steps done"))


def roles(turns: Any) -> list[Role]:
    return [t.role for t in turns]
