"""The builder, step by step in the reference's build order, with the scripted model."""

from __future__ import annotations

import pytest
from context_support import (
    ALICE,
    BOB,
    OWNER,
    SESSION_SCOPE,
    USER_SCOPE,
    converse,
    roles,
    routed,
    tool_chain,
)
from governed_memory import (
    GovernedMemoryManager,
    MemoryScopeError,
    MemoryType,
    Principal,
    PrincipalKind,
    Scope,
)
from governed_memory.events import InMemoryEventSink
from governed_memory.language_models import LanguageModelError, ScriptedModel
from governed_memory.tiers import MemoryTiers, Role, TurnDraft
from governed_memory.turncontext import ContextPolicy, MemoryContextBuilder
from governed_memory.turncontext.summarizer import FRONTIER, SOURCES, summary_key
from governed_memory.turncontext.tokens import approximate_tokens

# -- step 1: identity --------------------------------------------------------------------

async def test_step1_build_needs_a_session_and_the_callers_own_owner(
        tiers: MemoryTiers) -> None:
    builder = MemoryContextBuilder(tiers)
    with pytest.raises(MemoryScopeError, match="session_id"):
        await builder.build(ALICE, OWNER.replace(session_id=None), "hi")
    with pytest.raises(MemoryScopeError):
        await builder.build(BOB, OWNER, "hi")
    with pytest.raises(MemoryScopeError):
        await builder.build(ALICE, Scope("globex", user_id="alice", session_id="s1"), "hi")


async def test_step1_the_user_comes_from_the_principal_when_omitted(tiers: MemoryTiers) -> None:
    await tiers.append(ALICE, OWNER, TurnDraft.user("hello"))
    context = await MemoryContextBuilder(tiers).build(ALICE, OWNER.replace(user_id=None), "hi")
    assert [t.content for t in context.messages] == ["hello"]


# -- step 2: load the last recent_max_messages, oldest first ---------------------------------

async def test_step2_loads_the_newest_messages_oldest_first(tiers: MemoryTiers) -> None:
    await converse(tiers, 10, words=2)
    policy = ContextPolicy(recent_max_messages=6, summary_keep_messages=4)
    context = await MemoryContextBuilder(tiers, policy=policy).build(ALICE, OWNER, "next?")
    assert [t.seq for t in context.messages] == [15, 16, 17, 18, 19, 20]
    assert context.question == "next?" and context.degraded == ()


# -- step 3: disabled ------------------------------------------------------------------------

async def test_step3_disabled_returns_a_plain_window_and_calls_no_model(
        tiers: MemoryTiers) -> None:
    await converse(tiers, 5, words=2)
    model = routed()
    builder = MemoryContextBuilder(tiers, policy=ContextPolicy.disabled(), model=model)
    context = await builder.build(ALICE, OWNER, "and who owns it?")
    assert len(context.messages) == 4 and context.messages[0].role is Role.USER
    assert context.standalone_query == "and who owns it?" and not context.rewritten
    assert context.summary is None and context.recalled == ()
    assert model.calls == []


# -- step 4: the existing summary and its frontier -------------------------------------------

async def test_step4_turns_the_summary_covers_are_not_replayed(
        tiers: MemoryTiers, manager: GovernedMemoryManager) -> None:
    await converse(tiers, 3, words=2)
    await manager.add(ALICE, SESSION_SCOPE, "Alice asked three things.", memory_type="summary",
                      key=summary_key("s1"), metadata={FRONTIER: 4})
    context = await MemoryContextBuilder(tiers).build(ALICE, OWNER, "more?")
    assert context.summary == "Alice asked three things."
    assert [t.seq for t in context.messages] == [5, 6]
    assert context.summary_version == 1


# -- step 5: refreshing the summary ----------------------------------------------------------

POLICY = ContextPolicy(recent_max_messages=12, recent_max_tokens=400,
                       summary_trigger_fraction=0.5, summary_keep_messages=4)


async def test_step5_refresh_folds_the_older_turns_under_one_key(
        tiers: MemoryTiers, manager: GovernedMemoryManager) -> None:
    await converse(tiers, 6, words=20)  # 12 turns of ~60 tokens: past the trigger
    model = routed()
    context = await MemoryContextBuilder(tiers, policy=POLICY, model=model).build(
        ALICE, OWNER, "and then?")
    assert model.tasks().count("summarize") == 1
    assert context.summary is not None and context.summary.startswith("[8 turns folded")
    assert [t.seq for t in context.messages] == [9, 10, 11, 12]
    record = await manager.get(ALICE, SESSION_SCOPE, key=summary_key("s1"))
    assert record.memory_type is MemoryType.SUMMARY
    assert record.metadata[FRONTIER] == 8 and len(record.metadata[SOURCES]) == 8


async def test_step5_unchanged_history_is_not_summarized_again(tiers: MemoryTiers) -> None:
    await converse(tiers, 6, words=20)
    model = routed()
    builder = MemoryContextBuilder(tiers, policy=POLICY, model=model)
    await builder.build(ALICE, OWNER, "first")
    calls = model.tasks().count("summarize")
    again = await builder.build(ALICE, OWNER, "second")
    assert model.tasks().count("summarize") == calls
    assert [t.seq for t in again.messages] == [9, 10, 11, 12]


async def test_step5_a_later_refresh_folds_only_new_turns_and_keeps_one_row(
        tiers: MemoryTiers, manager: GovernedMemoryManager) -> None:
    await converse(tiers, 6, words=20)
    model = routed()
    builder = MemoryContextBuilder(tiers, policy=POLICY, model=model)
    await builder.build(ALICE, OWNER, "first")
    await converse(tiers, 4, words=20, start=6)
    context = await builder.build(ALICE, OWNER, "second")
    summarize = [c for c in model.calls if c.task == "summarize"]
    assert len(summarize) == 2
    # The second fold saw the prior summary and only turns after the frontier.
    assert "question 3:" not in summarize[1].user and "[8 turns folded" in summarize[1].user
    record = await manager.get(ALICE, SESSION_SCOPE, key=summary_key("s1"))
    assert record.version == 2 and record.metadata[FRONTIER] == 16
    assert [t.seq for t in context.messages] == [17, 18, 19, 20]
    listed = await manager.list(ALICE, SESSION_SCOPE, memory_types=["summary"])
    assert len(listed.items) == 1


async def test_step5_the_keep_boundary_walks_back_to_a_user_turn(tiers: MemoryTiers) -> None:
    await converse(tiers, 4, words=20)
    await tool_chain(tiers, 1, size=100)  # user, assistant(call), tool, assistant
    model = routed()
    policy = ContextPolicy(recent_max_messages=12, recent_max_tokens=500,
                           summary_trigger_fraction=0.5, summary_keep_messages=3)
    context = await MemoryContextBuilder(tiers, policy=policy, model=model).build(
        ALICE, OWNER, "ok?")
    # Three turns back lands on the assistant call; the boundary moves to the user turn.
    assert context.messages[0].role is Role.USER and len(context.messages) == 4


async def test_step5_one_long_agent_turn_writes_no_summary(
        tiers: MemoryTiers, manager: GovernedMemoryManager) -> None:
    await tool_chain(tiers, 8, size=120)
    model = routed()
    policy = ContextPolicy(recent_max_messages=20, recent_max_tokens=300,
                           summary_trigger_fraction=0.5, summary_keep_messages=4)
    context = await MemoryContextBuilder(tiers, policy=policy, model=model).build(
        ALICE, OWNER, "status?")
    assert "summarize" not in model.tasks() and context.summary is None
    # Token trimming alone: the window fits and never opens on a tool result.
    assert context.window_tokens <= 300 and context.messages[0].role is not Role.TOOL


async def test_step5_catch_up_reads_at_most_four_pages_per_turn_and_resumes(
        tiers: MemoryTiers, manager: GovernedMemoryManager) -> None:
    await converse(tiers, 60, words=20)  # 120 turns; the window loads the last 12
    model = routed()
    policy = ContextPolicy(recent_max_messages=12, recent_max_tokens=400,
                           summary_trigger_fraction=0.5, summary_keep_messages=4,
                           summary_page_size=10)
    builder = MemoryContextBuilder(tiers, policy=policy, model=model)
    first = await builder.build(ALICE, OWNER, "q1")
    assert model.tasks().count("summarize") == 4
    assert "summary.catching_up" in first.degraded
    record = await manager.get(ALICE, SESSION_SCOPE, key=summary_key("s1"))
    assert record.metadata[FRONTIER] == 40
    # The current turn still gets its recent window.
    assert [t.seq for t in first.messages][-1] == 120 and first.window_tokens <= 400
    for _ in range(3):
        await builder.build(ALICE, OWNER, "again")
    record = await manager.get(ALICE, SESSION_SCOPE, key=summary_key("s1"))
    assert record.metadata[FRONTIER] == 116  # caught up, then folded the window's head
    pages = [c for c in model.calls if c.task == "summarize"]
    assert all(c.user.count("\nuser: ") + c.user.count("\nassistant: ") <= 10 for c in pages)


# -- step 6: trimming ------------------------------------------------------------------------

async def test_step6_the_window_never_opens_on_a_tool_result(tiers: MemoryTiers) -> None:
    await tool_chain(tiers, 6, size=60)
    for budget in range(30, 400, 7):
        policy = ContextPolicy(recent_max_messages=20, recent_max_tokens=budget,
                               summary_keep_messages=4)
        context = await MemoryContextBuilder(tiers, policy=policy).build(ALICE, OWNER, "?")
        assert context.messages and context.messages[0].role is not Role.TOOL
        if "window.over_budget" not in context.degraded:
            assert context.window_tokens <= budget


async def test_step6_a_budget_too_small_keeps_the_newest_message(tiers: MemoryTiers) -> None:
    await tiers.append(ALICE, OWNER, TurnDraft.user("a fairly long question " * 10))
    policy = ContextPolicy(recent_max_tokens=5, summary_keep_messages=4)
    context = await MemoryContextBuilder(tiers, policy=policy).build(ALICE, OWNER, "?")
    assert len(context.messages) == 1 and "window.over_budget" in context.degraded


async def test_step6_an_injected_token_counter_is_used(tiers: MemoryTiers) -> None:
    await converse(tiers, 4, words=5)
    words = ContextPolicy(recent_max_tokens=40, summary_keep_messages=4)

    def count(text: str) -> int:
        return len(text.split())

    context = await MemoryContextBuilder(tiers, policy=words, token_counter=count).build(
        ALICE, OWNER, "?")
    assert context.window_tokens <= 40
    assert len(context.messages) == 2  # each turn is 7 words + 4 overhead = 11
    assert approximate_tokens("abcd" * 10) == 10 and approximate_tokens("日本語") == 3


# -- step 7: condensing ----------------------------------------------------------------------

async def test_step7_one_call_rewrites_the_question_and_names_types(tiers: MemoryTiers) -> None:
    await converse(tiers, 1, words=2)
    model = routed(condense={"query": "who owns the ingest pipeline",
                             "wanted_types": ["decision", "bogus", "summary", "fact",
                                              "preference", "episode"]})
    context = await MemoryContextBuilder(tiers, model=model).build(
        ALICE, OWNER, "and who owns it?")
    assert model.tasks() == ["condense"]
    assert context.standalone_query == "who owns the ingest pipeline" and context.rewritten
    assert context.wanted_types == (MemoryType.DECISION, MemoryType.FACT,
                                    MemoryType.PREFERENCE)


async def test_step7_an_unchanged_rewrite_is_not_rewritten(tiers: MemoryTiers) -> None:
    await converse(tiers, 1, words=2)
    context = await MemoryContextBuilder(tiers, model=routed()).build(ALICE, OWNER, "same?")
    assert context.standalone_query == "same?" and not context.rewritten


@pytest.mark.parametrize("answer", [{"query": "   "}, {"query": "x" * 5000}, {"query": 7},
                                    {"nothing": 1}])
async def test_step7_an_empty_or_implausible_rewrite_is_rejected(tiers: MemoryTiers,
                                                                 answer: object) -> None:
    await converse(tiers, 1, words=2)
    context = await MemoryContextBuilder(tiers, model=routed(condense=answer)).build(
        ALICE, OWNER, "and it?")
    assert context.standalone_query == "and it?" and not context.rewritten
    assert "rewrite.rejected" in context.degraded


async def test_step7_no_structured_output_falls_back_to_text_without_types(
        tiers: MemoryTiers) -> None:
    await converse(tiers, 1, words=2)

    def condense(call: object) -> object:
        if getattr(call, "structured", False):
            return NotImplementedError("no structured output")
        return "the standalone query"

    context = await MemoryContextBuilder(tiers, model=routed(condense=condense)).build(
        ALICE, OWNER, "and it?")
    assert context.standalone_query == "the standalone query" and context.wanted_types == ()


async def test_step7_without_history_no_model_is_called(tiers: MemoryTiers) -> None:
    model = routed()
    context = await MemoryContextBuilder(tiers, model=model).build(ALICE, OWNER, "hello")
    assert model.calls == [] and context.standalone_query == "hello"


# -- step 8 and the context event ------------------------------------------------------------

async def test_step8_recall_uses_the_standalone_query_and_the_event_names_versions(
        tiers: MemoryTiers, manager: GovernedMemoryManager, sink: InMemoryEventSink) -> None:
    await converse(tiers, 1, words=2)
    owner_user = USER_SCOPE
    kept = await manager.add(ALICE, owner_user, "Dana owns the ingest pipeline",
                             memory_type="fact")
    await manager.add(ALICE, owner_user, "Alice prefers short answers",
                      memory_type="preference")
    model = routed(condense={"query": "ingest pipeline owner", "wanted_types": ["fact"]})
    sink.clear()
    context = await MemoryContextBuilder(tiers, model=model).build(ALICE, OWNER, "who owns it?")
    assert [m.record.id for m in context.recalled] == [kept.id]
    assert "Dana owns the ingest pipeline" in context.memory_block
    record = [e for e in sink.events if e.operation == "record_context"]
    assert [e.type for e in record] == ["memory.read.requested", "memory.read.completed"]
    assert record[-1].record_ids == (kept.id,) and record[-1].versions == (1,)
    assert record[-1].content_hashes == (kept.content_hash,)
    assert all("Dana" not in e.to_json() for e in sink.events)


async def test_model_failures_never_fail_the_turn(tiers: MemoryTiers,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    await converse(tiers, 6, words=20)
    model = ScriptedModel(responder=lambda call: LanguageModelError("down"))
    context = await MemoryContextBuilder(tiers, policy=POLICY, model=model).build(
        ALICE, OWNER, "still there?")
    assert context.standalone_query == "still there?" and context.summary is None
    assert {"summary.refresh_failed", "rewrite.failed"} <= set(context.degraded)
    assert context.window_tokens <= POLICY.recent_max_tokens
    assert any(r.levelname == "WARNING" for r in caplog.records)
    assert roles(context.messages)[0] is Role.USER


async def test_step5_a_cleared_gap_does_not_stall_catch_up(
        tiers: MemoryTiers, manager: GovernedMemoryManager) -> None:
    await converse(tiers, 5, words=2)                      # seq 1..10
    await manager.add(ALICE, SESSION_SCOPE, "early talk", memory_type="summary",
                      key=summary_key("s1"), metadata={FRONTIER: 4})
    # Turns 5..10 disappear (another tool cleared them), but the summary row stays.
    store = tiers.turn_store
    assert store is not None
    session = await store.recent(SESSION_SCOPE, 100)
    await store.clear(SESSION_SCOPE)
    assert len(session) == 10
    await converse(tiers, 10, words=20, start=5)           # seq 11..30
    model = routed()
    policy = ContextPolicy(recent_max_messages=12, recent_max_tokens=400,
                           summary_trigger_fraction=0.5, summary_keep_messages=4)
    context = await MemoryContextBuilder(tiers, policy=policy, model=model).build(
        ALICE, OWNER, "next?")
    assert "summary.catching_up" not in context.degraded
    record = await manager.get(ALICE, SESSION_SCOPE, key=summary_key("s1"))
    assert record.metadata[FRONTIER] == 26  # folded the window's head, not stuck at 4
    assert [t.seq for t in context.messages] == [27, 28, 29, 30]


async def test_clearing_a_session_erases_its_summary(
        tiers: MemoryTiers, manager: GovernedMemoryManager) -> None:
    await converse(tiers, 6, words=20)
    await MemoryContextBuilder(tiers, policy=POLICY, model=routed()).build(ALICE, OWNER, "x")
    assert (await manager.get(ALICE, SESSION_SCOPE, key=summary_key("s1"))).content
    with pytest.raises(MemoryScopeError, match="memory:delete"):
        await tiers.clear(ALICE, OWNER)  # clearing takes memory:delete
    deleter = Principal("user:alice", PrincipalKind.USER, "acme", "alice",
                        ["memory:read", "memory:write", "memory:delete"])
    assert await tiers.clear(deleter, OWNER) == 12
    context = await MemoryContextBuilder(tiers, policy=POLICY).build(ALICE, OWNER, "again")
    assert context.summary is None and context.messages == ()


async def test_anchors_are_echoed_and_recalled_entities_seed_a_follow_up(
        tiers: MemoryTiers, manager: GovernedMemoryManager) -> None:
    user = USER_SCOPE
    await manager.add(ALICE, user, "ingest runs nightly", entity_ids=["kg:ingest", "kg:cron"])
    await manager.add(ALICE, user, "ingest is owned by Dana", entity_ids=["kg:dana",
                                                                          "kg:ingest"])
    context = await MemoryContextBuilder(tiers).build(
        ALICE, OWNER, "ingest", anchor_entity_ids=["kg:dana", "kg:dana"])
    assert context.anchor_entity_ids == ("kg:dana",)
    assert context.recalled[0].record.content == "ingest is owned by Dana"
    assert context.recalled_entity_ids == ("kg:dana", "kg:ingest", "kg:cron")


class _BrokenTurns:
    name = "broken"
    durable = False

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def recent(self, scope: Scope, limit: int) -> tuple[object, ...]:
        raise OSError("disk gone")


async def test_row_turn_store_raises_gives_an_empty_window(
        manager: GovernedMemoryManager) -> None:
    tiers = MemoryTiers(long_term=manager, turns=_BrokenTurns())  # type: ignore[arg-type]
    context = await MemoryContextBuilder(tiers, model=routed()).build(ALICE, OWNER, "hi")
    assert context.messages == () and "history.unavailable" in context.degraded


async def test_row_a_refused_context_record_still_returns_the_context(
        manager: GovernedMemoryManager) -> None:
    from governed_memory.policy import PolicyCheck, PolicyVerdict
    from governed_memory.tiers import InMemoryTurnStore
    from governed_memory.tiers.governance import Governance

    class NoRecords:
        name = "no-records"
        revision = "1"

        async def evaluate(self, check: PolicyCheck) -> PolicyVerdict:
            if check.operation.value == "record_context":
                return PolicyVerdict.deny("not here")
            return PolicyVerdict.allow()

    governance = Governance.standalone(policies=[NoRecords()], clock=manager.clock)
    tiers = MemoryTiers(long_term=manager, turns=InMemoryTurnStore(), governance=governance)
    await tiers.append(ALICE, OWNER, TurnDraft.user("hello"))
    context = await MemoryContextBuilder(tiers).build(ALICE, OWNER, "hi")
    assert [t.content for t in context.messages] == ["hello"]
    assert "context.record_failed" in context.degraded
