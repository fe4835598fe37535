"""Per-search ranking options: one search may re-weigh the profile's ranking.

Comparing two weightings used to need two managers (and, on the memory backend, two
embeddings of everything). A search may now carry ``RankingOptions``: the modes to run,
weights for the signals, and recency on or off. They are bounded by the profile: the
modes must be among the profile's, each weight at most ``[retrieval.request_ranking]
max_weight``, and a profile may refuse options altogether (``allowed = false``). The
ranking a search actually used, options applied, is what its retrieval snapshot records
and what its replay reports.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import attrs

from governed_memory.errors import MemoryValidationError
from governed_memory.indexing import SIGNALS, RankingConfig
from governed_memory.limits import is_real

__all__ = ["MODES", "RankingOptions"]

MODES = ("lexical", "vector")


def _frozen_weights(value: Mapping[str, float] | None) -> Mapping[str, float]:
    return MappingProxyType(dict(value or {}))


@attrs.frozen(kw_only=True)
class RankingOptions:
    """What one search changes in the profile's ranking; ``None`` keeps the profile's.

    ``weights`` are merged over the profile's (a weight of 0 turns a signal off);
    ``recency=False`` drops the recency boost, ``True`` keeps the profile's half-life
    (a profile without one cannot be asked for recency).
    """

    modes: tuple[str, ...] | None = None
    weights: Mapping[str, float] = attrs.field(factory=dict, converter=_frozen_weights)
    recency: bool | None = None

    def validate(self) -> None:
        if self.modes is not None:
            if not isinstance(self.modes, tuple) or not self.modes:
                raise MemoryValidationError("ranking.modes names at least one mode",
                                            field="ranking.modes")
            for index, mode in enumerate(self.modes):
                if mode not in MODES:
                    raise MemoryValidationError(f"ranking modes are {' and '.join(MODES)}",
                                                field=f"ranking.modes[{index}]")
            if len(set(self.modes)) != len(self.modes):
                raise MemoryValidationError("a ranking mode is named twice",
                                            field="ranking.modes")
        if not isinstance(self.weights, Mapping):
            raise MemoryValidationError("ranking.weights is a mapping", field="ranking.weights")
        for name, weight in self.weights.items():
            if name not in SIGNALS:
                raise MemoryValidationError(f"unknown signal; known: {', '.join(SIGNALS)}",
                                            field=f"ranking.weights.{name}")
            if not is_real(weight) or weight < 0:  # is_real: a huge int cannot overflow
                raise MemoryValidationError("a weight is a non-negative number",
                                            field=f"ranking.weights.{name}")
        if self.recency is not None and not isinstance(self.recency, bool):
            raise MemoryValidationError("ranking.recency is true or false",
                                        field="ranking.recency")

    def within(self, *, modes: tuple[str, ...], max_weight: float, allowed: bool) -> None:
        """Refuse what the profile does not allow (named by field, nothing applied)."""
        self.validate()
        if not allowed:
            raise MemoryValidationError("this profile does not take ranking options "
                                        "([retrieval.request_ranking] allowed = false)",
                                        field="ranking")
        for mode in self.modes or ():
            if mode not in modes:
                raise MemoryValidationError(
                    f"mode {mode!r} is not one of the profile's ({', '.join(modes)})",
                    field="ranking.modes")
        for name, weight in self.weights.items():
            if weight > max_weight:
                raise MemoryValidationError(
                    f"weight {weight} is above the profile's max_weight {max_weight}",
                    field=f"ranking.weights.{name}")

    def apply(self, ranking: RankingConfig) -> RankingConfig:
        """The ranking a search runs: the profile's with these options applied."""
        modes = ranking.modes if self.modes is None else self.modes
        weights: dict[str, Any] = {k: v for k, v in ranking.weights.items()
                                   if k not in MODES or k in modes}
        weights.update(self.weights)
        for name in MODES:
            if weights.get(name, 0) > 0 and name not in modes:
                raise MemoryValidationError(f"weighs {name!r}, a mode this search does "
                                            "not run", field=f"ranking.weights.{name}")
        half_life = ranking.recency_half_life_s
        if self.recency is False:
            half_life = None
            weights.pop("recency", None)
        elif self.recency is True:
            if half_life is None:
                raise MemoryValidationError("recency needs the profile's "
                                            "recency_half_life_s", field="ranking.recency")
            weights.setdefault("recency", 1.0)
        if weights.get("recency", 0) > 0 and half_life is None:
            raise MemoryValidationError("a recency weight needs the profile's "
                                        "recency_half_life_s", field="ranking.weights.recency")
        return RankingConfig(modes=modes, weights=weights, recency_half_life_s=half_life,
                             rrf_k=ranking.rrf_k)
