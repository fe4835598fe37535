"""Extraction: atomic facts, scope judgement, importance floor, entity resolution,
content-hash and similarity dedup, supersession with "as of" reads, the secret guard,
and the failure rule (never raise; return what was saved)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from context_support import (
    ALICE,
    OWNER,
    SESSION_SCOPE,
    USER_SCOPE,
    FlakyProvider,
    routed,
)
from governed_memory import GovernedMemoryManager, MemoryNotFoundError, MemoryType, Scope
from governed_memory.clock import ManualClock
from governed_memory.language_models import LanguageModelError, ModelCall, ScriptedModel
from governed_memory.profiles.spec import SecretGuardMode
from governed_memory.tiers import InMemoryTurnStore, MemoryTiers, Turn, TurnDraft
from governed_memory.turncontext import (
    ContextPolicy,
    MemoryExtractor,
    MemoryRecall,
    ResolvedEntity,
)
from governed_memory.turncontext.hashing import FACT_HASH_KEY, reference

NO_PROJECT = Scope("acme", user_id="alice", session_id="s1")


def fact(content: str, *, type: str = "fact", scope: str = "user", importance: float = 0.8,
         entities: Sequence[str] = (), replaces: str | None = None) -> dict[str, Any]:
    return {"content": content, "type": type, "scope": scope, "importance": importance,
            "entities": list(entities), "replaces": replaces}


async def turns_of(tiers: MemoryTiers, *texts: str, owner: Scope = OWNER) -> tuple[Turn, ...]:
    for i, text in enumerate(texts):
        draft = TurnDraft.user(text) if i % 2 == 0 else TurnDraft.assistant(text)
        await tiers.append(ALICE, owner, draft)
    return await tiers.recent(ALICE, owner)


async def test_facts_are_stored_add_only_with_validity_and_provenance(
        tiers: MemoryTiers, manager: GovernedMemoryManager, clock: ManualClock) -> None:
    turns = await turns_of(tiers, "I prefer tea. We decided on Postgres.", "Noted.")
    model = routed(extract={"facts": [
        fact("Alice prefers tea", type="preference", scope="user", entities=["Tea"]),
        fact("The project uses PostgreSQL", type="decision", scope="project"),
        fact("Alice is testing extraction", type="episode", scope="session"),
    ]})
    result = await MemoryExtractor(manager, model).extract(ALICE, OWNER, turns)
    by_content = {r.content: r for r in result.stored}
    tea = by_content["Alice prefers tea"]
    assert tea.scope == USER_SCOPE and tea.memory_type is MemoryType.PREFERENCE
    assert tea.entity_ids == ("Tea",) and tea.valid_from == clock.now()
    assert tea.metadata["source_turn_ids"] == [t.turn_id for t in turns]
    assert tea.metadata[FACT_HASH_KEY].startswith("fh1:")
    assert tea.provenance.source_type == "conversation" and tea.provenance.session_id == "s1"
    # Alice may not write the shared project scope (that takes memory:admin), so her
    # project fact is kept in the session rather than lost; an admin's lands there.
    assert by_content["The project uses PostgreSQL"].scope == SESSION_SCOPE
    assert by_content["Alice is testing extraction"].scope == SESSION_SCOPE
    call = model.calls[0]
    assert call.task == "extract" and "untrusted" in call.system
    assert "secrets" in call.system


async def test_the_importance_floor_and_blank_facts(tiers: MemoryTiers,
                                                    manager: GovernedMemoryManager) -> None:
    turns = await turns_of(tiers, "hello")
    model = routed(extract={"facts": [fact("low", importance=0.1), fact("   "),
                                      fact("kept fact", importance=0.3), "junk",
                                      {"content": "no importance"}]})
    result = await MemoryExtractor(manager, model).extract(ALICE, OWNER, turns)
    assert [r.content for r in result.stored] == ["kept fact"]


@pytest.mark.parametrize(("judged", "owner", "expected"), [
    ("tenant", OWNER, SESSION_SCOPE),
    ("global", OWNER, SESSION_SCOPE),
    ("nonsense", OWNER, SESSION_SCOPE),
    ("project", NO_PROJECT, SESSION_SCOPE),  # cannot address a project: session
    ("user", OWNER, USER_SCOPE),  # no project: a preference follows the user
    ("user", NO_PROJECT, USER_SCOPE),
    ("session", OWNER, SESSION_SCOPE),
    ("project", OWNER, SESSION_SCOPE),  # Alice cannot write the shared project scope
])
async def test_scope_is_never_wider_than_project(tiers: MemoryTiers,
                                                 manager: GovernedMemoryManager, judged: str,
                                                 owner: Scope, expected: Scope) -> None:
    turns = await turns_of(tiers, "something", owner=owner)
    model = routed(extract={"facts": [fact("a scoped fact", scope=judged)]})
    result = await MemoryExtractor(manager, model).extract(ALICE, owner, turns)
    assert [r.scope for r in result.stored] == [expected]


async def test_a_retried_turn_stores_nothing_new(tiers: MemoryTiers,
                                                 manager: GovernedMemoryManager) -> None:
    turns = await turns_of(tiers, "I like tea")
    model = routed(extract={"facts": [fact("Alice likes tea"), fact("alice  LIKES tea")]})
    extractor = MemoryExtractor(manager, model)
    first = await extractor.extract(ALICE, OWNER, turns)
    again = await extractor.extract(ALICE, OWNER, turns)
    assert len(first.stored) == 1 and again.stored == ()
    assert {s.reason for s in again.skipped} == {"already stored", "duplicate in this turn"}


async def test_the_similarity_gate_uses_the_index_score(
        tiers: MemoryTiers, manager: GovernedMemoryManager, flaky: FlakyProvider) -> None:
    await manager.add(ALICE, USER_SCOPE, "Alice enjoys drinking tea")
    turns = await turns_of(tiers, "tea again")
    model = routed(extract={"facts": [fact("Alice really enjoys drinking tea")]})
    flaky.similarity = 0.95
    skipped = await MemoryExtractor(manager, model).extract(ALICE, OWNER, turns)
    assert skipped.stored == () and skipped.skipped[0].reason == "restates a stored memory"
    flaky.similarity = 0.5
    stored = await MemoryExtractor(manager, model).extract(ALICE, OWNER, turns)
    assert len(stored.stored) == 1


class Resolver:
    def __init__(self, raises: bool = False) -> None:
        self.raises = raises
        self.seen: list[tuple[str, ...]] = []

    async def resolve_entities(self, mentions: Sequence[str], *,
                               tenant_id: str) -> tuple[ResolvedEntity, ...]:
        self.seen.append(tuple(mentions))
        if self.raises:
            raise RuntimeError("graph down")
        table = {"Ingest": ("kg:ingest", 0.9), "Dana": ("kg:dana", 0.4)}
        return tuple(ResolvedEntity(m, *table[m]) for m in mentions if m in table)


async def test_entities_resolve_above_the_floor(tiers: MemoryTiers,
                                                manager: GovernedMemoryManager) -> None:
    turns = await turns_of(tiers, "Dana owns ingest")
    model = routed(extract={"facts": [fact("Dana owns the ingest pipeline",
                                           entities=["Ingest", "Dana", "Unknown"])]})
    resolver = Resolver()
    result = await MemoryExtractor(manager, model, entities=resolver).extract(
        ALICE, OWNER, turns)
    assert result.stored[0].entity_ids == ("kg:ingest",)
    assert resolver.seen == [("Ingest", "Dana", "Unknown")]


async def test_row_entity_resolver_raises_stores_the_fact_without_anchors(
        tiers: MemoryTiers, manager: GovernedMemoryManager,
        caplog: pytest.LogCaptureFixture) -> None:
    turns = await turns_of(tiers, "Dana owns ingest")
    model = routed(extract={"facts": [fact("Dana owns ingest", entities=["Ingest"])]})
    result = await MemoryExtractor(manager, model, entities=Resolver(raises=True)).extract(
        ALICE, OWNER, turns)
    assert result.stored[0].entity_ids == ()
    assert "extraction.entities_failed" in result.degraded
    assert any(r.levelname == "WARNING" for r in caplog.records)


def _superseding(call: ModelCall, content: str, old_content: str) -> dict[str, Any]:
    for line in call.user.splitlines():
        if old_content in line:
            ref = line.split("]")[0].lstrip("[")
            return {"facts": [fact(content, replaces=f"[{ref}]")]}
    return {"facts": [fact(content)]}


async def test_supersession_keeps_the_old_row_readable_as_of(
        tiers: MemoryTiers, manager: GovernedMemoryManager, clock: ManualClock) -> None:
    old = await manager.add(ALICE, USER_SCOPE, "Alice lives in Paris", valid_from=clock.now())
    before = clock.now()
    clock.advance(3600)
    turns = await turns_of(tiers, "I moved to Berlin, Paris is over")
    model = routed(extract=lambda call: _superseding(call, "Alice lives in Berlin",
                                                     "Alice lives in Paris"))
    result = await MemoryExtractor(manager, model).extract(ALICE, OWNER, turns)
    new = result.stored[0]
    assert new.supersedes == old.id
    amended = result.superseded[0]
    assert amended.id == old.id and amended.invalid_at == clock.now()
    assert amended.superseded_by == new.id and amended.content == "Alice lives in Paris"
    # Still readable directly ...
    assert (await manager.get(ALICE, USER_SCOPE, old.id)).superseded_by == new.id
    recall = MemoryRecall(ContextPolicy(), manager)
    now = await recall.recall(ALICE, OWNER, "where does Alice live")
    assert [m.record.content for m in now.memories] == ["Alice lives in Berlin"]
    past = await recall.recall(ALICE, OWNER, "where does Alice live", as_of=before + 1)
    assert [m.record.content for m in past.memories] == ["Alice lives in Paris"]


@pytest.mark.parametrize("replaces", ["[ffffffffff]", "[ab]", None])
async def test_an_unknown_or_short_reference_is_ignored(
        tiers: MemoryTiers, manager: GovernedMemoryManager, replaces: str | None) -> None:
    old = await manager.add(ALICE, USER_SCOPE, "Alice lives in Paris")
    turns = await turns_of(tiers, "Berlin now")
    model = routed(extract={"facts": [fact("Alice lives in Berlin", replaces=replaces)]})
    result = await MemoryExtractor(manager, model).extract(ALICE, OWNER, turns)
    assert result.superseded == () and result.stored[0].supersedes is None
    assert (await manager.get(ALICE, USER_SCOPE, old.id)).invalid_at is None


async def test_a_reference_to_another_scope_is_ignored(
        tiers: MemoryTiers, manager: GovernedMemoryManager) -> None:
    other = await manager.add(ALICE, SESSION_SCOPE, "Alice lives in Paris")
    turns = await turns_of(tiers, "Paris is over, Berlin now")
    ref = reference(other.content_hash)
    model = routed(extract={"facts": [fact("Alice lives in Berlin", scope="user",
                                           replaces=ref)]})
    result = await MemoryExtractor(manager, model).extract(ALICE, OWNER, turns)
    assert f"[{ref}]" in model.calls[0].user  # the prompt did list it
    assert result.superseded == () and result.stored[0].supersedes is None
    assert result.stored[0].scope == USER_SCOPE


async def test_a_failed_amendment_still_hides_the_old_row(
        tiers: MemoryTiers, manager: GovernedMemoryManager, flaky: FlakyProvider) -> None:
    await manager.add(ALICE, USER_SCOPE, "Alice lives in Paris")
    turns = await turns_of(tiers, "I left Paris, I live in Berlin now")
    model = routed(extract=lambda call: _superseding(call, "Alice lives in Berlin",
                                                     "Alice lives in Paris"))
    flaky.fail.add("update")
    result = await MemoryExtractor(manager, model).extract(ALICE, OWNER, turns)
    assert "extraction.supersede_failed" in result.degraded and result.superseded == ()
    recalled = await MemoryRecall(ContextPolicy(), manager).recall(ALICE, OWNER, "Alice")
    assert [m.record.content for m in recalled.memories] == ["Alice lives in Berlin"]


async def test_the_secret_guard_refuses_a_proposed_secret(clock: ManualClock) -> None:
    from governed_memory_native import build_native_provider
    from governed_memory_policies.secret_guard import SecretGuardPolicy

    manager = GovernedMemoryManager(build_native_provider({"backend": "memory"}, clock),
                                    policies=[SecretGuardPolicy(SecretGuardMode.REJECT)],
                                    clock=clock)
    await manager.start()
    tiers = MemoryTiers(long_term=manager, turns=InMemoryTurnStore())
    secret = "AKIA" + "Q7X2M4N8P1R5T3V9"
    turns = await turns_of(tiers, "here is my aws key (redacted by the client)")
    model = routed(extract={"facts": [fact(f"Alice's AWS key is {secret}"),
                                      fact("Alice uses AWS")]})
    result = await MemoryExtractor(manager, model).extract(ALICE, OWNER, turns)
    assert [r.content for r in result.stored] == ["Alice uses AWS"]
    assert result.skipped[0].reason == "refused: policy_denied"
    listed = await manager.list(ALICE, USER_SCOPE)
    assert all(secret not in r.content for r in listed.items)


async def test_row_model_raises_returns_nothing(tiers: MemoryTiers,
                                                manager: GovernedMemoryManager) -> None:
    turns = await turns_of(tiers, "hello")
    model = ScriptedModel(responder=lambda call: LanguageModelError("down"))
    result = await MemoryExtractor(manager, model).extract(ALICE, OWNER, turns)
    assert result.stored == () and result.degraded == ("extraction.model_failed",)


async def test_row_repository_raises_returns_what_was_saved(
        tiers: MemoryTiers, manager: GovernedMemoryManager, flaky: FlakyProvider) -> None:
    turns = await turns_of(tiers, "three facts")
    model = routed(extract={"facts": [fact("first fact"), fact("second fact"),
                                      fact("third fact")]})
    flaky.adds_left = 1
    result = await MemoryExtractor(manager, model).extract(ALICE, OWNER, turns)
    assert [r.content for r in result.stored] == ["first fact"]
    assert "extraction.repository_failed" in result.degraded
    with pytest.raises(MemoryNotFoundError):
        await manager.get(ALICE, USER_SCOPE, "01" + "0" * 24)


async def test_disabled_policy_or_no_model_extracts_nothing(
        tiers: MemoryTiers, manager: GovernedMemoryManager) -> None:
    turns = await turns_of(tiers, "hello")
    model = routed(extract={"facts": [fact("x fact")]})
    assert (await MemoryExtractor(manager, model, policy=ContextPolicy.disabled()).extract(
        ALICE, OWNER, turns)).stored == ()
    assert (await MemoryExtractor(manager, None).extract(ALICE, OWNER, turns)).stored == ()
    assert model.calls == []


async def test_a_principal_that_may_write_the_project_stores_project_facts(
        tiers: MemoryTiers, manager: GovernedMemoryManager) -> None:
    from actors import ADMIN

    owner = Scope("acme", project_id="handbook", session_id="s9")
    await tiers.append(ADMIN, owner, TurnDraft.user("we use Postgres"))
    turns = await tiers.recent(ADMIN, owner)
    model = routed(extract={"facts": [fact("The project uses PostgreSQL", scope="project",
                                           type="decision"),
                                      fact("Prefers terse answers", scope="user")]})
    result = await MemoryExtractor(manager, model).extract(ADMIN, owner, turns)
    # An owner with no user cannot address the user level: that fact stays in the
    # session (which, without a user, keys on the session alone).
    assert [r.scope for r in result.stored] == [Scope("acme", project_id="handbook"),
                                                Scope("acme", session_id="s9")]


async def test_an_extraction_is_recorded_with_its_versions_and_degradations(
        tiers: MemoryTiers, manager: GovernedMemoryManager, sink: Any) -> None:
    turns = await turns_of(tiers, "Dana owns ingest")
    model = routed(extract={"facts": [fact("Dana owns ingest", entities=["Ingest"])]})
    sink.clear()
    result = await MemoryExtractor(manager, model, entities=Resolver(raises=True)).extract(
        ALICE, OWNER, turns)
    record = [e for e in sink.events if e.operation == "record_extraction"]
    assert [e.type for e in record] == ["memory.read.requested", "memory.read.completed"]
    assert record[-1].record_ids == (result.stored[0].id,)
    assert record[-1].reasons == ("degraded: extraction.entities_failed",)
    assert all("Dana" not in e.to_json() for e in sink.events)


async def test_facts_are_dated_by_their_turns_not_by_the_extraction(
        tiers: MemoryTiers, manager: GovernedMemoryManager, clock: ManualClock) -> None:
    old = await manager.add(ALICE, USER_SCOPE, "Alice lives in Paris",
                            valid_from=clock.now(), occurred_at=clock.now())
    clock.advance(3600)
    turns = await turns_of(tiers, "I moved to Berlin, Paris is over")
    said = turns[-1].created_at
    clock.advance(30 * 86_400)  # a worker extracts a month later
    model = routed(extract=lambda call: _superseding(call, "Alice lives in Berlin",
                                                     "Alice lives in Paris"))
    result = await MemoryExtractor(manager, model).extract(ALICE, OWNER, turns)
    new = result.stored[0]
    assert new.occurred_at == said and new.valid_from == said
    assert new.created_at == clock.now() and new.event_time == said
    assert result.superseded[0].invalid_at == said
    # As of a week after the move, Berlin; as of the day before it, Paris.
    week_after = await manager.search(ALICE, USER_SCOPE, "Alice lives", as_of=said + 7 * 86_400)
    assert [r.id for r in week_after.records] == [new.id]
    day_before = await manager.search(ALICE, USER_SCOPE, "Alice lives", as_of=said - 1)
    assert [r.id for r in day_before.records] == [old.id]
