"""A profile keeps sensitive memories out of every context build: ``[context]
exclude_sensitivity`` names labels whose memories recall never places in the prompt,
even though the same principal can still find them by search. The labels are left out
by recall's searches before their top-k, so the prompt still gets its full share of
the memories that may be shown, and the listing fallback leaves them out too."""

from __future__ import annotations

import pytest
from context_support import ALICE, OWNER, USER_SCOPE, FlakyProvider
from governed_memory import GovernedMemoryManager
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryConfigurationError, MemoryValidationError
from governed_memory.profiles import loads_profile
from governed_memory.tiers import InMemoryTurnStore, MemoryTiers
from governed_memory.turncontext import ContextPolicy, MemoryContextBuilder
from governed_memory.turncontext.recall import MemoryRecall

PROFILE = """
spec_version = 1
id = "sensitive-context"
version = "1.0.0"
[provider]
name = "native"
config = {{ backend = "memory" }}
[context]
max_memories = 3
{extra}
"""


RESTRICTED = 24
"""More than the 20 candidates recall's search reads for a top-k of 3: a filter applied
after that search would leave the prompt nothing to show."""


def profile(extra: str = 'exclude_sensitivity = ["restricted", "secret"]') -> str:
    return PROFILE.format(extra=extra)


async def _store(manager: GovernedMemoryManager) -> tuple[set[str], set[str]]:
    """Restricted memories that outrank everything, more of them than recall's search
    reads (``RESTRICTED``), and three that may be shown: one unlabelled, one labelled
    ``internal``, one whose label is not a string."""
    restricted = {(await manager.add(
        ALICE, USER_SCOPE, f"launch launch launch codes for the launch, set {n}",
        memory_type="fact", metadata={"sensitivity": "restricted"})).id
        for n in range(RESTRICTED)}
    shown = {(await manager.add(ALICE, USER_SCOPE, text, memory_type="fact",
                                metadata=metadata)).id
             for text, metadata in (
                 ("the launch party is on friday at the harbour", {}),
                 ("the launch date moved to march after the review",
                  {"sensitivity": "internal"}),
                 ("alice leads the launch checklist this quarter", {"sensitivity": 2}))}
    return restricted, shown


async def test_a_sensitive_memory_found_by_search_never_reaches_the_context(
        clock: ManualClock) -> None:
    manager = GovernedMemoryManager.from_profile(loads_profile(profile()), clock=clock,
                                                 sinks=[])
    async with manager:
        restricted, shown = await _store(manager)
        found = await manager.search(ALICE, USER_SCOPE, "launch", limit=50)
        assert restricted <= {hit.record.id for hit in found.hits}  # readable by search

        tiers = MemoryTiers(long_term=manager, turns=InMemoryTurnStore())
        await tiers.start()
        context = await MemoryContextBuilder(tiers).build(ALICE, OWNER,
                                                          "what about the launch?")
        assert {memory.record.id for memory in context.recalled} == shown  # top-k full
        prompt = " ".join(str(message["content"])
                          for message in context.prompt_messages("You help Alice."))
        assert "launch party" in prompt and "codes" not in prompt
        # A host's own policy cannot take the profile's exclusion away, and the tiers'
        # snapshot recalls through the same rule.
        wide = MemoryContextBuilder(tiers, policy=ContextPolicy(recall_top_k=20))
        context = await wide.build(ALICE, OWNER, "what about the launch?")
        assert {memory.record.id for memory in context.recalled} == shown
        snapshot = await tiers.snapshot(ALICE, OWNER, query="launch")
        assert not restricted & {record.id for record in snapshot.memories}


async def test_the_listing_fallback_leaves_excluded_labels_out(
        manager: GovernedMemoryManager, flaky: FlakyProvider) -> None:
    """When the search fails, recall lists the level instead; the listing has no such
    filter, so recall drops the excluded labels itself. A host may add labels."""
    restricted, shown = await _store(manager)
    flaky.fail = {"search"}
    recall = MemoryRecall(ContextPolicy(recall_top_k=20), manager,
                          exclude_sensitivity=["restricted"])
    result = await recall.recall(ALICE, OWNER, "launch")
    assert {memory.record.id for memory in result.memories} == shown
    assert any(reason.startswith("recall.search_failed") for reason in result.degraded)
    assert not restricted & {memory.record.id for memory in result.memories}


def test_a_profile_names_labels_a_search_could_use() -> None:
    for bad, path in (('[""]', "context.exclude_sensitivity[0]"),
                      ('["a", "a"]', "context.exclude_sensitivity[1]"),
                      ('"restricted"', "context.exclude_sensitivity")):
        with pytest.raises(MemoryConfigurationError) as refused:
            loads_profile(profile(f"exclude_sensitivity = {bad}"))
        assert path in str(refused.value), str(refused.value)
    with pytest.raises(MemoryValidationError):
        MemoryRecall(ContextPolicy(), None, exclude_sensitivity="restricted")


def test_the_key_leaves_earlier_profiles_revisions_alone() -> None:
    unset = loads_profile(profile(""))
    empty = loads_profile(profile("exclude_sensitivity = []"))
    named = loads_profile(profile())
    assert unset.revision == empty.revision != named.revision
