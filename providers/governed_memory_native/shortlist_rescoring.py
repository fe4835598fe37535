"""Exact BM25 rescoring of the shortlist an SQL backend's search statement returns.

SQLite and PostgreSQL both let SQL rank every candidate, then rescore the ones near the
``limit``-th score in Python with :mod:`bm25`, so scores and tie order equal the memory
backend's exactly whatever order the database summed in. Both statements return the same
row shape (one row per posting of each contender, with the corpus statistics repeated),
so the rescoring is one function here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from governed_memory_native.bm25 import average_length, document_score, term_weights


@attrs.frozen
class Rescored:
    """The winners' ``seq`` in rank order (ties broken by id), their exact scores, and
    how many documents SQL found matching at all."""

    winners: list[int]
    scores: dict[int, float]
    candidates: int


def rescore(rows: Sequence[Any], tokens: Sequence[str], limit: int) -> Rescored:
    """``rows`` carry ``size``, ``total``, ``candidates``, ``term``, ``df``, ``doc``,
    ``id``, ``len`` and ``tf`` by name, and are not empty."""
    size, total_length, candidates = (int(rows[0][name])
                                      for name in ("size", "total", "candidates"))
    containing: dict[str, int] = {}
    contenders: dict[int, tuple[str, int, dict[str, int]]] = {}
    for row in rows:
        containing[row["term"]] = int(row["df"])
        seq = int(row["doc"])
        contenders.setdefault(seq, (str(row["id"]), int(row["len"]), {}))[2][
            row["term"]] = int(row["tf"])
    weights = term_weights(size, containing, tokens)
    mean_length = average_length(size, total_length)
    scores: dict[int, float] = {}
    for seq, (_, length, frequencies) in contenders.items():
        score = document_score(frequencies, length, tokens, weights, mean_length)
        if score is not None:
            scores[seq] = score
    winners = sorted(scores, key=lambda seq: (-scores[seq], contenders[seq][0]))
    return Rescored(winners=winners[:limit], scores=scores, candidates=candidates)
