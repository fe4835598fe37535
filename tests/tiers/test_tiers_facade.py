"""The three tiers behind one facade: each optional, each governed by the activity port
(validation, decision, span, scope check, events), ``snapshot`` bound to its caller."""

from __future__ import annotations

import pytest
from actors import ADMIN, ALICE
from governed_memory import (
    GovernedMemoryManager,
    MemoryConflictError,
    MemoryNotFoundError,
    MemoryScopeError,
    MemoryValidationError,
    Principal,
    PrincipalKind,
    Scope,
)
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryConfigurationError, MemoryStorageError
from governed_memory.events import InMemoryEventSink
from governed_memory.scope import ScopeLevel
from governed_memory.tiers import (
    InMemoryTurnStore,
    InMemoryWorkingStateStore,
    MemoryTiers,
    Role,
    ToolCall,
    Turn,
    TurnDraft,
)
from governed_memory.tiers.governance import Governance
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

OWNER = Scope("acme", project_id="p", user_id="alice", session_id="s1", run_id="r1")
BOB = Principal("user:bob", PrincipalKind.USER, "acme", "bob")
MARKER = "ZEBRA-TURN-4471"


async def test_an_unconfigured_tier_raises_a_configuration_error() -> None:
    memory = MemoryTiers()
    with pytest.raises(MemoryConfigurationError, match="conversation"):
        await memory.append(ALICE, OWNER, TurnDraft.user("hi"))
    with pytest.raises(MemoryConfigurationError, match="conversation"):
        await memory.recent(ALICE, OWNER)
    with pytest.raises(MemoryConfigurationError, match="working"):
        await memory.scratch(ALICE, OWNER)
    with pytest.raises(MemoryConfigurationError, match="working"):
        await memory.update(ALICE, OWNER, {"a": 1})
    with pytest.raises(MemoryConfigurationError, match="long-term"):
        await memory.save(ALICE, OWNER, "x")
    # A snapshot reads only what is configured.
    snap = await memory.snapshot(ALICE, OWNER, query="anything")
    assert (snap.turns, dict(snap.working_state), snap.memories) == ((), {}, ())


async def test_turns_round_trip_in_order_through_the_port(
        tiers: MemoryTiers, sink: InMemoryEventSink, spans: InMemorySpanExporter) -> None:
    sink.clear()
    first = await tiers.append(ALICE, OWNER, TurnDraft.user(f"hello {MARKER}"))
    call = ToolCall("call_1", "lookup", '{"q": "x"}')
    await tiers.append(ALICE, OWNER, TurnDraft.assistant("", tool_calls=(call,)))
    await tiers.append(ALICE, OWNER, TurnDraft.tool("call_1", "result"))
    turns = await tiers.recent(ALICE, OWNER)
    assert [t.role for t in turns] == [Role.USER, Role.ASSISTANT, Role.TOOL]
    assert [t.seq for t in turns] == [1, 2, 3]
    assert turns[0] == first and turns[1].tool_calls == (call,)
    assert [t.seq for t in await tiers.recent(ALICE, OWNER, limit=2)] == [2, 3]
    assert [t.seq for t in await tiers.turns_after(ALICE, OWNER, 1, limit=1)] == [2]
    # Every call was decided and recorded; no event carries the content.
    assert sink.types()[:2] == ["memory.write.requested", "memory.write.committed"]
    committed = [e for e in sink.events if e.type == "memory.write.committed"]
    assert [e.operation for e in committed] == ["append_turn"] * 3
    assert committed[0].record_ids == (first.turn_id,) and committed[0].decision_id
    assert all(MARKER not in e.to_json() for e in sink.events)
    reads = [e for e in sink.events if e.type == "memory.read.completed"]
    assert {e.operation for e in reads} == {"recent_turns", "list_turns"}
    assert any(s.name == "create_memory turns:memory" for s in spans.get_finished_spans())
    assert await tiers.clear(ALICE, OWNER) == 3
    assert await tiers.recent(ALICE, OWNER) == ()
    # Sequence numbers keep counting after a clear.
    assert (await tiers.append(ALICE, OWNER, TurnDraft.user("again"))).seq == 4


async def test_turns_are_per_exact_session(tiers: MemoryTiers) -> None:
    await tiers.append(ALICE, OWNER, TurnDraft.user("in s1"))
    other = OWNER.replace(session_id="s2")
    await tiers.append(ALICE, other, TurnDraft.user("in s2"))
    # The run id does not split a session: turns key on the session level.
    same_session = OWNER.replace(run_id="r2")
    assert [t.content for t in await tiers.recent(ALICE, same_session)] == ["in s1"]
    assert [t.content for t in await tiers.recent(ALICE, other)] == ["in s2"]


async def test_the_scope_rule_guards_turns(tiers: MemoryTiers, sink: InMemoryEventSink) -> None:
    await tiers.append(ALICE, OWNER, TurnDraft.user("private"))
    sink.clear()
    with pytest.raises(MemoryScopeError):
        await tiers.recent(BOB, OWNER)
    assert sink.types() == ["memory.read.requested", "memory.read.rejected"]
    with pytest.raises(MemoryScopeError):
        await tiers.append(BOB, OWNER, TurnDraft.user("intrusion"))
    assert [t.content for t in await tiers.recent(ALICE, OWNER)] == ["private"]


async def test_a_named_turn_is_stored_once(tiers: MemoryTiers) -> None:
    draft = TurnDraft.user("once", turn_id="t-1")
    first = await tiers.append(ALICE, OWNER, draft)
    again = await tiers.append(ALICE, OWNER, draft)
    assert again == first and len(await tiers.recent(ALICE, OWNER)) == 1
    with pytest.raises(MemoryConflictError):
        await tiers.append(ALICE, OWNER, TurnDraft.user("different", turn_id="t-1"))


@pytest.mark.parametrize("draft", [
    TurnDraft(Role.TOOL, "no call id"),
    TurnDraft(Role.USER, "x", tool_call_id="c1"),
    TurnDraft(Role.USER, "x", tool_calls=(ToolCall("c", "f"),)),
    TurnDraft(Role.USER, "   "),
    TurnDraft(Role.USER, "x" * (64 * 1024 + 1)),
    TurnDraft(Role.USER, "x", turn_id="bad*id"),
])
async def test_bad_turns_are_refused_before_storage(tiers: MemoryTiers, sink: InMemoryEventSink,
                                                    draft: TurnDraft) -> None:
    sink.clear()
    with pytest.raises(MemoryValidationError):
        await tiers.append(ALICE, OWNER, draft)
    assert sink.types() == ["memory.write.rejected"]
    assert await tiers.recent(ALICE, OWNER) == ()


async def test_turns_need_a_session(tiers: MemoryTiers) -> None:
    with pytest.raises(MemoryValidationError, match="session"):
        await tiers.append(ALICE, Scope("acme", user_id="alice"), TurnDraft.user("x"))


async def test_working_state_merges_replaces_and_expires(tiers: MemoryTiers,
                                                         clock: ManualClock) -> None:
    await tiers.update(ALICE, OWNER, {"step": "retrieval", "candidates": 12})
    state = await tiers.update(ALICE, OWNER, {"candidates": 3}, ttl_seconds=60)
    assert dict(state.state) == {"step": "retrieval", "candidates": 3}
    assert state.revision == 2 and state.expires_at == clock.now() + 60
    assert await tiers.scratch(ALICE, OWNER) == {"step": "retrieval", "candidates": 3}
    await tiers.update(ALICE, OWNER, {"only": True}, replace=True, ttl_seconds=60)
    assert await tiers.scratch(ALICE, OWNER) == {"only": True}
    # Another run of the same session has its own state.
    assert await tiers.scratch(ALICE, OWNER.replace(run_id="r2")) == {}
    clock.advance(60)
    assert await tiers.scratch(ALICE, OWNER) == {}
    await tiers.update(ALICE, OWNER, {"a": 1})
    assert await tiers.clear_working(ALICE, OWNER) is True
    assert await tiers.clear_working(ALICE, OWNER) is False


@pytest.mark.parametrize(("state", "ttl"), [
    ({"x": float("nan")}, 10), ({"x": {1, 2}}, 10), ({"x": 1}, 0), ({"x": 1}, -5),
    ({"x": "y" * (64 * 1024)}, 10), ({"x": 1}, float("inf")),
])
async def test_bad_working_state_is_refused(tiers: MemoryTiers, state: dict[str, object],
                                            ttl: float) -> None:
    with pytest.raises(MemoryValidationError):
        await tiers.update(ALICE, OWNER, state, ttl_seconds=ttl)
    assert await tiers.scratch(ALICE, OWNER) == {}


async def test_working_state_needs_a_run(tiers: MemoryTiers) -> None:
    with pytest.raises(MemoryValidationError, match="run_id"):
        await tiers.update(ALICE, OWNER.replace(run_id=None), {"a": 1})


async def test_snapshot_returns_every_tier(tiers: MemoryTiers) -> None:
    await tiers.append(ALICE, OWNER, TurnDraft.user("what tea do I like?"))
    await tiers.update(ALICE, OWNER, {"step": "answer"})
    saved = await tiers.save(ALICE, OWNER, "Alice likes green tea",
                             memory_type="preference", level=ScopeLevel.USER)
    assert saved.scope == Scope("acme", user_id="alice")
    snap = await tiers.snapshot(ALICE, OWNER, query="green tea")
    assert [t.content for t in snap.turns] == ["what tea do I like?"]
    assert dict(snap.working_state) == {"step": "answer"}
    assert [m.content for m in snap.memories] == ["Alice likes green tea"]
    # A user-level memory comes back in every project of that user, never for Bob.
    elsewhere = Scope("acme", project_id="q", user_id="alice", session_id="s9")
    snap = await tiers.snapshot(ALICE, elsewhere, query="green tea")
    assert [m.id for m in snap.memories] == [saved.id] and snap.turns == ()
    bobs = await tiers.snapshot(BOB, Scope("acme", project_id="p", session_id="s1"),
                                query="green tea")
    assert bobs.memories == ()


async def test_save_get_and_delete_at_a_level(tiers: MemoryTiers) -> None:
    owner = OWNER.replace(agent_id="bot", workspace_id="ws")
    expected = {
        None: owner,
        ScopeLevel.SESSION: Scope("acme", workspace_id="ws", user_id="alice",
                                  session_id="s1", agent_id="bot"),
        ScopeLevel.USER: Scope("acme", workspace_id="ws", user_id="alice"),
        "user": Scope("acme", workspace_id="ws", user_id="alice"),
        ScopeLevel.RUN: owner,
    }
    for level, scope in expected.items():
        record = await tiers.save(ALICE, owner, f"note at {level}", level=level)
        assert record.scope == scope
        assert (await tiers.get(ALICE, owner, record.id, level=level)).id == record.id
        assert (await tiers.get(ALICE, scope, record.id)).id == record.id
    user_note = await tiers.save(ALICE, owner, "a user note", level=ScopeLevel.USER)
    # The same user-level record from another project's owner.
    other = owner.replace(project_id="q", session_id="s2", run_id=None)
    assert (await tiers.get(ALICE, other, user_note.id, level="user")).id == user_note.id
    # Bob never reaches it: not from his own user scope, not by naming Alice's.
    with pytest.raises(MemoryNotFoundError):
        await tiers.get(BOB, other.replace(user_id=None), user_note.id, level="user")
    with pytest.raises(MemoryScopeError):
        await tiers.get(BOB, other, user_note.id, level="user")
    deleted = await tiers.delete(ALICE, other, user_note.id, level=ScopeLevel.USER)
    assert deleted.record_id == user_note.id
    # A level the owner cannot address, or no level at all, writes nothing.
    for bad in ("team", 3):
        with pytest.raises(MemoryValidationError, match="level"):
            await tiers.save(ALICE, owner, "never stored", level=bad)  # type: ignore[arg-type]
    with pytest.raises(MemoryValidationError, match="project"):
        await tiers.save(ALICE, owner.replace(project_id=None), "never stored",
                         level=ScopeLevel.PROJECT)
    # Alice may not write the shared project scope (memory:admin).
    with pytest.raises(MemoryScopeError):
        await tiers.save(ALICE, owner, "never stored", level=ScopeLevel.PROJECT)
    for scope in (owner, expected[ScopeLevel.USER], owner.replace(project_id=None),
                  Scope("acme", workspace_id="ws", project_id="p")):
        listed = await tiers.long_term.list(ADMIN, scope)
        assert "never stored" not in {r.content for r in listed.items}


async def test_snapshot_derives_the_user_from_the_principal(tiers: MemoryTiers) -> None:
    await tiers.append(ALICE, OWNER, TurnDraft.user("hello"))
    no_user = Scope("acme", project_id="p", session_id="s1", run_id="r1")
    snap = await tiers.snapshot(ALICE, no_user)
    assert [t.content for t in snap.turns] == ["hello"]


@pytest.mark.parametrize("owner", [
    OWNER.replace(user_id="bob"),
    Scope("globex", user_id="alice", session_id="s1"),
])
async def test_snapshot_refuses_an_owner_that_is_not_the_caller(
        tiers: MemoryTiers, sink: InMemoryEventSink, owner: Scope) -> None:
    sink.clear()
    with pytest.raises(MemoryScopeError):
        await tiers.snapshot(ALICE, owner, query="x")
    assert sink.events == []  # refused before reading anything


async def test_snapshot_refuses_a_service_acting_for_another_tenant(tiers: MemoryTiers) -> None:
    with pytest.raises(MemoryScopeError):
        await tiers.snapshot(ADMIN, Scope("globex", session_id="s1"))


class _LeakyStore(InMemoryTurnStore):
    """A broken store that answers with another session's turns."""

    def __init__(self, leak: Turn) -> None:
        super().__init__()
        self.leak = leak

    async def recent(self, scope: Scope, limit: int) -> tuple[Turn, ...]:
        return (*await super().recent(scope, limit), self.leak)


async def test_a_turn_of_another_scope_is_dropped_and_reported(
        manager: GovernedMemoryManager, sink: InMemoryEventSink) -> None:
    leak = Turn("leak-1", 1, "sh1:other", Role.USER, "someone else's", 0.0)
    memory = MemoryTiers(long_term=manager, turns=_LeakyStore(leak))
    await memory.append(ALICE, OWNER, TurnDraft.user("mine"))
    sink.clear()
    turns = await memory.recent(ALICE, OWNER)
    assert [t.content for t in turns] == ["mine"]
    violation = [e for e in sink.events if e.type == "memory.read.scope_violation"]
    assert violation and violation[0].record_ids == ("leak-1",)


class _WrongScopeAppend(InMemoryTurnStore):
    async def append(self, scope: Scope, draft: TurnDraft, now: float) -> Turn:
        return await super().append(scope.replace(session_id="elsewhere"), draft, now)


async def test_an_append_answered_for_another_scope_fails(sink: InMemoryEventSink) -> None:
    memory = MemoryTiers(turns=_WrongScopeAppend(),
                         governance=Governance.standalone(sinks=[sink]))
    with pytest.raises(MemoryStorageError):
        await memory.append(ALICE, OWNER, TurnDraft.user("x"))
    assert sink.types()[-1] == "memory.write.failed"


async def test_standalone_tiers_have_their_own_governance(sink: InMemoryEventSink) -> None:
    memory = MemoryTiers(working=InMemoryWorkingStateStore(),
                         governance=Governance.standalone(sinks=[sink]))
    await memory.update(ALICE, OWNER, {"a": 1})
    assert sink.types() == ["memory.write.requested", "memory.write.committed"]
    assert sink.events[-1].operation == "update_working_state"


async def test_a_profile_declares_the_tier_stores(tmp_path: object, clock: ManualClock) -> None:
    from pathlib import Path

    from governed_memory.profiles import parse_profile

    spec = parse_profile({
        "id": "chat", "version": "1.0.0",
        "provider": {"name": "native", "config": {"backend": "memory"}},
        "stores": {"turns": {"kind": "sqlite",
                             "config": {"path": str(Path(str(tmp_path)) / "turns.db")}}},
        "context": {"max_turns": 7},
    })
    manager = GovernedMemoryManager.from_profile(spec, clock=clock)
    memory = MemoryTiers.from_manager(manager)
    async with memory:
        assert memory.has_turns and not memory.has_working and memory.recent_limit == 7
        await memory.append(ALICE, OWNER, TurnDraft.user("persisted"))
        assert [t.content for t in await memory.recent(ALICE, OWNER)] == ["persisted"]
    assert memory.turn_store is not None and memory.turn_store.durable


async def test_erasing_a_user_removes_their_turns_and_memories(
        tiers: MemoryTiers, sink: InMemoryEventSink) -> None:
    await tiers.append(ALICE, OWNER, TurnDraft.user("alice s1"))
    await tiers.append(ALICE, OWNER.replace(session_id="s2"), TurnDraft.user("alice s2"))
    bob_owner = OWNER.replace(user_id="bob")
    await tiers.append(ADMIN, bob_owner, TurnDraft.user("bob"))
    await tiers.save(ALICE, OWNER.replace(session_id=None, run_id=None), "Alice likes tea")
    with pytest.raises(MemoryScopeError):  # erasure takes memory:admin
        await tiers.delete_user(ALICE, "acme", "alice")
    sink.clear()
    erased = await tiers.delete_user(ADMIN, "acme", "alice")
    assert erased.turns_removed == 2
    assert erased.memories is not None and erased.memories.total == 1
    assert await tiers.recent(ADMIN, OWNER) == ()
    assert [t.content for t in await tiers.recent(ADMIN, bob_owner)] == ["bob"]
    committed = [e for e in sink.events if e.type == "memory.write.committed"]
    assert [e.operation for e in committed] == ["erase_user_turns", "delete_user"]
    assert committed[0].count == 2


async def test_tier_operations_count_in_the_managers_metrics(clock: ManualClock) -> None:
    from governed_memory_native import build_native_provider
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    manager = GovernedMemoryManager(build_native_provider({"backend": "memory"}, clock),
                                    clock=clock, meter_provider=MeterProvider(
                                        metric_readers=[reader]))
    memory = MemoryTiers(long_term=manager, turns=InMemoryTurnStore())
    await memory.append(ALICE, OWNER, TurnDraft.user("counted"))
    data = reader.get_metrics_data()
    assert data is not None
    operations = {point.attributes.get("governed_memory.operation")
                  for resource in data.resource_metrics for scope in resource.scope_metrics
                  for metric in scope.metrics for point in metric.data.data_points}
    assert "append_turn" in operations
