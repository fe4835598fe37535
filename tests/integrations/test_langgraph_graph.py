"""A real LangGraph graph whose nodes use the governed store through ``runtime.store``.

The chat model is langchain_core's fake (no network); the principal rides in the run's
context, set by the host per run, while the namespace is whatever the graph chooses.
"""

from __future__ import annotations

import asyncio
import operator
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

import pytest
from governed_memory import GovernedMemoryManager, MemoryScopeError, Principal, Scope
from governed_memory.events import InMemoryEventSink
from governed_memory.sync import SyncMemoryManager
from governed_memory_langgraph import GovernedStore, PrincipalNotBoundError
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.runtime import Runtime
from langgraph_support import ALICE, BOB


@dataclass
class Context:
    principal: Principal | None = None


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    recalled: Annotated[list[str], operator.add]


NAMESPACE = ("memories",)


def build_sync(store: GovernedStore, model: FakeMessagesListChatModel) -> Any:
    def recall(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        assert runtime.store is not None
        question = state["messages"][-1].content
        hits = runtime.store.search(NAMESPACE, query=str(question), limit=3)
        return {"recalled": [h.value["content"] for h in hits]}

    def respond(state: State) -> dict[str, Any]:
        system = SystemMessage("Memories: " + "; ".join(state["recalled"]))
        return {"messages": [model.invoke([system, *state["messages"]])]}

    def remember(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        assert runtime.store is not None
        said = state["messages"][-2]
        runtime.store.put(NAMESPACE, f"m{len(state['messages'])}", {"content": said.content})
        return {}

    graph = StateGraph(State, context_schema=Context)
    graph.add_node("recall", recall)
    graph.add_node("respond", respond)
    graph.add_node("remember", remember)
    graph.add_edge(START, "recall")
    graph.add_edge("recall", "respond")
    graph.add_edge("respond", "remember")
    graph.add_edge("remember", END)
    return graph.compile(store=store, checkpointer=InMemorySaver())


def fake_model(*answers: str) -> FakeMessagesListChatModel:
    return FakeMessagesListChatModel(responses=[AIMessage(a) for a in answers])


def test_a_sync_graph_remembers_per_principal(sync_manager: SyncMemoryManager,
                                             sink: InMemoryEventSink) -> None:
    store = GovernedStore(sync_manager)
    graph = build_sync(store, fake_model("Noted.", "You like green tea.", "I know nothing."))

    def turn(principal: Principal, thread: str, text: str) -> State:
        return graph.invoke(  # type: ignore[no-any-return]
            {"messages": [HumanMessage(text)], "recalled": []},
            {"configurable": {"thread_id": thread}}, context=Context(principal))

    turn(ALICE, "a1", "I like green tea")
    second = turn(ALICE, "a1", "what tea do I like")
    assert second["recalled"] == ["I like green tea"]
    # Bob runs the same graph on the same namespace and sees none of Alice's memories.
    third = turn(BOB, "b1", "what tea do I like")
    assert third["recalled"] == []

    alice_records = sync_manager.list(ALICE, Scope("acme", user_id="alice")).items
    assert [r.content for r in alice_records] == ["I like green tea", "what tea do I like"]
    assert alice_records[0].provenance.session_id == "a1"  # the thread, as evidence
    bob_records = sync_manager.list(BOB, Scope("acme", user_id="bob")).items
    assert [r.content for r in bob_records] == ["what tea do I like"]
    assert {e.principal_id for e in sink.events} == {ALICE.principal_id, BOB.principal_id}


def test_a_run_without_a_principal_fails_closed(sync_manager: SyncMemoryManager) -> None:
    graph = build_sync(GovernedStore(sync_manager), fake_model("x"))
    with pytest.raises(PrincipalNotBoundError):
        graph.invoke({"messages": [HumanMessage("hello")], "recalled": []},
                     {"configurable": {"thread_id": "t"}}, context=Context(None))
    with pytest.raises(PrincipalNotBoundError, match="dict"):  # JSON cannot forge one
        graph.invoke({"messages": [HumanMessage("hello")], "recalled": []},
                     {"configurable": {"thread_id": "t",
                                       "principal": {"principal_id": "user:alice"}}})


def test_the_config_may_carry_the_principal_and_two_must_agree(
        sync_manager: SyncMemoryManager) -> None:
    graph = build_sync(GovernedStore(sync_manager), fake_model("a", "b"))
    state = {"messages": [HumanMessage("config principal")], "recalled": []}
    graph.invoke(state, {"configurable": {"thread_id": "t", "principal": ALICE}})
    assert sync_manager.list(ALICE, Scope("acme", user_id="alice")).items
    with pytest.raises(MemoryScopeError, match="two different principals"):
        graph.invoke(state, {"configurable": {"thread_id": "t", "principal": BOB}},
                     context=Context(ALICE))


async def test_an_async_graph_and_its_sync_node(manager: GovernedMemoryManager) -> None:
    store = GovernedStore(manager)
    model = fake_model("Noted.", "Window seat.")

    async def recall(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        assert runtime.store is not None
        hits = await runtime.store.asearch(NAMESPACE, query=str(state["messages"][-1].content))
        return {"recalled": [h.value["content"] for h in hits]}

    async def respond(state: State) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    def remember(state: State, runtime: Runtime[Context]) -> dict[str, Any]:
        # A sync node of an async run: LangGraph runs it in a worker thread, and the
        # store sends its calls to the loop the manager lives on.
        assert runtime.store is not None
        said = state["messages"][-2]
        runtime.store.put(NAMESPACE, f"m{len(state['messages'])}", {"content": said.content})
        return {}

    graph = StateGraph(State, context_schema=Context)
    graph.add_node("recall", recall)
    graph.add_node("respond", respond)
    graph.add_node("remember", remember)
    graph.add_edge(START, "recall")
    graph.add_edge("recall", "respond")
    graph.add_edge("respond", "remember")
    graph.add_edge("remember", END)
    app = graph.compile(store=store)

    await app.ainvoke({"messages": [HumanMessage("I want a window seat")], "recalled": []},
                      context=Context(ALICE))
    # Two runs at once, for two principals, on one store.
    alice_run, bob_run = await asyncio.gather(
        app.ainvoke({"messages": [HumanMessage("which seat")], "recalled": []},
                    context=Context(ALICE)),
        app.ainvoke({"messages": [HumanMessage("which seat")], "recalled": []},
                    context=Context(BOB)))
    assert alice_run["recalled"] == ["I want a window seat"]
    assert bob_run["recalled"] == []


def test_principal_from_maps_the_hosts_own_authentication(
        sync_manager: SyncMemoryManager) -> None:
    users = {"token-a": ALICE}

    def from_auth(config: Any) -> Principal | None:
        return users.get(config["configurable"].get("auth_token"))

    store = GovernedStore(sync_manager, principal_from=from_auth)
    graph = build_sync(store, fake_model("ok"))
    state = {"messages": [HumanMessage("hello from alice")], "recalled": []}
    graph.invoke(state, {"configurable": {"thread_id": "t", "auth_token": "token-a"}})
    assert sync_manager.list(ALICE, Scope("acme", user_id="alice")).items
    with pytest.raises(PrincipalNotBoundError):
        graph.invoke(state, {"configurable": {"thread_id": "t", "auth_token": "forged"}})
    # principal_from replaces the context and config lookups: a Principal placed in
    # the config is not consulted.
    with pytest.raises(PrincipalNotBoundError):
        graph.invoke(state, {"configurable": {"thread_id": "t", "principal": ALICE}})
