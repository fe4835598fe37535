"""``ContextPolicy``: every field validated at construction; ``disabled()``."""

from __future__ import annotations

from typing import Any

import pytest
from governed_memory.errors import MemoryConfigurationError
from governed_memory.profiles.spec import ContextSection
from governed_memory.scope import ScopeLevel
from governed_memory.turncontext import ContextPolicy


def test_the_defaults_are_the_references() -> None:
    policy = ContextPolicy()
    assert (policy.enabled, policy.recent_max_messages, policy.recent_max_tokens,
            policy.summary_trigger_fraction, policy.summary_keep_messages,
            policy.recall_top_k, policy.recency_half_life_hours, policy.block_budget_fraction,
            policy.query_rewrite, policy.extraction_min_importance, policy.dedup_threshold,
            policy.entity_confidence_floor, policy.entity_overlap_weight,
            policy.type_affinity_weight) == (True, 12, 2000, 0.7, 8, 6, 168.0, 0.15, True,
                                             0.3, 0.92, 0.5, 0.5, 0.5)
    assert policy.recall_scopes == (ScopeLevel.USER, ScopeLevel.PROJECT, ScopeLevel.SESSION,
                                    ScopeLevel.TENANT)
    assert policy.block_budget_tokens == 300


@pytest.mark.parametrize(("fields", "match"), [
    ({"enabled": "yes"}, "enabled"),
    ({"query_rewrite": 1}, "query_rewrite"),
    ({"recent_max_messages": 0}, "recent_max_messages"),
    ({"recent_max_messages": 4, "summary_keep_messages": 8}, "summary_keep_messages"),
    ({"recent_max_tokens": 0}, "recent_max_tokens"),
    ({"recent_max_tokens": 1.5}, "recent_max_tokens"),
    ({"summary_trigger_fraction": 0}, "summary_trigger_fraction"),
    ({"summary_trigger_fraction": 1.2}, "summary_trigger_fraction"),
    ({"recall_top_k": -1}, "recall_top_k"),
    ({"recall_top_k": 101}, "recall_top_k"),
    ({"recall_scopes": ("user", "user")}, "twice"),
    ({"recall_scopes": ("global",)}, "recall_scopes"),
    ({"recall_scopes": ("run",)}, "recall_scopes"),
    ({"recall_scopes": ("galaxy",)}, "recall_scopes"),
    ({"recall_scopes": ()}, "recall scope"),
    ({"recency_half_life_hours": 0}, "recency_half_life_hours"),
    ({"recency_half_life_hours": float("nan")}, "recency_half_life_hours"),
    ({"block_budget_fraction": 0}, "block_budget_fraction"),
    ({"extraction_min_importance": 1.1}, "extraction_min_importance"),
    ({"dedup_threshold": 0}, "dedup_threshold"),
    ({"entity_confidence_floor": -0.1}, "entity_confidence_floor"),
    ({"entity_overlap_weight": 2.5}, "entity_overlap_weight"),
    ({"type_affinity_weight": -1}, "type_affinity_weight"),
    ({"summary_catchup_pages": 0}, "summary_catchup_pages"),
    ({"summary_page_size": 101}, "summary_page_size"),
])
def test_incoherent_values_raise_a_configuration_error(fields: dict[str, Any],
                                                       match: str) -> None:
    with pytest.raises(MemoryConfigurationError, match=match):
        ContextPolicy(**fields)


def test_recall_off_needs_no_scopes() -> None:
    assert ContextPolicy(recall_top_k=0, recall_scopes=()).recall_scopes == ()


def test_disabled_is_the_escape_hatch() -> None:
    policy = ContextPolicy.disabled()
    assert not policy.enabled and policy.recent_max_messages == 4
    assert policy.recall_top_k == 0 and not policy.query_rewrite


def test_from_a_profile_context_section() -> None:
    policy = ContextPolicy.from_profile(ContextSection(budget_tokens=3000, max_memories=9,
                                                       max_turns=6))
    assert (policy.recent_max_tokens, policy.recall_top_k, policy.recent_max_messages,
            policy.summary_keep_messages) == (3000, 9, 6, 6)
