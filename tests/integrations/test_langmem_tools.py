"""LangMem's memory tools running on the governed store inside a real tool-calling graph.

LangMem formats its namespace from ``config["configurable"]`` (``{langgraph_user_id}``),
values a client sends; the store takes the principal from the run's context, so those
values can organise a principal's memories but never reach another user's.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from typing import Any

import pytest
from governed_memory import GovernedMemoryManager, MemoryScopeError, Principal, Scope
from governed_memory.sync import SyncMemoryManager
from governed_memory_langgraph import GovernedStore, record_key
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import BaseTool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph_support import ALICE, BOB

with warnings.catch_warnings():  # trustcall, LangMem's dependency, imports a deprecated name
    warnings.simplefilter("ignore", DeprecationWarning)
    from langmem import create_manage_memory_tool, create_search_memory_tool

NAMESPACE = ("memories", "{langgraph_user_id}")


@dataclass
class Context:
    principal: Principal


def call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


def agent(store: GovernedStore, tools: list[BaseTool], script: list[AIMessage]) -> Any:
    """The model node calls the (fake) model; ToolNode runs the tools it asks for."""
    model = FakeMessagesListChatModel(responses=script)

    def think(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    async def athink(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState, context_schema=Context)
    graph.add_node("agent", RunnableLambda(think, afunc=athink))
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(store=store)


def langmem_tools() -> list[BaseTool]:
    return [create_manage_memory_tool(namespace=NAMESPACE),
            create_search_memory_tool(namespace=NAMESPACE)]


def script_create_then_search() -> list[AIMessage]:
    return [
        call("manage_memory", {"content": "Alice is allergic to peanuts",
                               "action": "create"}, "c1"),
        call("search_memory", {"query": "peanuts allergy"}, "c2"),
        AIMessage("You are allergic to peanuts."),
    ]


def tool_results(state: dict[str, Any]) -> list[str]:
    return [str(m.content) for m in state["messages"] if isinstance(m, ToolMessage)]


def test_langmem_manage_and_search_on_the_governed_store(
        sync_manager: SyncMemoryManager) -> None:
    store = GovernedStore(sync_manager)
    app = agent(store, langmem_tools(), script_create_then_search())
    config = {"configurable": {"langgraph_user_id": "alice"}}
    state = app.invoke({"messages": [HumanMessage("I'm allergic to peanuts")]}, config,
                       context=Context(ALICE))
    created, found = tool_results(state)
    assert created.startswith("created memory ")
    memory_id = created.removeprefix("created memory ")
    hits = json.loads(found)
    assert [h["value"] for h in hits] == [{"content": "Alice is allergic to peanuts"}]
    assert hits[0]["namespace"] == ["memories", "alice"]

    # The memory LangMem wrote is an ordinary governed memory of Alice's.
    record = sync_manager.get(ALICE, Scope("acme", user_id="alice"),
                              key=record_key(("memories", "alice"), memory_id))
    assert record.content == "Alice is allergic to peanuts"

    # Update and delete through the same tool.
    updater = agent(store, langmem_tools(), [
        call("manage_memory", {"content": "Alice is allergic to peanuts and cashews",
                               "action": "update", "id": memory_id}, "u1"),
        call("manage_memory", {"action": "delete", "id": memory_id}, "d1"),
        AIMessage("Done."),
    ])
    updater.invoke({"messages": [HumanMessage("update it, then forget it")]}, config,
                   context=Context(ALICE))
    versions = sync_manager.history(ALICE, Scope("acme", user_id="alice"), record.id)
    assert [v.operation.value for v in versions] == ["add", "update", "delete"]
    assert store.bind(ALICE).get(("memories", "alice"), memory_id) is None


def test_a_client_chosen_user_id_cannot_reach_another_user(
        sync_manager: SyncMemoryManager) -> None:
    store = GovernedStore(sync_manager)
    agent(store, langmem_tools(), script_create_then_search()).invoke(
        {"messages": [HumanMessage("remember")]},
        {"configurable": {"langgraph_user_id": "alice"}}, context=Context(ALICE))
    # Bob's run claims Alice's id in the config: the namespace says "alice", the
    # principal is Bob's, and with the default mapping that is Bob's own scope.
    state = agent(store, langmem_tools(), [
        call("search_memory", {"query": "peanuts"}, "s1"), AIMessage("Nothing.")]).invoke(
        {"messages": [HumanMessage("what is alice allergic to")]},
        {"configurable": {"langgraph_user_id": "alice"}}, context=Context(BOB))
    assert json.loads(tool_results(state)[0]) == []

    # With the label mapped to the user dimension, the same claim is refused outright.
    strict = GovernedStore(sync_manager, namespaces=[("memories", "{user_id}")])
    with pytest.raises(MemoryScopeError):
        agent(strict, langmem_tools(), [
            call("search_memory", {"query": "peanuts"}, "s1"), AIMessage("x")]).invoke(
            {"messages": [HumanMessage("what is alice allergic to")]},
            {"configurable": {"langgraph_user_id": "alice"}}, context=Context(BOB))
    state = agent(strict, langmem_tools(), [
        call("search_memory", {"query": "peanuts"}, "s1"), AIMessage("x")]).invoke(
        {"messages": [HumanMessage("what am I allergic to")]},
        {"configurable": {"langgraph_user_id": "alice"}}, context=Context(ALICE))
    assert [h["value"]["content"] for h in json.loads(tool_results(state)[0])] == [
        "Alice is allergic to peanuts"]


async def test_langmem_async_tools_on_the_async_manager(manager: GovernedMemoryManager
                                                        ) -> None:
    app = agent(GovernedStore(manager), langmem_tools(), script_create_then_search())
    state = await app.ainvoke({"messages": [HumanMessage("I'm allergic to peanuts")]},
                              {"configurable": {"langgraph_user_id": "alice"}},
                              context=Context(ALICE))
    created, found = tool_results(state)
    assert created.startswith("created memory ")
    assert [h["value"]["content"] for h in json.loads(found)] == [
        "Alice is allergic to peanuts"]
