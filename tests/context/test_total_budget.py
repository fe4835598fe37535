"""One budget for the whole context: blocks, window, summary and recalled memories share
``total_budget_tokens``, divided in that order and cut from its end, and the prompt
never costs more than the total, whatever the parts hold; each cut is recorded (in the
context, its ``degraded`` codes and the context event). A profile whose blocks cannot
fit its total is refused at load, and an unset total leaves every revision alone."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
from context_support import ALICE, OWNER, SESSION_SCOPE, USER_SCOPE, converse
from governed_memory import GovernedMemoryManager, Permission, Scope
from governed_memory.clock import ManualClock
from governed_memory.converter import structure, unstructure
from governed_memory.errors import MemoryConfigurationError
from governed_memory.events import InMemoryEventSink
from governed_memory.profiles.blocks import BlockSection
from governed_memory.profiles.convert import ProfileLoadError, structure_profile
from governed_memory.profiles.loading import parse_profile
from governed_memory.records import MemoryRecord, MemoryType, RecordStatus, content_hash
from governed_memory.scope import ScopeLevel
from governed_memory.tiers import InMemoryBlockStore, InMemoryTurnStore, MemoryTiers, TurnDraft
from governed_memory.tiers.blocks import Block
from governed_memory.tiers.turns import Role, ToolCall, Turn
from governed_memory.turncontext import ContextPolicy, MemoryContextBuilder
from governed_memory.turncontext.budget import ELLIPSIS, BudgetCut, Divided, divide
from governed_memory.turncontext.recall import RecalledMemory, RecallResult
from governed_memory.turncontext.render import entry, memory_text, render_block, render_blocks
from governed_memory.turncontext.result import MemoryContext
from governed_memory.turncontext.summarizer import FRONTIER, summary_key
from governed_memory.turncontext.tokens import (
    MESSAGE_OVERHEAD_TOKENS,
    TokenCounter,
    approximate_tokens,
    window_tokens,
)
from governed_memory.turncontext.trimming import trim
from governed_memory_native import build_native_provider
from hypothesis import given, settings
from hypothesis import strategies as st
from postgres_support import drop_schemas, postgres_config

SCOPE = Scope("acme", user_id="alice", session_id="s1")


def superadditive(text: str) -> int:
    """A counter that charges more for a joined text than for its parts: the builder's
    last check, not its arithmetic, must keep the total."""
    return len(text) + len(text) ** 2 // 400


COUNTERS: dict[str, TokenCounter] = {"approximate": approximate_tokens, "chars": len,
                                     "superadditive": superadditive}


def prompt_tokens(messages: Sequence[dict[str, Any]], counter: TokenCounter) -> int:
    """What memory put in a prompt rendered with an empty system prompt, counted from
    the rendered messages themselves: the system message's text, then every history
    message as a chat format frames it (the question, the last message, is the host's)."""
    system, *history, question = messages
    assert system["role"] == "system" and question["role"] == "user"
    total = counter(str(system["content"]))
    for message in history:
        total += MESSAGE_OVERHEAD_TOKENS + counter(str(message["content"]))
        for call in message.get("tool_calls", ()):
            total += (counter(call["function"]["name"]) + counter(call["function"]["arguments"])
                      + MESSAGE_OVERHEAD_TOKENS)
    return total


def as_context(parts: Divided, blocks: tuple[Block, ...]) -> MemoryContext:
    return MemoryContext(
        question="and now?", messages=parts.window, summary=parts.summary,
        standalone_query="and now?", rewritten=False, wanted_types=(),
        recalled=parts.recalled, memory_block=parts.memory_block, anchor_entity_ids=(),
        degraded=(), window_tokens=0, block_tokens=parts.block_tokens, blocks=blocks,
        blocks_text=parts.blocks_text, total_tokens=parts.total_tokens, cuts=parts.cuts)


def block(name: str, value: str, *, limit: int = 50_000) -> Block:
    return Block(scope_hash=SCOPE.scope_hash, name=name, value=value, version=1,
                 limit=limit, description=f"the {name} block")


def turn(index: int, role: Role, content: str, calls: tuple[ToolCall, ...] = (),
         tool_call_id: str | None = None) -> Turn:
    return Turn(f"t{index}", index + 1, SCOPE.scope_hash, role, content, float(index),
                tool_call_id=tool_call_id, tool_calls=calls)


def record(content: str, n: int) -> MemoryRecord:
    return MemoryRecord(id=f"01R{n:023d}", scope=SCOPE, scope_hash=SCOPE.scope_hash,
                        content=content, memory_type=MemoryType.FACT, version=1, revision="r",
                        content_hash=content_hash(content), status=RecordStatus.ACTIVE,
                        created_at=0.0, updated_at=0.0)


def recall_of(contents: Sequence[str], counter: TokenCounter) -> RecallResult:
    memories = tuple(RecalledMemory(record(c, i), ScopeLevel.USER, 1.0 - i / 100, 1.0, 0.0,
                                    0.0, 0.0) for i, c in enumerate(contents))
    text = render_block([entry(m.record, m.level.value) for m in memories])
    return RecallResult(memories, text, counter(text) if text else 0)


# -- the division, for any parts ------------------------------------------------------------

@st.composite
def conversations(draw: st.DrawFn) -> tuple[Turn, ...]:
    turns: list[Turn] = []
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["user", "assistant", "tools"]))
        text = draw(st.text(min_size=1, max_size=150))
        if kind == "tools":
            call = ToolCall(f"c{len(turns)}", "lookup", '{"q": 1}')
            turns.append(turn(len(turns), Role.ASSISTANT, "", (call,)))
            turns.append(turn(len(turns), Role.TOOL, text, tool_call_id=call.id))
        else:
            turns.append(turn(len(turns), Role(kind), text))
    return tuple(turns)


NAMES = ("persona", "human", "project_notes")
PARTS = st.fixed_dictionaries({
    "blocks": st.lists(st.text(max_size=300), max_size=3).map(
        lambda values: tuple(block(NAMES[i], v) for i, v in enumerate(values))),
    "turns": conversations(),
    "window_budget": st.integers(1, 1500),
    "summary": st.none() | st.text(min_size=1, max_size=1200),
    "memories": st.lists(st.text(min_size=1, max_size=200), max_size=6),
    "total": st.integers(1, 2500),
    "counter": st.sampled_from(sorted(COUNTERS)),
})


def check_division(parts: dict[str, Any]) -> None:
    counter = COUNTERS[parts["counter"]]
    blocks: tuple[Block, ...] = parts["blocks"]
    summary: str | None = parts["summary"]
    recalled = recall_of(parts["memories"], counter)
    window, _ = trim(parts["turns"], parts["window_budget"], counter)
    total: int = parts["total"]

    divided = divide(total, counter, blocks=blocks, window=window, summary=summary,
                     recalled=recalled)
    context = as_context(divided, blocks)
    rendered = prompt_tokens(context.prompt_messages(""), counter)
    assert rendered == divided.total_tokens <= total

    # Each part is what it was given, cut only from its far end.
    assert window[len(window) - len(divided.window):] == divided.window
    assert recalled.memories[:len(divided.recalled)] == divided.recalled
    if divided.summary not in (None, summary):
        assert divided.summary.endswith(ELLIPSIS)
        assert summary is not None and summary.startswith(divided.summary[:-1])
    if divided.blocks_text:
        assert [json.loads(line)["block"] for line in divided.blocks_text.split("\n")[2:-1]] \
            == [b.name for b in blocks]
    # A cut is recorded for a part exactly when the part lost something.
    cut = {c.part for c in divided.cuts}
    assert ("window" in cut) == (divided.window != window)
    assert ("recalled" in cut) == (divided.recalled != recalled.memories)
    assert ("summary" in cut) == (divided.summary != summary)
    assert ("blocks" in cut) == (bool(blocks) and divided.blocks_text != render_blocks(blocks))
    assert all(c.removed >= 0 and c.tokens >= 0 for c in divided.cuts)

    # Without a total nothing is cut; a total the parts fit cuts nothing either.
    whole = divide(None, counter, blocks=blocks, window=window, summary=summary,
                   recalled=recalled)
    assert whole.cuts == () and whole.window == window and whole.summary == summary
    roomy = divide(whole.total_tokens, counter, blocks=blocks, window=window,
                   summary=summary, recalled=recalled)
    assert roomy == whole


@settings(max_examples=60, deadline=None)
@given(PARTS)
def test_the_divided_prompt_never_exceeds_the_total(parts: dict[str, Any]) -> None:
    check_division(parts)


@pytest.mark.slow
@settings(max_examples=5_000, deadline=None)
@given(PARTS)
def test_the_divided_prompt_never_exceeds_the_total_thoroughly(parts: dict[str, Any]) -> None:
    check_division(parts)


# -- the division order, step by step ---------------------------------------------------------

BLOCKS = (block("persona", "p" * 200), block("human", "h" * 200))
WINDOW = tuple(turn(i, Role.USER if i % 2 == 0 else Role.ASSISTANT, f"turn {i} " + "w" * 40)
               for i in range(6))
SUMMARY = "s" * 400
MEMORIES = [f"memory {i} " + "m" * 80 for i in range(4)]


def divided(total: int | None) -> Divided:
    return divide(total, approximate_tokens, blocks=BLOCKS, window=WINDOW, summary=SUMMARY,
                  recalled=recall_of(MEMORIES, approximate_tokens))


def cost(blocks_text: str, summary: str | None, window: tuple[Turn, ...]) -> int:
    return approximate_tokens(memory_text(blocks_text, summary, "")) + window_tokens(window)


def test_a_tighter_total_cuts_recalled_then_summary_then_window_then_blocks() -> None:
    whole = divided(None)
    assert whole.cuts == () and len(whole.recalled) == 4
    assert divided(whole.total_tokens) == whole

    one_less = divided(whole.total_tokens - 1)
    assert [c.part for c in one_less.cuts] == ["recalled"]
    assert len(one_less.recalled) == 3 and one_less.cuts[0].removed == 1
    assert one_less.summary == SUMMARY and one_less.window == WINDOW

    no_recall = cost(whole.blocks_text, SUMMARY, WINDOW)
    assert [c.part for c in divided(no_recall).cuts] == ["recalled"]
    assert divided(no_recall).memory_block == ""

    short = divided(no_recall - 20)
    assert [c.part for c in short.cuts] == ["summary", "recalled"]
    assert short.summary is not None and short.summary.endswith(ELLIPSIS)
    assert short.window == WINDOW and short.total_tokens <= no_recall - 20

    no_summary = divided(cost(whole.blocks_text, None, WINDOW))
    assert no_summary.summary is None and no_summary.window == WINDOW
    summary_cut = no_summary.cuts[0]
    assert summary_cut == BudgetCut("summary", len(SUMMARY), summary_cut.tokens)
    assert summary_cut.tokens > 100 and str(summary_cut).startswith("summary: -400 chars")

    older = divided(cost(whole.blocks_text, None, WINDOW[2:]))
    assert older.window == WINDOW[2:] and older.window[0].role is Role.USER
    assert [c.part for c in older.cuts] == ["window", "summary", "recalled"]
    assert older.cuts[0].removed == 2 and older.cuts[0].unit == "turns"

    blocks_only = approximate_tokens(whole.blocks_text)
    squeezed = divided(blocks_only - 30)
    assert [c.part for c in squeezed.cuts] == ["blocks", "window", "summary", "recalled"]
    assert squeezed.window == () and squeezed.summary is None
    lines = [json.loads(line) for line in squeezed.blocks_text.split("\n")[2:-1]]
    assert lines[0]["value"] == "p" * 200 and "cut_chars" not in lines[0]
    assert lines[1]["value"] == "h" * (200 - lines[1]["cut_chars"]) and lines[1]["chars"] == 200
    assert squeezed.cuts[0].removed == lines[1]["cut_chars"]

    nothing = divided(3)
    assert nothing.blocks_text == "" and nothing.total_tokens == 0
    assert nothing.cuts[0] == BudgetCut("blocks", 400, approximate_tokens(whole.blocks_text))


def test_a_window_whose_newest_turn_cannot_fit_is_dropped_whole() -> None:
    call = ToolCall("c1", "search", "{}")
    window = (turn(0, Role.USER, "find it"), turn(1, Role.ASSISTANT, "", (call,)),
              turn(2, Role.TOOL, "x" * 400, tool_call_id="c1"))
    parts = divide(50, approximate_tokens, blocks=(), window=window, summary=None,
                   recalled=RecallResult())
    assert parts.window == () and parts.cuts == (BudgetCut("window", 3,
                                                           window_tokens(window)),)


# -- the policy and the profile --------------------------------------------------------------

@pytest.mark.parametrize("value", [0, -5, True, 10_000_001, 2.5])
def test_the_policy_refuses_a_total_that_is_not_a_positive_integer(value: object) -> None:
    with pytest.raises(MemoryConfigurationError, match="total_budget_tokens"):
        ContextPolicy(total_budget_tokens=value)  # type: ignore[arg-type]


BASE: dict[str, Any] = {"id": "agent", "version": "1.0.0",
                        "provider": {"name": "native", "config": {"backend": "memory"}}}


def test_the_profile_total_reaches_the_policy_and_its_revision_only_when_set() -> None:
    plain = parse_profile(BASE)
    assert plain.context.total_budget_tokens is None
    assert ContextPolicy.from_profile(plain.context).total_budget_tokens is None
    budgeted = parse_profile({**BASE, "context": {"total_budget_tokens": 3000}})
    assert ContextPolicy.from_profile(budgeted.context).total_budget_tokens == 3000
    assert budgeted.revision != plain.revision
    # Unset, the key is left out of the revision: a published profile with a [context]
    # section keeps the revision its events recorded.
    from governed_memory.plugins import PluginManager
    from governed_memory.profiles.registry import ProfileRegistry

    published = ProfileRegistry.from_plugins(PluginManager.load()).get("chat-assistant@1.0.0")
    assert published.context.total_budget_tokens is None
    assert published.revision == ("sha256:ccbc2bbabf78d13f5bd60be96e999ff6d81cd69bd9cebcec2a"
                                  "43af80660564f4")


@pytest.mark.parametrize(("context", "message"), [
    ({"total_budget_tokens": 0}, "context.total_budget_tokens: must be at least 1"),
    ({"total_budget_tokens": True}, "context.total_budget_tokens"),
    ({"total_budget_tokens": 800}, r"declared blocks \(persona, human\) may hold about 1000"),
])
def test_a_profile_total_that_cannot_work_is_refused_at_load(context: dict[str, Any],
                                                             message: str) -> None:
    with pytest.raises(ProfileLoadError, match=message):
        structure_profile({**BASE, "context": context,
                           "stores": {"blocks": {"kind": "memory"}},
                           "blocks": {"persona": {"limit": 2000}, "human": {"limit": 2000}}})
    fits = structure_profile({**BASE, "context": {"total_budget_tokens": 1000},
                              "stores": {"blocks": {"kind": "memory"}},
                              "blocks": {"persona": {"limit": 2000}, "human": {"limit": 2000}}})
    assert fits.context.total_budget_tokens == 1000


def test_a_builder_whose_total_the_blocks_cannot_fit_is_refused_at_wiring() -> None:
    clock = ManualClock()
    manager = GovernedMemoryManager(build_native_provider({"backend": "memory"}, clock),
                                    clock=clock)
    tiers = MemoryTiers(long_term=manager, blocks=InMemoryBlockStore(),
                        block_specs={"human": BlockSection(limit=4000)})
    with pytest.raises(MemoryConfigurationError, match="about 1000 tokens"):
        MemoryContextBuilder(tiers, policy=ContextPolicy(total_budget_tokens=999))
    assert MemoryContextBuilder(tiers, policy=ContextPolicy(total_budget_tokens=1000))


# -- the builder ------------------------------------------------------------------------------

async def seed(tiers: MemoryTiers, manager: GovernedMemoryManager) -> list[str]:
    await converse(tiers, 4, words=12)
    await manager.add(ALICE, SESSION_SCOPE, "Alice asked about tea. " * 20,
                      memory_type="summary", key=summary_key("s1"), metadata={FRONTIER: 2})
    ids = []
    for i in range(4):
        added = await manager.add(ALICE, USER_SCOPE, f"Alice likes tea number {i} " * 6)
        ids.append(added.id)
    return ids


async def test_the_builder_records_each_cut_in_the_context_and_its_event(
        tiers: MemoryTiers, manager: GovernedMemoryManager, sink: InMemoryEventSink) -> None:
    await seed(tiers, manager)
    roomy = await MemoryContextBuilder(tiers).build(ALICE, OWNER, "which tea?")
    assert roomy.cuts == () and roomy.total_budget_tokens is None
    assert len(roomy.recalled) >= 2 and roomy.summary is not None
    assert roomy.total_tokens == (approximate_tokens(roomy.memory_text)
                                  + window_tokens(roomy.messages)) > roomy.window_tokens

    total = roomy.total_tokens - roomy.block_tokens // 2
    sink.clear()
    tight = await MemoryContextBuilder(tiers, policy=ContextPolicy(
        total_budget_tokens=total)).build(ALICE, OWNER, "which tea?")
    assert tight.total_budget_tokens == total and tight.total_tokens <= total
    assert [c.part for c in tight.cuts] == ["recalled"]
    assert tight.degraded == ("budget.cut.recalled",)
    assert tight.recalled == roomy.recalled[:len(tight.recalled)]
    assert len(tight.recalled) < len(roomy.recalled)
    assert tight.messages == roomy.messages and tight.summary == roomy.summary
    (event,) = [e for e in sink.events if e.operation == "record_context"
                and e.type == "memory.read.completed"]
    assert "degraded: budget.cut.recalled" in event.reasons
    dropped = {m.record.id for m in roomy.recalled[len(tight.recalled):]}
    assert dropped and not dropped & set(event.record_ids), "only what the prompt got"

    # With no room for the summary, it is cut and not recorded as injected.
    sink.clear()
    window_only = await MemoryContextBuilder(tiers, policy=ContextPolicy(
        total_budget_tokens=window_tokens(roomy.messages))).build(ALICE, OWNER, "which tea?")
    assert window_only.summary is None and window_only.messages == roomy.messages
    assert window_only.summary_version is None and roomy.summary_version == 1
    assert {"budget.cut.summary", "budget.cut.recalled"} <= set(window_only.degraded)
    (event,) = [e for e in sink.events if e.operation == "record_context"
                and e.type == "memory.read.completed"]
    assert event.record_ids == ()


async def test_a_disabled_policy_divides_blocks_and_window_too() -> None:
    clock = ManualClock()
    manager = GovernedMemoryManager(build_native_provider({"backend": "memory"}, clock),
                                    clock=clock)
    async with MemoryTiers(long_term=manager, turns=InMemoryTurnStore(),
                           blocks=InMemoryBlockStore(),
                           block_specs={"human": BlockSection(limit=400)}) as tiers:
        await tiers.blocks.append(ALICE, OWNER, "human", "Alice, a tea drinker. " * 15)
        await converse(tiers, 2, words=20)
        policy = ContextPolicy.disabled()
        whole = await MemoryContextBuilder(tiers, policy=policy).build(ALICE, OWNER, "hm?")
        total = approximate_tokens(whole.blocks_text) + 10
        context = await MemoryContextBuilder(tiers, policy=attrs.evolve(
            policy, total_budget_tokens=total)).build(ALICE, OWNER, "hm?")
        assert context.blocks_text == whole.blocks_text and context.messages == ()
        assert [c.part for c in context.cuts] == ["window"]
        assert context.total_tokens <= total


STORABLE = st.characters(exclude_categories=("Cs",), exclude_characters="\x00")
"""What the stores keep (no NUL, no lone surrogates)."""


@st.composite
def stored(draw: st.DrawFn) -> dict[str, Any]:
    word = st.text(alphabet="abcdefgh tea", min_size=1, max_size=12)
    return {
        "turns": draw(st.lists(st.text(STORABLE, min_size=1, max_size=160).filter(str.strip),
                               max_size=8)),
        "summary": draw(st.none() | st.text(STORABLE, min_size=1, max_size=900).filter(
            str.strip)),
        "memories": draw(st.lists(word.map(lambda w: f"tea {w}" * 4), max_size=4)),
        "human": draw(st.text(STORABLE, max_size=400)),
        "total": draw(st.integers(150, 1500)),
    }


async def build_over(data: dict[str, Any]) -> MemoryContext:
    clock = ManualClock()
    manager = GovernedMemoryManager(build_native_provider({"backend": "memory"}, clock),
                                    clock=clock)
    specs = {"persona": BlockSection(limit=200, initial="I help with tea."),
             "human": BlockSection(limit=400)}
    async with MemoryTiers(long_term=manager, turns=InMemoryTurnStore(),
                           blocks=InMemoryBlockStore(), block_specs=specs) as tiers:
        for i, text in enumerate(data["turns"]):
            draft = TurnDraft.user(text) if i % 2 == 0 else TurnDraft.assistant(text)
            await tiers.append(ALICE, OWNER, draft)
        if data["summary"]:
            await manager.add(ALICE, SESSION_SCOPE, data["summary"], memory_type="summary",
                              key=summary_key("s1"), metadata={FRONTIER: 1})
        for text in data["memories"]:
            await manager.add(ALICE, USER_SCOPE, text)
        if data["human"]:
            await tiers.blocks.append(ALICE, OWNER, "human", data["human"])
        policy = ContextPolicy(total_budget_tokens=data["total"], recent_max_tokens=600)
        return await MemoryContextBuilder(tiers, policy=policy).build(ALICE, OWNER, "tea?")


def check_build(data: dict[str, Any]) -> None:
    context = asyncio.run(build_over(data))
    assert prompt_tokens(context.prompt_messages(""), approximate_tokens) \
        == context.total_tokens <= data["total"]
    assert {f"budget.cut.{c.part}" for c in context.cuts} == {
        d for d in context.degraded if d.startswith("budget.cut.")}


@settings(max_examples=12, deadline=None)
@given(stored())
def test_the_built_prompt_never_exceeds_the_total(data: dict[str, Any]) -> None:
    check_build(data)


@pytest.mark.slow
@settings(max_examples=500, deadline=None)
@given(stored())
def test_the_built_prompt_never_exceeds_the_total_thoroughly(data: dict[str, Any]) -> None:
    check_build(data)


# -- a profile's total on every backend, over REST and MCP -------------------------------------

@pytest.fixture(scope="module", autouse=True)
def _drop_postgres_schemas() -> Any:
    yield
    drop_schemas()


def backend_profile(backend: str, tmp_path: Path) -> dict[str, Any]:
    if backend == "memory":
        provider: dict[str, Any] = {"backend": "memory"}
        stores: dict[str, Any] = {"turns": {"kind": "memory"}, "blocks": {"kind": "memory"}}
    elif backend == "sqlite":
        provider = {"backend": "sqlite", "path": str(tmp_path / "memory.db")}
        stores = {"turns": {"kind": "sqlite", "config": {"path": str(tmp_path / "t.db")}},
                  "blocks": {"kind": "sqlite", "config": {"path": str(tmp_path / "b.db")}}}
    else:
        provider = postgres_config(tmp_path)
        shared = {"dsn": provider["dsn"], "schema": provider["schema"]}
        stores = {"turns": {"kind": "postgres", "config": shared},
                  "blocks": {"kind": "postgres", "config": shared}}
    return {"id": "budgeted", "version": "1.0.0",
            "provider": {"name": "native", "config": provider}, "stores": stores,
            "blocks": {"human": {"limit": 400, "initial": "Alice drinks tea. " * 20}},
            "context": {"total_budget_tokens": 260, "budget_tokens": 2000}}


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
async def test_a_profiles_total_holds_on_every_backend_and_surface(
        backend: str, tmp_path: Path) -> None:
    from governed_memory_service import ApiKeyStore, AsyncMemoryClient, BearerAuthenticator
    from governed_memory_service.app import create_app
    from governed_memory_service.mcp_tools import build_mcp_server
    from mcp import Client

    spec = structure_profile(backend_profile(backend, tmp_path))
    manager = GovernedMemoryManager.from_profile(spec, sinks=())
    tiers = MemoryTiers.from_manager(manager)
    async with tiers, ApiKeyStore(tmp_path / "keys.db") as keys:
        await converse(tiers, 3, words=20)
        for i in range(3):
            await manager.add(ALICE, USER_SCOPE, f"Alice likes tea kind {i}")
        context = await MemoryContextBuilder(tiers).build(ALICE, OWNER, "which tea?")
        assert context.total_budget_tokens == 260 and context.total_tokens <= 260
        assert context.blocks_tokens > 0 and context.messages, "blocks, then the window"
        parts = [c.part for c in context.cuts]
        assert parts[0] == "window" and parts[-1] == "recalled"

        issued = await keys.create(tenant_id="acme", kind="user", user_id="alice",
                                   permissions=[Permission.READ, Permission.WRITE])
        app = create_app(manager, BearerAuthenticator(keys), tiers=tiers)
        async with AsyncMemoryClient("http://service.test", issued.token,
                                     transport=httpx.ASGITransport(app=app)) as client:
            rest = await client.build_context(OWNER, "which tea?")
        assert rest.cuts == context.cuts and rest.total_tokens == context.total_tokens
        assert rest.total_budget_tokens == 260

        server = build_mcp_server(manager, lambda ctx: ALICE, tiers=tiers)
        async with Client(server, cache=None) as mcp:
            result = await mcp.call_tool("build_context", {
                "session_id": "s1", "project_id": "handbook", "question": "which tea?"})
        assert not result.is_error and isinstance(result.structured_content, dict)
        summary = result.structured_content
        assert summary["total_budget_tokens"] == 260
        assert summary["total_tokens"] == context.total_tokens
        assert summary["cuts"] == [{"part": c.part, "removed": c.removed, "unit": c.unit,
                                    "tokens": c.tokens} for c in context.cuts]


def test_a_context_with_cuts_survives_the_wire() -> None:
    parts = divided(200)
    context = as_context(parts, BLOCKS)
    again = structure(unstructure(context), MemoryContext)
    assert again.cuts == context.cuts and again.total_tokens == context.total_tokens
