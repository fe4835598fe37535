"""The reference's owner scoping, end to end through extraction, the builder and recall.

A USER memory keys on tenant and user only, so a preference stated in one project is
recalled in every project of that user, and never for anyone else; a PROJECT memory
keys on tenant and project, so a project fact stays in its project; a SESSION's turns
and rolling summary key on tenant, user and session, so a later turn of the session
finds its summary again, even when the session's project context changes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from actors import ADMIN
from context_support import (
    ALICE,
    BOB,
    IN_OTHER_PROJECT,
    OWNER,
    PROJECT_SCOPE,
    SESSION_SCOPE,
    USER_SCOPE,
    converse,
    routed,
)
from governed_memory import GovernedMemoryManager, MemoryType, Principal, PrincipalKind, Scope
from governed_memory.clock import ManualClock
from governed_memory.language_models import ModelCall
from governed_memory.plugins import PluginManager
from governed_memory.scope import ScopeLevel, narrow
from governed_memory.tiers import MemoryTiers, Turn, TurnDraft
from governed_memory.turncontext import (
    ContextPolicy,
    MemoryContextBuilder,
    MemoryExtractor,
    MemoryRecall,
)
from governed_memory.turncontext.summarizer import FRONTIER, summary_key
from hypothesis import given
from hypothesis import strategies as st

CAROL = Principal("user:carol", PrincipalKind.USER, "acme", "carol",
                  ["memory:read", "memory:write", "memory:admin"])
"""A project lead: a user who may also write the project's shared scope."""


def fact(content: str, scope: str, type: str = "fact", replaces: str | None = None
         ) -> dict[str, Any]:
    return {"content": content, "type": type, "scope": scope, "importance": 0.8,
            "entities": [], "replaces": replaces}


async def said(tiers: MemoryTiers, principal: Principal, owner: Scope,
               *texts: str) -> tuple[Turn, ...]:
    out = []
    for i, text in enumerate(texts):
        draft = TurnDraft.user(text) if i % 2 == 0 else TurnDraft.assistant(text)
        out.append(await tiers.append(principal, owner, draft))
    return tuple(out)


def contents(context: Any) -> list[str]:
    return [m.record.content for m in context.recalled]


# -- USER: a preference follows its user into every project ----------------------------------

@pytest.fixture
async def on_disk(tmp_path: Path) -> AsyncIterator[tuple[Path, PluginManager]]:
    yield tmp_path, PluginManager.load()


def _sqlite_tiers(tmp_path: Path, plugins: PluginManager) -> MemoryTiers:
    manager = GovernedMemoryManager.from_plugins("native", {"path": str(tmp_path / "m.db")},
                                                 plugins=plugins)
    turns = plugins.turn_stores.get("sqlite").factory({"path": str(tmp_path / "t.db")},
                                                      manager.clock)
    return MemoryTiers(long_term=manager, turns=turns)


async def test_a_preference_stated_in_one_project_is_recalled_in_another_after_reopen(
        on_disk: tuple[Path, PluginManager]) -> None:
    tmp_path, plugins = on_disk
    model = routed(extract={"facts": [
        fact("Alice prefers green tea", "user", type="preference"),
        fact("The handbook uses PostgreSQL", "project", type="decision"),
        fact("Alice is reviewing chapter two", "session", type="episode")]})
    async with _sqlite_tiers(tmp_path, plugins) as tiers:
        turns = await said(tiers, ALICE, OWNER, "I prefer green tea. We use Postgres.",
                           "Noted.")
        result = await MemoryExtractor(tiers.long_term, model).extract(ALICE, OWNER, turns)
        by_content = {r.content: r.scope for r in result.stored}
        assert by_content == {
            "Alice prefers green tea": USER_SCOPE,
            # Alice may not write the shared project scope: kept in her session.
            "The handbook uses PostgreSQL": SESSION_SCOPE,
            "Alice is reviewing chapter two": SESSION_SCOPE}

    # Another day, another project: the files are reopened by a new process's objects.
    async with _sqlite_tiers(tmp_path, plugins) as tiers:
        builder = MemoryContextBuilder(tiers)
        context = await builder.build(ALICE, IN_OTHER_PROJECT,
                                      "which tea does Alice prefer? postgresql? chapter?")
        assert contents(context) == ["Alice prefers green tea"]
        assert [m.level for m in context.recalled] == [ScopeLevel.USER]
        assert context.messages == ()  # a new session: none of the old one's turns
        # Back in the first session (from any project), its own memories come too.
        again = await builder.build(ALICE, OWNER.replace(project_id="billing"),
                                    "which tea does Alice prefer? postgresql? chapter?")
        assert set(contents(again)) == {"Alice prefers green tea",
                                        "The handbook uses PostgreSQL",
                                        "Alice is reviewing chapter two"}
        assert len(again.messages) == 2
        # Never for another user, not even in the same project and session id.
        for owner in (OWNER.replace(user_id="bob"), IN_OTHER_PROJECT.replace(user_id="bob")):
            bobs = await builder.build(BOB, owner, "which tea? postgresql? chapter?")
            assert bobs.recalled == () and bobs.messages == () and bobs.summary is None


async def test_a_restated_preference_stores_nothing_new_and_a_changed_one_supersedes(
        tiers: MemoryTiers, manager: GovernedMemoryManager, clock: ManualClock) -> None:
    turns = await said(tiers, ALICE, OWNER, "I prefer green tea")
    first = MemoryExtractor(manager, routed(extract={"facts": [
        fact("Alice prefers green tea", "user", type="preference")]}))
    [tea] = (await first.extract(ALICE, OWNER, turns)).stored
    # The same preference stated in another project is the same USER scope: a no-op.
    elsewhere = await said(tiers, ALICE, IN_OTHER_PROJECT, "as I said, green tea for me")
    again = await first.extract(ALICE, IN_OTHER_PROJECT, elsewhere)
    assert again.stored == () and [s.reason for s in again.skipped] == ["already stored"]
    # A change of mind stated in the other project supersedes the row from the first.
    clock.advance(60)
    changed = await said(tiers, ALICE, IN_OTHER_PROJECT, "no more green tea, coffee now")

    def supersede(call: ModelCall) -> dict[str, Any]:
        ref = next(line.split("]")[0].lstrip("[") for line in call.user.splitlines()
                   if "Alice prefers green tea" in line)
        return {"facts": [fact("Alice prefers coffee", "user", type="preference",
                               replaces=f"[{ref}]")]}

    result = await MemoryExtractor(manager, routed(extract=supersede)).extract(
        ALICE, IN_OTHER_PROJECT, changed)
    [coffee] = result.stored
    assert coffee.supersedes == tea.id and coffee.scope == tea.scope == USER_SCOPE
    assert [r.id for r in result.superseded] == [tea.id]
    # Back in the first project, only the current preference is recalled.
    recalled = await MemoryRecall(ContextPolicy(), manager).recall(
        ALICE, OWNER, "which drink does Alice prefer: tea or coffee")
    assert [m.record.content for m in recalled.memories] == ["Alice prefers coffee"]


# -- PROJECT: a project fact stays in its project --------------------------------------------

async def test_a_project_fact_stays_in_its_project(tiers: MemoryTiers,
                                                   manager: GovernedMemoryManager) -> None:
    carol = Scope("acme", project_id="handbook", user_id="carol", session_id="c1")
    turns = await said(tiers, CAROL, carol, "We decided on PostgreSQL. I like long answers.")
    model = routed(extract={"facts": [
        fact("The handbook uses PostgreSQL", "project", type="decision"),
        fact("Carol prefers long answers", "user", type="preference")]})
    result = await MemoryExtractor(manager, model).extract(CAROL, carol, turns)
    assert {r.content: r.scope for r in result.stored} == {
        "The handbook uses PostgreSQL": PROJECT_SCOPE,
        "Carol prefers long answers": Scope("acme", user_id="carol")}
    query = "does the handbook use postgresql? long answers?"
    builder = MemoryContextBuilder(tiers)
    # Anyone of the tenant working in the handbook reads the project's fact ...
    here = await builder.build(ALICE, OWNER, query)
    assert contents(here) == ["The handbook uses PostgreSQL"]
    assert [m.level for m in here.recalled] == [ScopeLevel.PROJECT]
    # ... nobody reads it from another project (Carol included), nor without a project.
    for principal, owner in ((ALICE, IN_OTHER_PROJECT),
                             (ALICE, OWNER.replace(project_id=None)),
                             (CAROL, carol.replace(project_id="billing"))):
        context = await builder.build(principal, owner, query)
        assert "The handbook uses PostgreSQL" not in contents(context)
    # Carol's preference follows Carol, and only Carol.
    assert contents(await builder.build(CAROL, carol.replace(project_id="billing"),
                                        query)) == ["Carol prefers long answers"]


# -- SESSION: the rolling summary is found again ---------------------------------------------

POLICY = ContextPolicy(recent_max_messages=12, recent_max_tokens=400,
                       summary_trigger_fraction=0.5, summary_keep_messages=4)


async def test_the_summary_of_a_session_is_found_again_in_a_later_turn(
        tiers: MemoryTiers, manager: GovernedMemoryManager) -> None:
    await converse(tiers, 6, words=20)
    model = routed()
    builder = MemoryContextBuilder(tiers, policy=POLICY, model=model)
    first = await builder.build(ALICE, OWNER, "and then?")
    assert first.summary is not None and first.summary_version == 1
    row = await manager.get(ALICE, SESSION_SCOPE, key=summary_key("s1"))
    assert row.scope == SESSION_SCOPE and row.memory_type is MemoryType.SUMMARY
    folds = model.tasks().count("summarize")
    # A later turn of the session loads it again (no new fold: nothing new to cover),
    # also when the session is continued from another project.
    for owner in (OWNER, OWNER.replace(project_id="billing"), OWNER.replace(project_id=None)):
        later = await builder.build(ALICE, owner, "and later?")
        assert later.summary == first.summary and later.summary_version == 1
        assert [t.seq for t in later.messages] == [9, 10, 11, 12]
    assert model.tasks().count("summarize") == folds
    # The next refresh folds new turns into that same row.
    await converse(tiers, 4, words=20, start=6)
    await builder.build(ALICE, OWNER.replace(project_id="billing"), "more?")
    row = await manager.get(ALICE, SESSION_SCOPE, key=summary_key("s1"))
    assert row.version == 2 and row.metadata[FRONTIER] == 16
    listed = await manager.list(ADMIN, SESSION_SCOPE, memory_types=["summary"])
    assert [r.id for r in listed.items] == [row.id]
    # Another user's session of the same id has its own (empty) history and no summary.
    bobs = await builder.build(BOB, OWNER.replace(user_id="bob"), "and then?")
    assert bobs.summary is None and bobs.messages == ()


# -- the property: recall reads exactly the owner's level scopes -----------------------------

PROJECTS = (None, "p1", "p2")
USERS = (None, "alice", "bob")
SESSIONS = (None, "s1", "s2")
UNIVERSE = tuple(Scope("acme", project_id=p, user_id=u, session_id=s, agent_id=a)
                 for p in PROJECTS for u in USERS for s in SESSIONS for a in (None, "bot"))
"""Every combination of the dimensions in play: 54 exact scopes, one memory each."""

LEVELS = st.lists(st.sampled_from([ScopeLevel.SESSION, ScopeLevel.USER, ScopeLevel.PROJECT,
                                   ScopeLevel.TENANT]), min_size=1, max_size=4, unique=True)


async def _populated() -> GovernedMemoryManager:
    from governed_memory_native import build_native_provider

    clock = ManualClock()
    manager = GovernedMemoryManager(build_native_provider({"backend": "memory"}, clock),
                                    clock=clock)
    await manager.start()
    for index, scope in enumerate(UNIVERSE):
        await manager.add(ADMIN, scope, f"zebra number {index}")
    return manager


@pytest.fixture(scope="module")
def universe() -> Iterator[tuple[asyncio.Runner, GovernedMemoryManager]]:
    """One store holding a memory in every scope of the universe, on a loop of its own
    (filled once: the examples only read)."""
    with asyncio.Runner() as runner:
        manager = runner.run(_populated())
        yield runner, manager
        runner.run(manager.close())


async def _recall(manager: GovernedMemoryManager, owner: Scope,
                  levels: list[ScopeLevel]) -> list[Scope]:
    policy = ContextPolicy(recall_scopes=tuple(levels), recall_top_k=100,
                           recent_max_tokens=1_000_000)
    result = await MemoryRecall(policy, manager).recall(ALICE, owner, "zebra")
    assert not result.degraded
    for memory in result.memories:
        assert memory.record.scope == narrow(owner, memory.level)
    return [m.record.scope for m in result.memories]


@given(st.sampled_from(PROJECTS), st.sampled_from(SESSIONS), st.sampled_from((None, "bot")),
       LEVELS)
def test_recall_reads_exactly_the_owners_level_scopes(
        universe: tuple[asyncio.Runner, GovernedMemoryManager], project: str | None,
        session: str | None, agent: str | None, levels: list[ScopeLevel]) -> None:
    runner, manager = universe
    owner = Scope("acme", project_id=project, user_id="alice", session_id=session,
                  agent_id=agent)
    addressable = [lvl for lvl in levels
                   if not (lvl is ScopeLevel.PROJECT and project is None)
                   and not (lvl is ScopeLevel.SESSION and session is None)]
    found = runner.run(_recall(manager, owner, levels))
    # One memory from each addressable level's exact scope, nothing else.
    assert sorted(found, key=lambda s: s.scope_hash) == sorted(
        {narrow(owner, lvl) for lvl in addressable}, key=lambda s: s.scope_hash)
    for scope in found:
        assert scope.user_id in (None, "alice")  # never Bob's
        assert scope.project_id in (None, project)  # never another project's
        assert scope.project_id is None or scope.user_id is None  # USER has no project
