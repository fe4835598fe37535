"""The LangChain retriever and the remember/recall/forget tools, alone and in an agent."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import pytest
from governed_memory import (
    GovernedMemoryManager,
    MemoryType,
    Principal,
    RecordStatus,
    Scope,
)
from governed_memory.errors import MemoryConfigurationError
from governed_memory.sync import SyncMemoryManager
from governed_memory.turncontext.render import CLOSE, OPEN
from governed_memory_langgraph import GovernedRetriever, PrincipalNotBoundError, memory_tools
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph_support import ALICE, BOB

ALICE_SCOPE = Scope("acme", user_id="alice")


def test_the_retriever_is_a_governed_search(sync_manager: SyncMemoryManager) -> None:
    sync_manager.add(ALICE, ALICE_SCOPE, "Alice flies with window seats", key="seat",
                     memory_type="preference", metadata={"topic": "travel"})
    sync_manager.add(ALICE, ALICE_SCOPE, "Alice's seat at work is by the door")
    sync_manager.add(BOB, Scope("acme", user_id="bob"), "Bob prefers aisle seats")

    retriever = GovernedRetriever(manager=sync_manager, principal=ALICE, k=5)
    docs = retriever.invoke("seat seats")
    assert {d.page_content for d in docs} == {"Alice flies with window seats",
                                              "Alice's seat at work is by the door"}
    top = next(d for d in docs if d.metadata["key"] == "seat")
    assert top.metadata["memory_type"] == "preference"
    assert top.metadata["scope"] == {"tenant_id": "acme", "user_id": "alice"}
    assert top.metadata["metadata"] == {"topic": "travel"}
    assert top.id == top.metadata["id"]

    filtered = GovernedRetriever(manager=sync_manager, principal=ALICE,
                                 metadata_filter={"topic": "travel"})
    assert [d.page_content for d in filtered.invoke("seat seats")] == [
        "Alice flies with window seats"]
    typed = GovernedRetriever(manager=sync_manager, principal=ALICE,
                              memory_types=[MemoryType.NOTE])
    assert [d.page_content for d in typed.invoke("seat seats")] == [
        "Alice's seat at work is by the door"]
    assert asyncio.run(retriever.ainvoke("seat seats")) == docs

    with pytest.raises(PrincipalNotBoundError):
        GovernedRetriever(manager=sync_manager).invoke("seats")


async def test_the_retriever_over_the_async_manager(manager: GovernedMemoryManager) -> None:
    await manager.add(ALICE, ALICE_SCOPE, "Alice reads science fiction")
    project = Scope("acme", project_id="books")
    retriever = GovernedRetriever(
        manager=manager, principal=ALICE,
        scopes=lambda p: [Scope(p.tenant_id, user_id=p.user_id), project])
    docs = await retriever.ainvoke("science fiction")
    assert [d.page_content for d in docs] == ["Alice reads science fiction"]
    with pytest.raises(RuntimeError, match="deadlock"):
        retriever.invoke("science")
    other = GovernedRetriever(manager=manager, principal=BOB)
    assert await other.ainvoke("science fiction") == []


def test_the_sync_retriever_needs_a_running_loop_for_the_async_manager(
        clock: Any, sink: Any) -> None:
    from langgraph_support import native_manager

    retriever = GovernedRetriever(manager=native_manager(clock, sink), principal=ALICE)
    with pytest.raises(MemoryConfigurationError):
        retriever.invoke("anything")


def test_remember_recall_forget(sync_manager: SyncMemoryManager) -> None:
    remember, recall, forget = memory_tools(sync_manager, principal=ALICE)
    done = json.loads(remember.invoke({"content": "Alice's dog is called <b>Rex</b>",
                                       "kind": "fact"}))
    assert done["memory_type"] == "fact" and done["status"] == "active"
    record = sync_manager.get(ALICE, ALICE_SCOPE, done["remembered"])
    assert record.provenance.source_type == "agent"

    block = recall.invoke({"query": "dog"})
    lines = block.splitlines()
    assert lines[0] == OPEN and lines[-1] == CLOSE
    assert "<b>" not in block and "\\u003cb\\u003eRex" in block  # data, escaped
    assert json.loads(lines[2])["id"] == done["remembered"]
    assert recall.invoke({"query": "cat"}).startswith("No memories matched")

    assert json.loads(forget.invoke({"memory_id": done["remembered"]}))["forgot"] == (
        done["remembered"])
    assert recall.invoke({"query": "dog"}).startswith("No memories matched")

    # Refusals reach the model as the stable code, not a traceback.
    refused = json.loads(forget.invoke({"memory_id": "01HZZZZZZZZZZZZZZZZZZZZZZZ"}))
    assert refused["code"] == "not_found"
    assert json.loads(recall.invoke({"query": "  "}))["code"] == "validation"
    elsewhere = memory_tools(sync_manager, principal=ALICE, scope=Scope("acme", user_id="bob"))
    assert json.loads(elsewhere[0].invoke({"content": "planted"}))["code"] == "scope_denied"


@dataclass
class Context:
    principal: Principal


def call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


def tool_agent(tools: list[BaseTool], script: list[AIMessage]) -> Any:
    model = FakeMessagesListChatModel(responses=script)

    def think(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState, context_schema=Context)
    graph.add_node("agent", think)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile()


def test_the_tools_in_an_agent_act_for_the_runs_principal(
        sync_manager: SyncMemoryManager) -> None:
    tools = memory_tools(sync_manager, source_type="chat")  # built once, for every user
    script = [call("remember", {"content": "Prefers tea", "kind": "preference"}, "r1"),
              call("recall", {"query": "tea"}, "r2"),
              AIMessage("Tea it is.")]
    alice_state = tool_agent(tools, script).invoke(
        {"messages": [HumanMessage("I prefer tea")]}, context=Context(ALICE))
    bob_state = tool_agent(tools, [call("recall", {"query": "tea"}, "b1"),
                                   AIMessage("No idea.")]).invoke(
        {"messages": [HumanMessage("what do I prefer")]}, context=Context(BOB))

    alice_results = [m.content for m in alice_state["messages"] if isinstance(m, ToolMessage)]
    assert json.loads(str(alice_results[0]))["status"] == RecordStatus.ACTIVE.value
    assert "Prefers tea" in str(alice_results[1])
    bob_results = [m.content for m in bob_state["messages"] if isinstance(m, ToolMessage)]
    assert str(bob_results[0]).startswith("No memories matched")
    [record] = sync_manager.list(ALICE, ALICE_SCOPE).items
    assert record.memory_type is MemoryType.PREFERENCE
    assert record.provenance.source_type == "chat"
    with pytest.raises(PrincipalNotBoundError):
        tools[1].invoke({"query": "tea"})  # outside any run, with none fixed


async def test_the_async_tools(manager: GovernedMemoryManager) -> None:
    remember, recall, _ = memory_tools(manager, principal=ALICE)
    await remember.ainvoke({"content": "Alice plays the cello"})
    assert "cello" in await recall.ainvoke({"query": "cello", "limit": 1})
