"""Okapi BM25, written once and used by every backend.

Both backends score with these functions, on statistics taken from the same corpus:
the visible (active, unexpired) records of the requested scopes. The in-memory backend
counts them in Python; SQLite counts them in SQL and hands the counts over. Scoring in
one place, with the same operations in the same order, is what makes the two backends
return identical scores (not merely close ones), so ties break the same way too.

The constants are FTS5's (k1=1.2, b=0.75, idf floored at 1e-6), so scores keep the
scale SQLite's ``bm25()`` had before statistics were restricted to the caller's scopes.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
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


def average_length(corpus_size: int, total_length: int) -> float:
    """Mean document length in words; 1.0 for a corpus of empty documents."""
    return total_length / corpus_size or 1.0


def term_weights(
    corpus_size: int, containing: Mapping[str, int], terms: Sequence[str]
) -> dict[str, float]:
    """The idf of each query term, from how many corpus documents contain it."""
    return {term: idf(corpus_size, containing.get(term, 0)) for term in terms}


def document_score(
    frequencies: Mapping[str, int], length: int, terms: Sequence[str],
    weights: Mapping[str, float], mean_length: float,
) -> float | None:
    """One document's score, summed over ``terms`` in order; ``None`` if none occurs."""
    norm = K1 * (1 - B + B * length / mean_length)
    total = 0.0
    matched = False
    for term in terms:
        frequency = frequencies.get(term, 0)
        if not frequency:
            continue
        matched = True
        total += weights[term] * frequency * (K1 + 1) / (frequency + norm)
    return total if matched else None


def score_documents(
    corpus: Sequence[Document], terms: Sequence[str]
) -> dict[str, float]:
    """Scores of the documents containing at least one term; higher is better.

    ``corpus`` is the whole collection the statistics come from; documents that match
    no term are absent from the result rather than scored zero.
    """
    if not corpus or not terms:
        return {}
    mean_length = average_length(len(corpus), sum(doc.length for doc in corpus))
    containing = Counter(term for doc in corpus for term in terms if term in doc.term_counts)
    weights = term_weights(len(corpus), containing, terms)
    scores: dict[str, float] = {}
    for doc in corpus:
        score = document_score(doc.term_counts, doc.length, terms, weights, mean_length)
        if score is not None:
            scores[doc.doc_id] = score
    return scores
