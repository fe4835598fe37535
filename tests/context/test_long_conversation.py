"""A 200-turn conversation through the builder: every window within its budget, the
block within its share, the summary frontier only moving forward, and no turn sent to
the summary model twice."""

from __future__ import annotations

import re

from context_support import ALICE, OWNER, SESSION_SCOPE, USER_SCOPE, routed
from governed_memory import GovernedMemoryManager, MemoryNotFoundError
from governed_memory.tiers import MemoryTiers, Role, ToolCall, TurnDraft
from governed_memory.turncontext import ContextPolicy, MemoryContextBuilder
from governed_memory.turncontext.summarizer import FRONTIER, summary_key
from governed_memory.turncontext.tokens import approximate_tokens

POLICY = ContextPolicy(recent_max_messages=40, recent_max_tokens=600,
                       summary_trigger_fraction=0.6, summary_keep_messages=6,
                       recall_top_k=5, block_budget_fraction=0.25)


async def test_two_hundred_turns_never_exceed_the_budget(
        tiers: MemoryTiers, manager: GovernedMemoryManager) -> None:
    for i in range(30):
        await manager.add(ALICE, USER_SCOPE, f"memory {i} about topic{i % 7} " + "fact " * i)
    model = routed(condense=lambda call: {"query": "topic" + str(len(call.user) % 7),
                                          "wanted_types": ["fact"]})
    builder = MemoryContextBuilder(tiers, policy=POLICY, model=model)
    frontiers: list[int] = []
    turn = 0
    while turn < 200:
        question = f"question {turn}: " + "word " * (turn % 23)
        context = await builder.build(ALICE, OWNER, question)
        assert context.window_tokens <= POLICY.recent_max_tokens, turn
        assert "window.over_budget" not in context.degraded
        assert approximate_tokens(context.memory_block) <= POLICY.block_budget_tokens
        assert not context.messages or context.messages[0].role is not Role.TOOL
        assert context.messages == tuple(sorted(context.messages, key=lambda t: t.seq))
        await tiers.append(ALICE, OWNER, TurnDraft.user(question))
        turn += 1
        if turn % 9 == 0:  # now and then an agent step with a tool call
            call = ToolCall(f"c{turn}", "lookup", '{"k": 1}')
            await tiers.append(ALICE, OWNER, TurnDraft.assistant("", tool_calls=(call,)))
            await tiers.append(ALICE, OWNER, TurnDraft.tool(f"c{turn}", "x " * (turn % 40)))
            turn += 2
        await tiers.append(ALICE, OWNER, TurnDraft.assistant(f"answer {turn} " + "ok " * 15))
        turn += 1
        try:
            record = await manager.get(ALICE, SESSION_SCOPE, key=summary_key("s1"))
            frontiers.append(record.metadata[FRONTIER])
        except MemoryNotFoundError:  # no summary yet
            frontiers.append(0)
    assert frontiers == sorted(frontiers) and frontiers[-1] > 150
    # No turn was folded into the summary twice.
    folded: list[str] = []
    for call in model.calls:
        if call.task == "summarize":
            folded += re.findall(r"question (\d+):", call.user.split("New turns:", 1)[1])
    assert len(folded) == len(set(folded))
