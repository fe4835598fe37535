"""``manager.remember``: memories from a conversation, each fact decided against what the
scope holds (added, updated, superseded, unchanged, held for review, refused), each
write its own governed operation, idempotent on the source turns, with provenance
naming the turns and the model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from governed_memory import GovernedMemoryManager, Principal, Scope
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryConfigurationError, MemoryValidationError
from governed_memory.events import InMemoryEventSink, MemoryEvent
from governed_memory.language_models import LanguageModelError, ScriptedModel
from governed_memory.profiles import loads_profile
from governed_memory.profiles.convert import ProfileLoadError
from governed_memory.records import RecordStatus
from governed_memory.remembering import Decision, Message, RememberResult
from governed_memory.sync import SyncMemoryManager
from governed_memory_native import build_native_provider
from remember_support import says, scripted

ALICE = Principal("user:alice", "user", "acme", "alice")
MINE = Scope("acme", user_id="alice")

PROFILE = """\
spec_version = 1
id = "remember-test"
version = "1.0.0"

[provider]
name = "native"

[provider.config]
backend = "memory"

[write]
review_source_types = ["web", "tool"{extra}]

[privacy]
secret_guard = "reject"

[policies]
enabled = ["permissions", "write-rules", "secret-guard", "write-review"]
{stores}"""


def profile(*, hold_inferred: bool = True, stores: str = "") -> str:
    return PROFILE.format(extra=', "inferred"' if hold_inferred else "", stores=stores)


@pytest.fixture
async def plain(clock: ManualClock, sink: InMemoryEventSink
                ) -> AsyncIterator[GovernedMemoryManager]:
    """A manager with no policies, over the native in-memory backend, and the model."""
    async with GovernedMemoryManager(build_native_provider({"backend": "memory"}, clock),
                                     clock=clock, sinks=[sink],
                                     language_model=scripted()) as manager:
        yield manager


@pytest.fixture
async def governed(clock: ManualClock, sink: InMemoryEventSink
                   ) -> AsyncIterator[GovernedMemoryManager]:
    """A manager from a profile: the secret guard refuses, web, tool and inferred
    memories are held for review."""
    manager = GovernedMemoryManager.from_profile(loads_profile(profile()), clock=clock,
                                                 sinks=[sink])
    manager.language_model = scripted()
    async with manager:
        yield manager


def writes(sink: InMemoryEventSink) -> list[MemoryEvent]:
    """The outcome events of write operations (each write's one outcome)."""
    return [e for e in sink.events if e.type.startswith("memory.write.")
            and not e.type.endswith(".requested")]


def kinds(result: RememberResult) -> list[str]:
    return [d.decision.value for d in result.decisions]


async def test_facts_are_added_with_provenance_naming_the_turns_and_the_model(
        plain: GovernedMemoryManager) -> None:
    result = await plain.remember(ALICE, MINE, says("I prefer green tea", "I live in Lyon"))
    assert kinds(result) == ["added", "added"]
    assert result.model == "scripted" and result.model_calls == 1 and result.windows == 1
    tea = await plain.get(ALICE, MINE, result.decisions[0].record_id)
    assert tea.content == "Alice prefers green tea"
    assert tea.memory_type.value == "preference"
    assert tea.provenance.source_type == "conversation"
    assert tea.provenance.source_id == "t1"
    assert tea.metadata["source_turn_ids"] == ["t1"]
    assert tea.metadata["extracted_by"] == "scripted"
    assert result.decisions[1].source_turn_ids == ("t2",)
    # The prompt is kept nowhere: not in the record, its metadata or its provenance.
    assert "Task:" not in repr(tea) and "<conversation>" not in repr(tea)


async def test_a_retried_call_writes_nothing_new(plain: GovernedMemoryManager,
                                                 sink: InMemoryEventSink) -> None:
    conversation = says("I prefer green tea", "I live in Lyon")
    first = await plain.remember(ALICE, MINE, conversation)
    written = len(writes(sink))
    again = await plain.remember(ALICE, MINE, conversation)
    assert kinds(again) == ["unchanged", "unchanged"]
    assert [d.record_id for d in again.decisions] == [d.record_id for d in first.decisions]
    assert len(writes(sink)) == written  # not one write more
    page = await plain.list(ALICE, MINE)
    assert sorted(r.content for r in page.items) == ["Alice lives in Lyon",
                                                     "Alice prefers green tea"]
    assert all(r.version == 1 for r in page.items)


async def test_a_retry_without_turn_ids_writes_nothing_new(
        plain: GovernedMemoryManager) -> None:
    conversation = [{"role": "user", "content": "I prefer green tea"}]
    await plain.remember(ALICE, MINE, conversation)
    again = await plain.remember(ALICE, MINE, conversation)
    assert kinds(again) == ["unchanged"]
    assert again.decisions[0].source_turn_ids[0].startswith("m0:")
    assert len((await plain.list(ALICE, MINE)).items) == 1


async def test_a_contradicting_fact_supersedes_the_old_memory_with_history_kept(
        plain: GovernedMemoryManager, clock: ManualClock) -> None:
    first = await plain.remember(ALICE, MINE, says("I prefer green tea"))
    before = clock.now()
    clock.advance(60)
    result = await plain.remember(ALICE, MINE, says("I switched to coffee", prefix="u"))
    assert kinds(result) == ["superseded"]
    assert result.model_calls == 2  # the facts, then how the one relates to a memory
    (decision,) = result.decisions
    old_id = first.decisions[0].record_id
    assert decision.previous_id == old_id
    new = await plain.get(ALICE, MINE, decision.record_id)
    assert new.content == "Alice prefers coffee" and new.supersedes == old_id
    old = await plain.get(ALICE, MINE, old_id)  # still readable
    assert old.superseded_by == new.id and old.invalid_at == clock.now()
    assert [v.record.version for v in await plain.history(ALICE, MINE, old_id)] == [1, 2]
    # Search sees what is true now; as of before the change, the old preference.
    now = await plain.search(ALICE, MINE, "Alice prefers")
    assert [r.content for r in now.records] == ["Alice prefers coffee"]
    then = await plain.search(ALICE, MINE, "Alice prefers", as_of=before)
    assert [r.content for r in then.records] == ["Alice prefers green tea"]
    # A retry of the second call changes nothing more.
    again = await plain.remember(ALICE, MINE, says("I switched to coffee", prefix="u"))
    assert kinds(again) == ["unchanged"]
    assert [v.record.version for v in await plain.history(ALICE, MINE, old_id)] == [1, 2]


async def test_a_supersession_left_half_done_is_finished_by_the_retry(
        plain: GovernedMemoryManager) -> None:
    first = await plain.remember(ALICE, MINE, says("I prefer green tea"))
    old_id = first.decisions[0].record_id
    # The first attempt wrote the new memory and stopped before ending the old one.
    await plain.add(ALICE, MINE, "Alice prefers coffee", memory_type="preference",
                    supersedes=old_id,
                    metadata={"fact_hash": _hash(MINE, "Alice prefers coffee")})
    result = await plain.remember(ALICE, MINE, says("I switched to coffee", prefix="u"))
    assert kinds(result) == ["superseded"]
    assert "finished" in result.decisions[0].reason
    assert (await plain.get(ALICE, MINE, old_id)).superseded_by == result.decisions[0].record_id


async def test_a_refining_fact_updates_the_memory_in_place(
        plain: GovernedMemoryManager) -> None:
    first = await plain.remember(ALICE, MINE, says("I prefer green tea"))
    result = await plain.remember(ALICE, MINE, says("green tea with honey", prefix="u"))
    assert kinds(result) == ["updated"]
    (decision,) = result.decisions
    assert decision.record_id == decision.previous_id == first.decisions[0].record_id
    assert decision.version == 2
    versions = await plain.history(ALICE, MINE, decision.record_id)
    assert [v.record.content for v in versions] == ["Alice prefers green tea",
                                                    "Alice prefers green tea with honey"]
    record = versions[-1].record
    assert record.metadata["source_turn_ids"] == ["u1"]
    # Retried: the memory now says it, so nothing changes.
    again = await plain.remember(ALICE, MINE, says("green tea with honey", prefix="u"))
    assert kinds(again) == ["unchanged"]
    assert len(await plain.history(ALICE, MINE, decision.record_id)) == 2


async def test_a_retry_after_later_messages_changed_the_memory_writes_nothing(
        plain: GovernedMemoryManager, sink: InMemoryEventSink) -> None:
    await plain.remember(ALICE, MINE, says("I prefer green tea"))
    refined = says("green tea with honey", prefix="u")
    updated = await plain.remember(ALICE, MINE, refined)
    later = await plain.remember(ALICE, MINE, says("I switched to coffee", prefix="v"))
    assert kinds(updated) == ["updated"] and kinds(later) == ["superseded"]
    written = len(writes(sink))
    # The refinement retried: its memory has been superseded since, so it is found by
    # the mark the newer memory carries, and coffee stays the preference.
    again = await plain.remember(ALICE, MINE, refined)
    assert kinds(again) == ["unchanged"]
    assert again.decisions[0].record_id == later.decisions[0].record_id
    assert len(writes(sink)) == written
    now = await plain.search(ALICE, MINE, "Alice prefers")
    assert [r.content for r in now.records] == ["Alice prefers coffee"]


async def test_contradictions_within_one_window_chain(plain: GovernedMemoryManager) -> None:
    first = await plain.remember(ALICE, MINE, says("I prefer green tea"))
    result = await plain.remember(ALICE, MINE, says("green tea with honey",
                                                    "I switched to coffee", prefix="u"))
    assert kinds(result) == ["updated", "superseded"]
    tea = first.decisions[0].record_id
    assert result.decisions[1].previous_id == tea  # the updated memory, current revision
    now = await plain.search(ALICE, MINE, "Alice prefers")
    assert [r.content for r in now.records] == ["Alice prefers coffee"]


async def test_a_duplicate_is_unchanged(plain: GovernedMemoryManager,
                                        sink: InMemoryEventSink) -> None:
    first = await plain.remember(ALICE, MINE, says("I prefer green tea"))
    written = len(writes(sink))
    # The same statement in other words' spacing and case, in another conversation.
    result = await plain.remember(ALICE, MINE, says("GREEN tea is what I prefer",
                                                    prefix="u"))
    assert kinds(result) == ["unchanged"]
    assert result.decisions[0].record_id == first.decisions[0].record_id
    # A memory written by hand with the same words; and one the model says restates.
    await plain.add(ALICE, MINE, "Alice lives in Lyon", memory_type="fact")
    await plain.add(ALICE, MINE, "The team uses tabs for indentation", memory_type="decision")
    written = len(writes(sink))
    result = await plain.remember(ALICE, MINE, says("I live in Lyon", "We use tabs",
                                                    prefix="v"))
    assert kinds(result) == ["unchanged", "unchanged"]
    assert [d.reason for d in result.decisions] == ["a stored memory says the same",
                                                    "restates a stored memory"]
    assert len(writes(sink)) == written
    # Stated twice in one conversation: one memory.
    twice = await plain.remember(ALICE, Scope("acme", user_id="alice", project_id="p"),
                                 says("I prefer green tea", "I prefer green tea", prefix="w"))
    assert kinds(twice) == ["added", "unchanged"]
    assert twice.decisions[1].reason == "stated again in this conversation"


async def test_each_decision_is_its_own_governed_operation(
        governed: GovernedMemoryManager, sink: InMemoryEventSink) -> None:
    await governed.remember(ALICE, MINE, says("I prefer green tea"))
    before = len(writes(sink))
    result = await governed.remember(ALICE, MINE, [
        *says("I switched to coffee", "I live in Lyon", "I prefer green tea",
              "my password is hunter2-XyZ", "maybe I like jazz", prefix="u"),
        {"role": "tool", "content": "The page says the office moved", "turn_id": "u9"},
    ])
    assert kinds(result) == ["superseded", "added", "unchanged", "refused",
                             "held_for_review", "held_for_review"]
    events = writes(sink)[before:]
    by_decision = {d.decision: d for d in result.decisions}
    superseded = by_decision[Decision.SUPERSEDED]
    # The new memory is one add, the old one's end one update: each its own operation.
    assert [(e.operation, e.type, e.record_ids) for e in events[:2]] == [
        ("add", "memory.write.committed", (superseded.record_id,)),
        ("update", "memory.write.committed", (superseded.previous_id,))]
    added = by_decision[Decision.ADDED]
    assert [(e.operation, e.record_ids) for e in events[2:3]] == [("add", (added.record_id,))]
    refused = by_decision[Decision.REFUSED]
    assert (events[3].operation, events[3].type, events[3].error_code) == (
        "add", "memory.write.rejected", refused.error_code)
    assert refused.content is None and refused.error_code == "policy_denied"
    held = [d for d in result.decisions if d.decision is Decision.HELD]
    assert [(e.operation, e.record_ids) for e in events[4:]] == [
        ("add", (d.record_id,)) for d in held]
    assert len(events) == 6  # an unchanged fact wrote nothing
    assert len({e.operation_id for e in events}) == len(events)
    # ...but the call's record names every decision, the unchanged one included.
    (record,) = [e for e in sink.events[-3:] if e.operation == "record_remember"
                 and e.type == "memory.read.completed"]
    assert record.count == 6 and [r.split(":")[0] for r in record.reasons] == kinds(result)
    unchanged = by_decision[Decision.UNCHANGED]
    assert unchanged.record_id in record.record_ids
    # No event carries what was said.
    assert all("coffee" not in e.to_json() and "hunter2" not in e.to_json()
               for e in sink.events)


async def test_a_low_confidence_fact_is_held_when_the_profile_reviews_inferred_ones(
        governed: GovernedMemoryManager, clock: ManualClock) -> None:
    result = await governed.remember(ALICE, MINE, says("maybe I like jazz", "I live in Lyon"))
    assert kinds(result) == ["held_for_review", "added"]
    held = result.decisions[0]
    assert "inferred" in held.reason
    pending = await governed.list_pending(_reviewer(), MINE)
    assert [(r.id, r.status, r.provenance.source_type) for r in pending.items] == [
        (held.record_id, RecordStatus.PENDING_REVIEW, "inferred")]
    # Not visible until approved; a retry replays the held memory, writing nothing.
    again = await governed.remember(ALICE, MINE, says("maybe I like jazz", "I live in Lyon"))
    assert kinds(again) == ["held_for_review", "unchanged"]
    assert again.decisions[0].record_id == held.record_id
    assert len((await governed.list_pending(_reviewer(), MINE)).items) == 1
    # A profile that does not review inferred facts stores it, marked as inferred.
    manager = GovernedMemoryManager.from_profile(loads_profile(profile(hold_inferred=False)),
                                                 clock=clock, sinks=[])
    manager.language_model = scripted()
    async with manager:
        stored = await manager.remember(ALICE, MINE, says("maybe I like jazz"))
        assert kinds(stored) == ["added"]
        record = await manager.get(ALICE, MINE, stored.decisions[0].record_id)
        assert record.provenance.source_type == "inferred"
        # The caller decides how sure is sure enough.
        sure = await manager.remember(ALICE, Scope("acme", user_id="alice", project_id="p"),
                                      says("maybe I like jazz"), confidence_floor=0.1)
        sure_record = await manager.get(ALICE, Scope("acme", user_id="alice", project_id="p"),
                                        sure.decisions[0].record_id)
        assert sure_record.provenance.source_type == "conversation"


async def test_a_reviewed_source_never_changes_a_stored_memory_in_place(
        governed: GovernedMemoryManager) -> None:
    first = await governed.remember(ALICE, MINE, says("I prefer green tea"))
    old_id = first.decisions[0].record_id
    result = await governed.remember(ALICE, MINE, [
        {"role": "user", "content": "I switched to coffee", "turn_id": "w1",
         "source_type": "web"}])
    assert kinds(result) == ["held_for_review"]
    assert result.decisions[0].previous_id == old_id
    old = await governed.get(ALICE, MINE, old_id)
    assert old.superseded_by is None and old.invalid_at is None and old.version == 1


async def test_without_a_model_it_is_refused_naming_the_setting(
        clock: ManualClock, sink: InMemoryEventSink) -> None:
    async with GovernedMemoryManager(build_native_provider({"backend": "memory"}, clock),
                                     clock=clock, sinks=[sink]) as manager:
        with pytest.raises(MemoryConfigurationError) as refused:
            await manager.remember(ALICE, MINE, says("I prefer green tea"))
        assert "[stores.language_model]" in str(refused.value)
        assert "language_model=" in str(refused.value)
        assert refused.value.code == "configuration"
        assert (await manager.list(ALICE, MINE)).items == ()


async def test_bad_messages_are_an_audited_rejection_before_any_model_call(
        plain: GovernedMemoryManager, sink: InMemoryEventSink) -> None:
    model = plain.language_model
    assert isinstance(model, ScriptedModel)
    cases = [
        ([], "messages"),
        ("I prefer green tea", "messages"),
        ([{"role": "boss", "content": "x"}], "messages[0].role"),
        ([{"role": "user", "content": 3}], "messages[0].content"),
        ([{"role": "user", "content": "x", "turn_id": "a*"}], "messages[0].turn_id"),
        ([{"role": "user", "content": "x", "extra": 1}], "messages[0].extra"),
        ([{"role": "user", "content": "x", "turn_id": "a"},
          {"role": "user", "content": "y", "turn_id": "a"}], "messages[1].turn_id"),
    ]
    for messages, field in cases:
        with pytest.raises(MemoryValidationError) as bad:
            await plain.remember(ALICE, MINE, messages)  # type: ignore[arg-type]
        assert bad.value.field == field
    with pytest.raises(MemoryValidationError) as bad:
        await plain.remember(ALICE, MINE, says("x"), window=0)
    assert bad.value.field == "window"
    with pytest.raises(MemoryValidationError) as bad:
        await plain.remember(ALICE, MINE, says("x"), confidence_floor=2)
    assert bad.value.field == "confidence_floor"
    assert model.calls == []
    rejected = [e for e in sink.events if e.type == "memory.write.rejected"]
    assert len(rejected) == len(cases) + 2
    assert {e.operation for e in rejected} == {"add"}


async def test_a_scope_the_principal_may_not_touch_is_refused_before_the_model(
        plain: GovernedMemoryManager) -> None:
    from governed_memory.errors import MemoryScopeError

    model = plain.language_model
    assert isinstance(model, ScriptedModel)
    with pytest.raises(MemoryScopeError):
        await plain.remember(ALICE, Scope("acme", user_id="bob"), says("I prefer green tea"))
    # The scope rule refused the first search; the model was asked once at most and
    # nothing was written.
    assert len(model.calls) <= 1
    assert (await plain.list(ALICE, MINE)).items == ()


async def test_a_model_failure_raises_and_a_retry_writes_nothing_twice(
        clock: ManualClock, sink: InMemoryEventSink) -> None:
    from remember_support import responder

    calls = {"n": 0}

    def flaky(call):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("the model server hung up")
        return responder(call)

    model = ScriptedModel(responder=flaky)
    conversation = says("I prefer green tea", "I live in Lyon")  # two windows of two
    async with GovernedMemoryManager(build_native_provider({"backend": "memory"}, clock),
                                     clock=clock, sinks=[sink],
                                     language_model=model) as manager:
        with pytest.raises(LanguageModelError) as failed:
            await manager.remember(ALICE, MINE, conversation, window=2)
        assert "RuntimeError" in str(failed.value) and "hung up" not in str(failed.value)
        assert [r.content for r in (await manager.list(ALICE, MINE)).items] == [
            "Alice prefers green tea"]
        result = await manager.remember(ALICE, MINE, conversation, window=2)
        assert kinds(result) == ["unchanged", "added"]
        assert result.windows == 2
        assert len((await manager.list(ALICE, MINE)).items) == 2


async def test_long_conversations_are_read_a_window_at_a_time(
        plain: GovernedMemoryManager) -> None:
    model = plain.language_model
    assert isinstance(model, ScriptedModel)
    filler = [{"role": "user", "content": f"small talk {n}", "turn_id": f"f{n}"}
              for n in range(45)]
    result = await plain.remember(ALICE, MINE, [*filler, *says("I live in Lyon")])
    assert result.windows == 3 and model.tasks() == ["remember"] * 3
    assert kinds(result) == ["added"]
    # Message objects work as well as mappings.
    again = await plain.remember(ALICE, MINE, [Message(role="user", content="I live in Lyon",
                                                       turn_id="t1")])
    assert kinds(again) == ["unchanged"]


async def test_the_bound_handle_and_the_sync_facade_remember(
        clock: ManualClock, tmp_path: Path) -> None:
    async with GovernedMemoryManager(build_native_provider({"backend": "memory"}, clock),
                                     clock=clock, language_model=scripted()) as manager:
        bound = manager.bind(ALICE, MINE)
        result = await bound.remember(says("I prefer green tea"))
        assert kinds(result) == ["added"]
    with SyncMemoryManager.from_plugins("native", {"backend": "sqlite",
                                                   "path": str(tmp_path / "m.db")},
                                        language_model=scripted()) as memory:
        assert kinds(memory.remember(ALICE, MINE, says("I live in Lyon"))) == ["added"]
        assert kinds(memory.bind(ALICE, MINE).remember(says("I live in Lyon"))) == [
            "unchanged"]


def test_a_profile_names_the_model_and_is_checked_against_the_plugins() -> None:
    openai = profile(stores='\n[stores.language_model]\nkind = "openai"\n'
                            'config = { model = "llama3.1", base_url = "http://127.0.0.1:9/v1" }\n')
    manager = GovernedMemoryManager.from_profile(loads_profile(openai), sinks=[])
    model = manager.language_model
    assert model is not None and type(model).__name__ == "OpenAICompatibleModel"
    from governed_memory.remembering import model_identity

    assert model_identity(model) == "openai:llama3.1"
    unknown = profile(stores='\n[stores.language_model]\nkind = "oracle"\n')
    with pytest.raises(MemoryConfigurationError) as refused:
        GovernedMemoryManager.from_profile(loads_profile(unknown), sinks=[])
    assert "stores.language_model.kind" in str(refused.value)
    from governed_memory.plugins import PluginManager
    from governed_memory.profiles.build import check_against_plugins

    with pytest.raises(ProfileLoadError, match=r"stores\.language_model\.kind"):
        check_against_plugins(loads_profile(unknown), PluginManager.load())
    assert GovernedMemoryManager.from_profile(loads_profile(profile()),
                                              sinks=[]).language_model is None


def _hash(scope: Scope, content: str) -> str:
    from governed_memory.turncontext.hashing import fact_hash

    return fact_hash(scope, content)


def _reviewer() -> Principal:
    return Principal("svc:review", "service", "acme",
                     permissions=["memory:read", "memory:review"])
