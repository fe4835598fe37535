"""``ContextPolicy``: every knob of the per-turn context, checked when it is built.

An incoherent policy (keep more messages than are loaded, a fraction above one, a
weight outside 0..2) raises ``MemoryConfigurationError`` at wiring time rather than
misbehaving on some later turn. ``ContextPolicy.disabled()`` is the escape hatch: no
model calls, no memory writes, a four-message window.
"""

from __future__ import annotations

import math
from typing import Any

import attrs

from governed_memory.errors import MemoryConfigurationError
from governed_memory.profiles.spec import ContextSection
from governed_memory.scope import ScopeLevel

RECALLABLE_LEVELS = frozenset({ScopeLevel.SESSION, ScopeLevel.USER, ScopeLevel.PROJECT,
                               ScopeLevel.TENANT})
MAX_RECENT_MESSAGES = 500
MAX_RECALL_TOP_K = 100


def _levels(value: Any) -> tuple[ScopeLevel, ...]:
    if isinstance(value, str | ScopeLevel):
        value = (value,)
    try:
        return tuple(ScopeLevel(v) for v in value)
    except (TypeError, ValueError) as exc:
        raise MemoryConfigurationError(f"recall_scopes: {exc}") from None


@attrs.frozen(slots=True)
class ContextPolicy:
    enabled: bool = True
    """When false: a plain window, no model call, no summary, no recall."""
    recent_max_messages: int = 12
    """How many turns are loaded from history."""
    recent_max_tokens: int = 2000
    """Token budget of the verbatim window."""
    summary_trigger_fraction: float = 0.7
    """Share of ``recent_max_tokens`` above which the rolling summary is refreshed."""
    summary_keep_messages: int = 8
    """Turns kept verbatim after a refresh (at most ``recent_max_messages``)."""
    recall_top_k: int = 6
    """How many long-term memories recall may return (0 disables recall)."""
    recall_scopes: tuple[ScopeLevel, ...] = attrs.field(
        default=(ScopeLevel.USER, ScopeLevel.PROJECT, ScopeLevel.SESSION, ScopeLevel.TENANT),
        converter=_levels)
    """Levels recall consults, each as an exactly narrowed scope."""
    recency_half_life_hours: float = 168.0
    block_budget_fraction: float = 0.15
    """Share of ``recent_max_tokens`` the recalled-memory block may take."""
    query_rewrite: bool = True
    """Condense the question into a standalone query (one model call)."""
    extraction_min_importance: float = 0.3
    dedup_threshold: float = 0.92
    """Vector similarity at or above which a proposed fact restates a stored one."""
    entity_confidence_floor: float = 0.5
    entity_overlap_weight: float = 0.5
    type_affinity_weight: float = 0.5
    summary_catchup_pages: int = 4
    """Pages of unread history one turn may fold into the summary."""
    summary_page_size: int = 50
    """Turns per catch-up page."""
    total_budget_tokens: int | None = None
    """The most the whole context may add to a prompt: memory blocks, summary, window
    and recalled memories together, by the builder's token counter (characters, if
    that counter counts characters). The builder divides it in that order and never
    exceeds it, cutting from the end of the order; ``None`` keeps only each part's own
    budget (and the summary on top of them)."""

    def __attrs_post_init__(self) -> None:
        for name in ("enabled", "query_rewrite"):
            if not isinstance(getattr(self, name), bool):
                raise MemoryConfigurationError(f"{name} must be true or false")
        _int(self, "recent_max_messages", 1, MAX_RECENT_MESSAGES)
        _int(self, "recent_max_tokens", 1, 10_000_000)
        _int(self, "summary_keep_messages", 1, self.recent_max_messages)
        _int(self, "recall_top_k", 0, MAX_RECALL_TOP_K)
        _int(self, "summary_catchup_pages", 1, 16)
        _int(self, "summary_page_size", 1, 100)
        if self.total_budget_tokens is not None:
            _int(self, "total_budget_tokens", 1, 10_000_000)
        _number(self, "summary_trigger_fraction", 0.0, 1.0, low_open=True)
        _number(self, "block_budget_fraction", 0.0, 1.0, low_open=True)
        _number(self, "recency_half_life_hours", 0.0, 1e9, low_open=True)
        _number(self, "extraction_min_importance", 0.0, 1.0)
        _number(self, "dedup_threshold", 0.0, 1.0, low_open=True)
        _number(self, "entity_confidence_floor", 0.0, 1.0)
        _number(self, "entity_overlap_weight", 0.0, 2.0)
        _number(self, "type_affinity_weight", 0.0, 2.0)
        if len(set(self.recall_scopes)) != len(self.recall_scopes):
            raise MemoryConfigurationError("recall_scopes lists a level twice")
        wrong = [lvl.value for lvl in self.recall_scopes if lvl not in RECALLABLE_LEVELS]
        if wrong:
            raise MemoryConfigurationError(
                f"recall_scopes may hold session, user, project and tenant, not "
                f"{', '.join(wrong)}")
        if self.recall_top_k > 0 and not self.recall_scopes:
            raise MemoryConfigurationError("recall_top_k > 0 needs at least one recall scope")

    @property
    def block_budget_tokens(self) -> int:
        return int(self.block_budget_fraction * self.recent_max_tokens)

    @property
    def summary_trigger_tokens(self) -> float:
        return self.summary_trigger_fraction * self.recent_max_tokens

    @classmethod
    def disabled(cls) -> ContextPolicy:
        return cls(enabled=False, recent_max_messages=4, summary_keep_messages=4,
                   recall_top_k=0, query_rewrite=False)

    @classmethod
    def from_profile(cls, section: ContextSection, **overrides: Any) -> ContextPolicy:
        """The profile's ``[context]`` budgets as a policy (turns, tokens, memories, and
        the total the whole context must fit)."""
        turns = min(section.max_turns, MAX_RECENT_MESSAGES)
        values: dict[str, Any] = {
            "recent_max_messages": turns,
            "recent_max_tokens": section.budget_tokens,
            "summary_keep_messages": min(8, turns),
            "recall_top_k": min(section.max_memories, MAX_RECALL_TOP_K),
            "total_budget_tokens": section.total_budget_tokens,
        }
        values.update(overrides)
        return cls(**values)


def _int(policy: ContextPolicy, name: str, low: int, high: int) -> None:
    value = getattr(policy, name)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise MemoryConfigurationError(f"{name} must be an integer in [{low}, {high}], "
                                       f"got {value!r}")


def _number(policy: ContextPolicy, name: str, low: float, high: float, *,
            low_open: bool = False) -> None:
    value = getattr(policy, name)
    ok = (not isinstance(value, bool) and isinstance(value, int | float)
          and math.isfinite(value) and (value > low if low_open else value >= low)
          and value <= high)
    if not ok:
        bracket = "(" if low_open else "["
        raise MemoryConfigurationError(f"{name} must be a number in {bracket}{low:g}, "
                                       f"{high:g}], got {value!r}")
