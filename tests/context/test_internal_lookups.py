"""A component's expected miss is not a failure in the trail, and a profile's
``[context]`` budgets reach the context builder without being passed by hand."""

from __future__ import annotations

import pytest
from context_support import ALICE, BOB, OWNER, SESSION_SCOPE
from governed_memory import GovernedMemoryManager
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryScopeError
from governed_memory.events import InMemoryEventSink
from governed_memory.profiles import loads_profile
from governed_memory.tiers import InMemoryTurnStore, MemoryTiers, Role, TurnDraft
from governed_memory.turncontext import MemoryContextBuilder


async def test_a_lookup_miss_is_a_completed_read(manager: GovernedMemoryManager,
                                                 sink: InMemoryEventSink,
                                                 clock: ManualClock) -> None:
    assert await manager.lookup(ALICE, SESSION_SCOPE, key="summary:s1") is None
    assert sink.types() == ["memory.read.requested", "memory.read.completed"]
    assert sink.events[-1].operation == "lookup" and sink.events[-1].count == 0
    record = await manager.add(ALICE, SESSION_SCOPE, "a note", key="k",
                               expires_at=clock.now() + 10)
    found = await manager.lookup(ALICE, SESSION_SCOPE, key="k")
    assert found is not None and found.id == record.id
    assert sink.events[-1].record_ids == (record.id,)
    clock.advance(11)
    assert await manager.lookup(ALICE, SESSION_SCOPE, record.id) is None  # expired: gone
    with pytest.raises(MemoryScopeError):  # still governed: another user's scope
        await manager.lookup(BOB, SESSION_SCOPE, key="k")


async def test_the_first_turn_leaves_no_failed_read_in_the_trail(
        tiers: MemoryTiers, sink: InMemoryEventSink) -> None:
    builder = MemoryContextBuilder(tiers)
    await tiers.append(ALICE, OWNER, TurnDraft(Role.USER, "hello there"))
    sink.clear()
    await builder.build(ALICE, OWNER, "what did I say?")
    assert not [e for e in sink.events if e.type.endswith((".rejected", ".failed"))]
    lookups = [e for e in sink.events if e.operation == "lookup"]
    assert lookups and lookups[-1].type == "memory.read.completed"


PROFILE = """
spec_version = 1
id = "context-budgets"
version = "1.0.0"
[provider]
name = "native"
config = { backend = "memory" }
[context]
budget_tokens = 321
max_memories = 7
max_turns = 9
"""


async def test_the_profile_context_budgets_reach_the_builder() -> None:
    manager = GovernedMemoryManager.from_profile(loads_profile(PROFILE))
    tiers = MemoryTiers(long_term=manager, turns=InMemoryTurnStore())
    policy = MemoryContextBuilder(tiers).policy
    assert (policy.recent_max_tokens, policy.recall_top_k, policy.recent_max_messages) == (
        321, 7, 9)
    plain = MemoryContextBuilder(MemoryTiers(
        long_term=GovernedMemoryManager.from_plugins("native", {"backend": "memory"}),
        turns=InMemoryTurnStore())).policy
    assert plain.recall_top_k != 7  # no profile: the builder's own defaults
