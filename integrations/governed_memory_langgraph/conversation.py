"""``remember_conversation``: the agent's conversation turned into governed memories.

:func:`conversation_tool` is a tool the model calls with no arguments ("remember what
we talked about"): LangGraph's ``ToolNode`` injects the graph state's ``messages``
(``InjectedState``), so the model never writes the conversation it asks to remember,
nor names who it acts for or where. The tool runs the manager's ``remember`` as the
principal of the run, in the scope derived from it (by default the principal's user
scope): each fact decided against what that scope holds, every write its own governed
operation, idempotent on the messages' ids (LangGraph gives every message of its state
one), so calling it again on the same conversation writes nothing twice.

What it returns goes into the model's context, so, like ``remember`` of
:func:`~governed_memory_langgraph.memory_tools`, it says what was done (each decision,
its record id and reason), never the content back; a refusal of the whole call is the
error's stable ``code``. :func:`messages_from_langchain` is the conversion alone, for a
graph node that remembers after each turn without asking the model.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine, Sequence
from typing import Annotated, Any

from governed_memory import GovernedMemoryError, GovernedMemoryManager, Principal
from governed_memory.remembering import (
    DEFAULT_CONFIDENCE_FLOOR,
    DEFAULT_WINDOW,
    Message,
    RememberResult,
)
from governed_memory.sync import SyncMemoryManager
from governed_memory.tiers.turns import Role
from langchain_core.messages import AnyMessage, BaseMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.prebuilt import InjectedState

from governed_memory_langgraph.access import MemoryAccess, ScopeChoice
from governed_memory_langgraph.ports import MemoryPort
from governed_memory_langgraph.principals import PrincipalFrom
from governed_memory_langgraph.tools import tool_problem

__all__ = ["conversation_tool", "messages_from_langchain"]

_ROLES = {"human": Role.USER, "ai": Role.ASSISTANT, "system": Role.SYSTEM,
          "tool": Role.TOOL}


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    parts = [block if isinstance(block, str) else str(block.get("text", ""))
             for block in content
             if isinstance(block, str) or (isinstance(block, dict)
                                            and block.get("type") == "text")]
    return "\n".join(part for part in parts if part)


def messages_from_langchain(messages: Sequence[BaseMessage]) -> list[Message]:
    """LangChain messages as ``remember`` reads them: human, AI, system and tool
    messages by role (any other kind is left out), their text, and their ``id`` as the
    turn id (the key that makes a second call write nothing twice)."""
    out: list[Message] = []
    for message in messages:
        role = _ROLES.get(message.type)
        if role is None:
            continue
        out.append(Message(role=role, content=_text(message),
                           turn_id=message.id if isinstance(message.id, str) and message.id
                           else None))
    return out


def _answer(result: RememberResult) -> str:
    return json.dumps({"remembered": [d.summary() for d in result.decisions]},
                      sort_keys=True)


def conversation_tool(
    manager: GovernedMemoryManager | SyncMemoryManager,
    *,
    principal: Principal | None = None,
    principal_key: str = "principal",
    principal_from: PrincipalFrom | None = None,
    scope: ScopeChoice | None = None,
    window: int = DEFAULT_WINDOW,
    confidence_floor: float = DEFAULT_CONFIDENCE_FLOOR,
    name: str = "remember_conversation",
) -> BaseTool:
    """The ``remember_conversation`` tool over ``manager`` (which needs a language
    model: the profile's ``[stores.language_model]``).

    ``scope`` is where the memories go (a scope or a function of the principal;
    default: the principal's user scope); ``principal`` fixes who acts, else each call's
    run binds it (``governed_memory_langgraph.principals``). ``window`` and
    ``confidence_floor`` are ``remember``'s."""
    access = MemoryAccess.build(manager, principal=principal, principal_key=principal_key,
                                principal_from=principal_from, scope=scope)

    def step(messages: Sequence[BaseMessage]
             ) -> Callable[[MemoryPort], Coroutine[Any, Any, str]]:
        converted = messages_from_langchain(messages)
        who = access.principal()  # a host's mistake: raised, not told the model

        async def run(port: MemoryPort) -> str:
            result = await port.remember(who, access.scope_for(who), converted,
                                         window=window, confidence_floor=confidence_floor)
            return _answer(result)
        return run

    def remember_conversation(
            messages: Annotated[list[AnyMessage], InjectedState("messages")]) -> str:
        operation = step(messages)
        try:
            return access.call(operation)
        except GovernedMemoryError as exc:
            raise tool_problem(exc) from exc

    async def aremember_conversation(
            messages: Annotated[list[AnyMessage], InjectedState("messages")]) -> str:
        operation = step(messages)
        try:
            return await access.acall(operation)
        except GovernedMemoryError as exc:
            raise tool_problem(exc) from exc

    return StructuredTool.from_function(
        remember_conversation, aremember_conversation, name=name, handle_tool_error=True,
        description=("Remember the durable facts of this conversation (preferences, "
                     "decisions, facts about the user or the task) for later "
                     "conversations. Takes no arguments."))
