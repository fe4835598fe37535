"""Hybrid ranking: fuse lexical and vector candidates, then weigh recency and importance.

Fusion is weighted reciprocal-rank fusion: a candidate at rank ``r`` of a signal adds
``weight / (rrf_k + r)``. Ranks, unlike raw scores, are comparable across signals (a
BM25 score has no fixed scale, a cosine lies in [-1, 1]), so one weight per signal is
all a profile needs to say. Recency and importance never bring a candidate in; they
multiply a fused score by ``1 + weight * factor``, with ``factor`` in [0, 1]:
``0.5 ** (age / recency_half_life_s)`` (age since the record's ``event_time``: when it
happened, or its first write when nobody said, measured at ``as_of`` when the search
sets one) and the
record's ``importance``. Ties break by id, so equal inputs always give one order.

Each hit explains itself: every signal's raw value, its rank among the candidates and
its weight, which is also what a retrieval snapshot stores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

import attrs
from governed_memory.indexing import RankingConfig
from governed_memory.records import HitExplanation, MemoryRecord, SearchHit, SignalScore

LEXICAL: Final = "lexical_bm25"
VECTOR: Final = "vector_cosine"
RECENCY: Final = "recency"
IMPORTANCE: Final = "importance"
TIE_BREAK: Final = "score desc, id asc"


def _ranks(values: Mapping[str, float]) -> dict[str, int]:
    """1-based ranks by value descending, then id ascending."""
    ordered = sorted(values, key=lambda record_id: (-values[record_id], record_id))
    return {record_id: rank for rank, record_id in enumerate(ordered, start=1)}


@attrs.frozen(slots=True)
class Fused:
    record_id: str
    score: float
    signals: tuple[SignalScore, ...]

    def hit(self, record: MemoryRecord, rank: int) -> SearchHit:
        return SearchHit(record=record, score=self.score, rank=rank,
                         explanation=HitExplanation(signals=self.signals, tie_break=TIE_BREAK))


def needs_records(ranking: RankingConfig) -> bool:
    """Whether fusion reads candidates' records (their age and importance)."""
    return (ranking.weight("recency") > 0 and ranking.recency_half_life_s is not None
            ) or ranking.weight("importance") > 0


def fuse(ranking: RankingConfig, *, lexical: Sequence[tuple[str, float]],
         vector: Sequence[tuple[str, float]], records: Mapping[str, MemoryRecord],
         now: float, limit: int) -> list[Fused]:
    """The best ``limit`` candidates, ranked and explained.

    ``lexical`` and ``vector`` are ``(record id, raw score)`` in their own rank order.
    ``records`` must hold every candidate's record when :func:`needs_records` says so
    (all of them already passed the hard filters); otherwise it may be empty.
    """
    lexical_values = dict(lexical)
    vector_values = dict(vector)
    lexical_ranks = {record_id: rank for rank, (record_id, _) in enumerate(lexical, start=1)}
    vector_ranks = {record_id: rank for rank, (record_id, _) in enumerate(vector, start=1)}
    candidates = list(dict.fromkeys([*lexical_values, *vector_values]))
    k = ranking.rrf_k
    w_lexical, w_vector = ranking.weight("lexical"), ranking.weight("vector")
    w_recency, w_importance = ranking.weight("recency"), ranking.weight("importance")
    half_life = ranking.recency_half_life_s
    recency: dict[str, float] = {}
    if w_recency > 0 and half_life is not None:
        recency = {record_id: 0.5 ** (max(0.0, now - records[record_id].event_time) / half_life)
                   for record_id in candidates}
    importance: dict[str, float] = {}
    if w_importance > 0:
        importance = {record_id: min(1.0, max(0.0, records[record_id].importance))
                      for record_id in candidates}
    recency_ranks, importance_ranks = _ranks(recency), _ranks(importance)

    fused: list[Fused] = []
    for record_id in candidates:
        score = 0.0
        signals: list[SignalScore] = []
        if record_id in lexical_ranks:
            rank = lexical_ranks[record_id]
            score += w_lexical / (k + rank)
            signals.append(SignalScore(LEXICAL, lexical_values[record_id], rank, w_lexical))
        if record_id in vector_ranks:
            rank = vector_ranks[record_id]
            score += w_vector / (k + rank)
            signals.append(SignalScore(VECTOR, vector_values[record_id], rank, w_vector))
        if record_id in recency:
            score *= 1.0 + w_recency * recency[record_id]
            signals.append(SignalScore(RECENCY, recency[record_id], recency_ranks[record_id],
                                       w_recency))
        if record_id in importance:
            score *= 1.0 + w_importance * importance[record_id]
            signals.append(SignalScore(IMPORTANCE, importance[record_id],
                                       importance_ranks[record_id], w_importance))
        fused.append(Fused(record_id, score, tuple(signals)))
    fused.sort(key=lambda item: (-item.score, item.record_id))
    return fused[:limit]


def lexical_only(ranking: RankingConfig) -> bool:
    """Plain BM25 ranking (the score is the BM25 score): only the lexical signal runs and
    nothing re-weighs it."""
    return (ranking.modes == ("lexical",) and ranking.weight("recency") == 0
            and ranking.weight("importance") == 0)


def pool_size(limit: int) -> int:
    """Candidates each signal contributes before fusion: enough that a record ranked
    modestly by both signals can still win."""
    return min(max(limit * 5, 50), 500)
