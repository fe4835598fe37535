"""``remember_conversation``: the run's conversation turned into governed memories, with
the messages injected from the graph state (the model passes nothing), as the run's
principal, idempotent on the messages' ids."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from governed_memory import GovernedMemoryManager, Principal, Scope
from governed_memory.clock import ManualClock
from governed_memory.events import InMemoryEventSink
from governed_memory.language_models import ModelCall, ScriptedModel
from governed_memory.sync import SyncMemoryManager
from governed_memory.tiers.turns import Role
from governed_memory_langgraph import conversation_tool, messages_from_langchain
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph_support import ALICE, BOB, native_manager

ALICE_SCOPE = Scope("acme", user_id="alice")


def responder(call: ModelCall) -> Mapping[str, Any]:
    if call.task == "remember":
        return {"facts": [{"content": "Alice prefers green tea", "type": "preference",
                           "importance": 0.8, "confidence": 0.9, "turns": [int(n)]}
                          for n, text in re.findall(r"^\[(\d+)\] (\w+: .*)$", call.user, re.M)
                          if "I prefer green tea" in text]}
    return {"decisions": []}


def with_model(manager: GovernedMemoryManager) -> GovernedMemoryManager:
    manager.language_model = ScriptedModel(responder=responder)
    return manager


def test_messages_from_langchain() -> None:
    converted = messages_from_langchain([
        SystemMessage("be brief", id="m0"), HumanMessage("I prefer green tea", id="m1"),
        AIMessage([{"type": "text", "text": "Noted"}, {"type": "image_url"}], id="m2"),
        ToolMessage("sunny", tool_call_id="c1"),
    ])
    assert [(m.role, m.content, m.turn_id) for m in converted] == [
        (Role.SYSTEM, "be brief", "m0"), (Role.USER, "I prefer green tea", "m1"),
        (Role.ASSISTANT, "Noted", "m2"), (Role.TOOL, "sunny", None)]


def test_the_tool_remembers_once(clock: ManualClock, sink: InMemoryEventSink) -> None:
    with SyncMemoryManager(with_model(native_manager(clock, sink))) as memory:
        tool = conversation_tool(memory, principal=ALICE)
        assert set(tool.tool_call_schema.model_json_schema().get("properties", {})) == set()
        messages = [HumanMessage("I prefer green tea", id="h1"), AIMessage("Noted.", id="a1")]
        done = json.loads(tool.invoke({"messages": messages}))
        assert [d["decision"] for d in done["remembered"]] == ["added"]
        assert "green tea" not in json.dumps(done)  # what was done, not the content
        again = json.loads(tool.invoke({"messages": messages}))
        assert [d["decision"] for d in again["remembered"]] == ["unchanged"]
        [record] = memory.list(ALICE, ALICE_SCOPE).items
        assert record.provenance.source_id == "h1"


def test_without_a_model_the_tool_says_the_code(clock: ManualClock,
                                                sink: InMemoryEventSink) -> None:
    with SyncMemoryManager(native_manager(clock, sink)) as memory:
        tool = conversation_tool(memory, principal=ALICE)
        refused = json.loads(tool.invoke({"messages": [HumanMessage("hi", id="h1")]}))
        assert refused["code"] == "configuration"


@dataclass
class Context:
    principal: Principal


def test_in_an_agent_the_state_is_injected_and_the_run_acts(
        clock: ManualClock, sink: InMemoryEventSink) -> None:
    with SyncMemoryManager(with_model(native_manager(clock, sink))) as memory:
        tool = conversation_tool(memory)  # built once, for every user
        model = FakeMessagesListChatModel(responses=[
            AIMessage("", tool_calls=[{"name": "remember_conversation", "args": {},
                                       "id": "c1"}]),
            AIMessage("I will remember that.")])

        def think(state: MessagesState) -> dict[str, Any]:
            return {"messages": [model.invoke(state["messages"])]}

        graph = StateGraph(MessagesState, context_schema=Context)
        graph.add_node("agent", think)
        graph.add_node("tools", ToolNode([tool]))
        graph.add_edge(START, "agent")
        graph.add_conditional_edges("agent", tools_condition)
        graph.add_edge("tools", "agent")
        state = graph.compile().invoke({"messages": [HumanMessage("I prefer green tea")]},
                                       context=Context(ALICE))
        [result] = [m for m in state["messages"] if isinstance(m, ToolMessage)]
        assert [d["decision"] for d in json.loads(str(result.content))["remembered"]] == [
            "added"]
        [record] = memory.list(ALICE, ALICE_SCOPE).items
        assert record.content == "Alice prefers green tea"
        assert record.provenance.source_id == state["messages"][0].id  # the state's id
        assert memory.list(BOB, Scope("acme", user_id="bob")).items == ()


async def test_the_async_tool(clock: ManualClock, sink: InMemoryEventSink) -> None:
    async with with_model(native_manager(clock, sink)) as manager:
        tool = conversation_tool(manager, principal=ALICE)
        done = json.loads(await tool.ainvoke(
            {"messages": [HumanMessage("I prefer green tea", id="h1")]}))
        assert [d["decision"] for d in done["remembered"]] == ["added"]
