"""The memory-block tools (read_blocks, block_append, block_replace, block_rethink) alone
and in an agent: listed only with blocks, each call governed as the run's principal,
compare-and-set on the version read_blocks shows, refusals told to the model as their
code, the blocks read back as quoted data."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from governed_memory import GovernedMemoryManager, Principal, Scope
from governed_memory.events import InMemoryEventSink
from governed_memory.profiles.blocks import BlockSection
from governed_memory.scope import ScopeLevel
from governed_memory.tiers import InMemoryBlockStore, MemoryTiers
from governed_memory.turncontext.render import BLOCKS_CLOSE, BLOCKS_OPEN
from governed_memory_langgraph import PrincipalNotBoundError, block_tools
from governed_memory_langgraph.block_tools import BLOCK_TOOL_NAMES
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph_support import ALICE, BOB

SPECS = {"persona": BlockSection(limit=100, description="Who you are",
                                 initial="I am Sam.", level=ScopeLevel.SESSION),
         "human": BlockSection(limit=40, description="What you know about the user")}
ALICE_SESSION = Scope("acme", user_id="alice", session_id="s1")


@pytest.fixture
async def tiers(manager: GovernedMemoryManager) -> AsyncIterator[MemoryTiers]:
    async with MemoryTiers(long_term=manager, blocks=InMemoryBlockStore(),
                           block_specs=SPECS) as memory:
        yield memory


def session(principal: Principal) -> Scope:
    return Scope(principal.tenant_id, user_id=principal.user_id, session_id="s1")


def _shown(text: str) -> list[dict[str, Any]]:
    lines = text.splitlines()
    assert lines[0] == BLOCKS_OPEN and lines[-1] == BLOCKS_CLOSE
    return [json.loads(line) for line in lines[2:-1]]


async def test_listed_only_when_the_tiers_have_blocks(tiers: MemoryTiers) -> None:
    assert block_tools(MemoryTiers(long_term=tiers.long_term), principal=ALICE) == []
    tools = block_tools(tiers, principal=ALICE)
    assert tuple(t.name for t in tools) == BLOCK_TOOL_NAMES
    read, append, replace, rethink = tools
    assert "human (at most 40 characters: What you know about the user)" in (
        append.description)
    assert set(read.args) == {"names"}
    assert set(replace.args) == {"name", "old", "new", "expected_version"}
    assert set(rethink.args) == {"name", "value", "expected_version"}


async def test_the_tools_read_and_edit_the_blocks_governed(
        tiers: MemoryTiers, sink: InMemoryEventSink) -> None:
    read, append, replace, rethink = block_tools(tiers, principal=ALICE, scope=session)
    shown = _shown(await read.ainvoke({}))
    assert [(b["block"], b["version"], b["value"]) for b in shown] == [
        ("persona", 0, "I am Sam."), ("human", 0, "")]
    sink.clear()
    done = json.loads(await append.ainvoke({"name": "human", "text": "Likes <b>tea</b>"}))
    assert done == {"block": "human", "version": 1, "chars": 16, "limit": 40}
    committed = [e for e in sink.events if e.type == "memory.write.committed"]
    assert [(e.operation, e.principal_id) for e in committed] == [("edit_block", "user:alice")]
    assert json.loads(await replace.ainvoke({"name": "human", "old": "tea", "new": "coffee",
                                             "expected_version": 1}))["version"] == 2
    assert json.loads(await rethink.ainvoke({"name": "persona", "value": "I plan trips.",
                                             "expected_version": 0}))["version"] == 1
    text = await read.ainvoke({"names": ["human"]})
    assert "<b>" not in text and "\\u003cb\\u003ecoffee" in text, "quoted data, escaped"
    (human,) = _shown(text)
    assert (human["version"], human["chars"]) == (2, 19)
    stored = await tiers.blocks.read(ALICE, ALICE_SESSION)
    assert [(b.name, b.version, b.value) for b in stored] == [
        ("persona", 1, "I plan trips."), ("human", 2, "Likes <b>coffee</b>")]


async def test_refusals_reach_the_model_as_their_code(tiers: MemoryTiers) -> None:
    _, append, replace, rethink = block_tools(tiers, principal=ALICE)
    await append.ainvoke({"name": "human", "text": "one"})
    stale = json.loads(await rethink.ainvoke({"name": "human", "value": "lost",
                                              "expected_version": 0}))
    assert stale["code"] == "conflict" and "version 1, not 0" in stale["detail"]
    over = json.loads(await append.ainvoke({"name": "human", "text": "x" * 40}))
    assert (over["code"], over["field"]) == ("validation", "value")
    absent = json.loads(await replace.ainvoke({"name": "human", "old": "two", "new": "x"}))
    assert (absent["code"], absent["field"]) == ("validation", "old")
    assert json.loads(await append.ainvoke({"name": "notes", "text": "x"}))["code"] == (
        "not_found")
    elsewhere = block_tools(tiers, principal=ALICE, scope=Scope("acme", user_id="bob"))
    assert json.loads(await elsewhere[1].ainvoke({"name": "human", "text": "planted"}))[
        "code"] == "scope_denied"
    (human,) = await tiers.blocks.read(ALICE, Scope("acme", user_id="alice"), ["human"])
    assert (human.version, human.value) == (1, "one")


async def test_a_sync_call_runs_on_the_tiers_loop_from_another_thread(
        tiers: MemoryTiers) -> None:
    read, append, _, _ = block_tools(tiers, principal=ALICE)
    await read.ainvoke({})  # the runner learns the loop the tiers serve on
    done = await asyncio.to_thread(append.invoke, {"name": "human", "text": "Name: Alice"})
    assert json.loads(done)["version"] == 1
    with pytest.raises(RuntimeError, match="deadlock"):
        read.invoke({})


@dataclass
class Context:
    principal: Principal


def call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


def tool_agent(tools: list[BaseTool], script: list[BaseMessage]) -> Any:
    model = FakeMessagesListChatModel(responses=script)

    async def think(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState, context_schema=Context)
    graph.add_node("agent", think)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile()


async def test_in_an_agent_the_tools_act_for_the_runs_principal(tiers: MemoryTiers) -> None:
    tools = block_tools(tiers)  # built once, for every user
    alice = await tool_agent(tools, [
        call("block_append", {"name": "human", "text": "Prefers tea"}, "a1"),
        call("read_blocks", {"names": ["human"]}, "a2"),
        AIMessage("Tea it is.")]).ainvoke(
        {"messages": [HumanMessage("I prefer tea")]}, context=Context(ALICE))
    bob = await tool_agent(tools, [call("read_blocks", {"names": ["human"]}, "b1"),
                                   AIMessage("No idea.")]).ainvoke(
        {"messages": [HumanMessage("what do I prefer")]}, context=Context(BOB))

    alice_results = [str(m.content) for m in alice["messages"] if isinstance(m, ToolMessage)]
    assert json.loads(alice_results[0])["version"] == 1
    assert _shown(alice_results[1])[0]["value"] == "Prefers tea"
    (bob_result,) = [str(m.content) for m in bob["messages"] if isinstance(m, ToolMessage)]
    assert _shown(bob_result)[0] == {"block": "human", "version": 0, "chars": 0, "limit": 40,
                                     "description": "What you know about the user",
                                     "value": ""}
    with pytest.raises(PrincipalNotBoundError):
        await tools[0].ainvoke({})  # outside any run, with none fixed
