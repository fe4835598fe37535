"""The memory-block tools over MCP: listed only when the profile declares blocks, each
one governed call as the caller (decided, evented), compare-and-set on the version the
agent read, typed errors for bad input, and the blocks in every build_context."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from governed_memory import GovernedMemoryManager, Permission, Principal, PrincipalKind
from governed_memory.events import InMemoryEventSink
from governed_memory.profiles.blocks import BlockSection
from governed_memory.scope import ScopeLevel
from governed_memory.tiers import InMemoryBlockStore, MemoryTiers
from governed_memory_service.mcp_block_tools import BLOCK_DESCRIPTIONS
from governed_memory_service.mcp_tools import build_mcp_server
from mcp import Client
from mcp.types import CallToolResult

SPECS = {"persona": BlockSection(limit=100, initial="I am Sam.", level=ScopeLevel.SESSION),
         "human": BlockSection(limit=60, description="What we know about the user")}
ALICE = Principal("user:alice", PrincipalKind.USER, "acme", "alice",
                  frozenset({Permission.READ, Permission.WRITE}))
READER = Principal("user:alice-ro", PrincipalKind.USER, "acme", "alice",
                   frozenset({Permission.READ}))


@pytest.fixture
async def setup() -> AsyncIterator[tuple[MemoryTiers, InMemoryEventSink]]:
    sink = InMemoryEventSink()
    manager = GovernedMemoryManager.from_plugins("native", {"backend": "memory"}, sinks=[sink])
    async with manager:
        tiers = MemoryTiers(long_term=manager, blocks=InMemoryBlockStore(), block_specs=SPECS)
        yield tiers, sink


async def call(tiers: MemoryTiers, caller: Principal, tool: str,
               arguments: dict[str, Any]) -> CallToolResult:
    server = build_mcp_server(tiers.long_term, lambda ctx: caller, tiers=tiers)
    async with Client(server, cache=None) as client:
        return await client.call_tool(tool, arguments)


def structured(result: CallToolResult) -> dict[str, Any]:
    assert isinstance(result.structured_content, dict), result.content
    return result.structured_content


async def test_block_tools_are_listed_only_with_blocks(
        setup: tuple[MemoryTiers, InMemoryEventSink]) -> None:
    tiers, _ = setup
    for given, expected in ((tiers, set(BLOCK_DESCRIPTIONS)),
                            (MemoryTiers(long_term=tiers.long_term), set())):
        server = build_mcp_server(tiers.long_term, lambda ctx: ALICE, tiers=given)
        async with Client(server, cache=None) as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
        assert set(BLOCK_DESCRIPTIONS) & set(listed) == expected
        for name in expected:
            assert listed[name].description and listed[name].input_schema.get(
                "additionalProperties") is False


async def test_an_agent_reads_and_edits_its_blocks(
        setup: tuple[MemoryTiers, InMemoryEventSink]) -> None:
    tiers, sink = setup
    read = await call(tiers, ALICE, "read_blocks", {"session_id": "s1"})
    assert not read.is_error and "I am Sam." in read.content[0].text  # type: ignore[union-attr]
    assert structured(read)["blocks"][1] == {"name": "human", "version": 0, "chars": 0,
                                             "limit": 60}
    sink.clear()
    appended = await call(tiers, ALICE, "block_append",
                          {"name": "human", "text": "Likes kites", "expected_version": 0})
    assert structured(appended)["version"] == 1
    assert "edit_block" in {e.operation for e in sink.events}
    replaced = await call(tiers, ALICE, "block_replace",
                          {"name": "human", "old": "kites", "new": "boats"})
    assert structured(replaced)["version"] == 2
    stale = await call(tiers, ALICE, "block_rethink",
                       {"name": "human", "value": "lost", "expected_version": 1})
    assert stale.is_error and structured(stale)["code"] == "conflict"
    rethought = await call(tiers, ALICE, "block_rethink",
                           {"name": "persona", "value": "I am Sam, a sailor.",
                            "session_id": "s1"})
    assert structured(rethought)["scope"]["session_id"] == "s1"
    history = await call(tiers, ALICE, "block_history", {"name": "human"})
    body = history.content[0].text  # type: ignore[union-attr]
    assert [json.loads(line)["version"] for line in body.split("\n")[2:-1]] == [2, 1]
    context = await call(tiers, ALICE, "build_context",
                         {"session_id": "s1", "question": "What do I like?"})
    text = context.content[0].text  # type: ignore[union-attr]
    assert "<memory-blocks>" in text and "Likes boats" in text and "a sailor" in text
    assert {"name": "human", "version": 2} in structured(context)["blocks"]


@pytest.mark.parametrize(("tool", "arguments", "code"), [
    ("block_append", {"name": "human", "text": "x" * 61}, "validation"),
    ("block_append", {"name": "notes", "text": "x"}, "not_found"),
    ("block_append", {"name": "Human!", "text": "x"}, "validation"),
    ("block_replace", {"name": "human", "old": "absent", "new": "x"}, "validation"),
    ("block_append", {"name": "human", "text": "x", "colour": "red"}, "validation"),
    ("block_history", {"name": "human", "limit": 0}, "validation"),
    ("block_append", {"name": "human", "text": "x", "expected_version": -1}, "validation"),
])
async def test_bad_calls_are_typed_tool_errors(setup: tuple[MemoryTiers, InMemoryEventSink],
                                               tool: str, arguments: dict[str, Any],
                                               code: str) -> None:
    tiers, _ = setup
    result = await call(tiers, ALICE, tool, arguments)
    assert result.is_error
    assert structured(result)["code"] == code


async def test_a_reader_cannot_edit(setup: tuple[MemoryTiers, InMemoryEventSink]) -> None:
    tiers, _ = setup
    refused = await call(tiers, READER, "block_append", {"name": "human", "text": "x"})
    assert refused.is_error and structured(refused)["code"] == "scope_denied"
    assert not (await call(tiers, READER, "read_blocks", {})).is_error
