"""Okapi BM25 for the in-memory backend, matching FTS5's ``bm25()`` formula.

Using FTS5's variant (idf floored at 1e-6, k1=1.2, b=0.75) keeps rankings of the two
backends comparable, so a test written against one tells the truth about the other.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Final

import attrs

K1: Final = 1.2
B: Final = 0.75
_IDF_FLOOR: Final = 1e-6


@attrs.frozen(slots=True)
class Document:
    doc_id: str
    term_counts: Counter[str]
    length: int


def idf(corpus_size: int, containing: int) -> float:
    value = math.log((corpus_size - containing + 0.5) / (containing + 0.5))
    return value if value > 0 else _IDF_FLOOR


def score_documents(
    corpus: Sequence[Document], terms: Sequence[str]
) -> dict[str, float]:
    """Scores of the documents containing at least one term; higher is better.

    ``corpus`` is the whole collection the statistics come from; documents that match
    no term are absent from the result rather than scored zero.
    """
    if not corpus or not terms:
        return {}
    size = len(corpus)
    average_length = sum(doc.length for doc in corpus) / size or 1.0
    weights = {
        term: idf(size, sum(1 for doc in corpus if term in doc.term_counts)) for term in terms
    }
    scores: dict[str, float] = {}
    for doc in corpus:
        total = 0.0
        matched = False
        for term in terms:
            frequency = doc.term_counts.get(term, 0)
            if not frequency:
                continue
            matched = True
            norm = K1 * (1 - B + B * doc.length / average_length)
            total += weights[term] * frequency * (K1 + 1) / (frequency + norm)
        if matched:
            scores[doc.doc_id] = total
    return scores
