"""How memories come back: the ranking a search uses, what one search may change of
it, how retrieval snapshots are stored, and the budgets of the per-turn context.

The manager reads ``top_k`` and the ranking for every search; a request's own ranking
is bounded by ``request_ranking``, so a caller can tune a search but never step outside
what the profile allows.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping
from typing import Final

import attrs

from governed_memory.limits import MAX_PAGE_SIZE
from governed_memory.profiles.problems import (
    ProfileProblem,
    check_at_least_one,
    check_positive,
    check_unique,
    frozen_dict,
)
from governed_memory.read_filters import MAX_FILTER_VALUES, label_problem


class RetrievalMode(enum.StrEnum):
    LEXICAL = "lexical"
    VECTOR = "vector"


class SnapshotStorage(enum.StrEnum):
    OFF = "off"
    BATCHED = "batched"
    SYNC = "sync"


SIGNALS: Final = ("lexical", "vector", "recency", "importance")
_MODE_NAMES: Final = frozenset(mode.value for mode in RetrievalMode)


@attrs.frozen(slots=True)
class RequestRankingSection:
    """What one search may change of the ranking (``[retrieval.request_ranking]``): its
    modes are always among the profile's; ``max_weight`` bounds every weight it sets."""

    allowed: bool = True
    max_weight: float = 4.0

    def __attrs_post_init__(self) -> None:
        if not math.isfinite(self.max_weight) or self.max_weight <= 0:
            raise ProfileProblem("max_weight", "must be a positive number")


@attrs.frozen(slots=True)
class RetrievalSection:
    modes: tuple[RetrievalMode, ...] = (RetrievalMode.LEXICAL,)
    top_k: int = 10
    """The default number of hits a search returns when the caller does not say."""
    weights: Mapping[str, float] = attrs.field(factory=dict, converter=frozen_dict)
    recency_half_life_s: float | None = None
    snapshots: SnapshotStorage | None = None
    """How retrieval snapshots are stored: ``off``, ``batched`` (the provider default
    when unset: off the request path, no fsync per search) or ``sync`` (committed
    before the search returns)."""
    request_ranking: RequestRankingSection = attrs.field(factory=RequestRankingSection)

    def __attrs_post_init__(self) -> None:
        if not self.modes:
            raise ProfileProblem("modes", "at least one retrieval mode is needed")
        check_unique("modes", self.modes)
        if not 1 <= self.top_k <= MAX_PAGE_SIZE:
            raise ProfileProblem("top_k", f"must be between 1 and {MAX_PAGE_SIZE}, "
                                          f"got {self.top_k}")
        for signal, weight in self.weights.items():
            if signal not in SIGNALS:
                raise ProfileProblem(f"weights.{signal}",
                                     f"unknown signal; known: {', '.join(SIGNALS)}")
            if not math.isfinite(weight) or weight < 0:
                raise ProfileProblem(f"weights.{signal}", "must be a non-negative number")
            if signal in _MODE_NAMES and signal not in self.modes:
                raise ProfileProblem(f"weights.{signal}",
                                     f"weights a mode that is not in modes ({signal!r})")
        check_positive("recency_half_life_s", self.recency_half_life_s)
        if self.weights.get("recency", 0) > 0 and self.recency_half_life_s is None:
            raise ProfileProblem("weights.recency", "needs recency_half_life_s")


@attrs.frozen(slots=True)
class ContextSection:
    """Budgets for the per-turn context built from memory."""

    budget_tokens: int = 2_000
    max_memories: int = 20
    max_turns: int = 20
    total_budget_tokens: int | None = None
    """The most the whole context may add to a prompt (memory blocks, summary, window
    and recalled memories together), in the builder's token counter's units; ``None``:
    each part keeps only its own budget. Added after profiles were published: left out
    of the revision while unset."""
    exclude_sensitivity: tuple[str, ...] = ()
    """Sensitivity labels (the string ``metadata["sensitivity"]``) whose memories a
    context build never places in the prompt: recall's searches leave them out before
    their top-k (``governed_memory.read_filters``). Added after profiles were published:
    left out of the revision while empty."""

    def __attrs_post_init__(self) -> None:
        for name in ("budget_tokens", "max_memories", "max_turns", "total_budget_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool):
                raise ProfileProblem(name, "must be a whole number, not true or false")
            check_at_least_one(name, value)
        excluded = self.exclude_sensitivity
        if len(excluded) > MAX_FILTER_VALUES:
            raise ProfileProblem("exclude_sensitivity",
                                 f"names {len(excluded)} labels; the limit is "
                                 f"{MAX_FILTER_VALUES}")
        for index, label in enumerate(excluded):
            problem = label_problem(label)
            if problem is not None:
                raise ProfileProblem(f"exclude_sensitivity[{index}]", problem)
        check_unique("exclude_sensitivity", excluded)


def block_tokens_estimate(limits: Iterable[int]) -> int:
    """About how many tokens full blocks of these limits (in characters) take: four
    characters a token, the default counter's rate for plain text. The frame, names
    and descriptions ride on top, and non-ASCII text costs more; the builder cuts what
    still does not fit at run time, so this only refuses the impossible up front."""
    return sum(-(-limit // 4) for limit in limits)


def context_budget_problems(total: int | None, block_limits: Mapping[str, int], *,
                            path: str = "context.total_budget_tokens"
                            ) -> list[ProfileProblem]:
    """The declared blocks must fit the total budget: they are in every prompt, first,
    so a total they overrun would cut the agent's own memory on every turn."""
    if total is None or not block_limits:
        return []
    needed = block_tokens_estimate(block_limits.values())
    if needed <= total:
        return []
    return [ProfileProblem(path,
                           f"is {total}, but the declared blocks ({', '.join(block_limits)}) "
                           f"may hold about {needed} tokens (their limits at four "
                           "characters a token); raise it or lower the block limits")]
