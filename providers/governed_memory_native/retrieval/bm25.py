"""Okapi BM25, written once and used by every backend.

Every backend scores with these functions on statistics taken from the same corpus, and
:mod:`retrieval.lexical` (the one top-k search all backends run) calls them with the same
operations in the same order; that is what makes memory, SQLite and PostgreSQL return
identical scores (not merely close ones), so ties break the same way too.

**The corpus** of a search is the *visible* records of the requested scopes: status
``active`` and not expired at the search's ``now`` (``MemoryRecord.is_visible``).
Statistics are strictly per scope: a search over several scopes sums their document
counts, total lengths and document frequencies, and nothing of any other scope (another
user, another tenant) ever enters them, so another tenant's words never move your
scores. Each backend keeps, per scope and on every write, the statistics of its
*active* records (count, total length in words, document frequency per word) with the
postings; expiry depends on the time of the search, so a search subtracts the active
records of its scopes that have expired by ``now`` (they are few: ``purge_expired``
erases them). The result is exact and the same on every backend. Filters (type, entity,
metadata, validity, visibility) restrict which records may be returned, never the
statistics.

The constants are k1 = 1.2 and b = 0.75, and the idf is Lucene's
``ln(1 + (N - n + 0.5) / (n + 0.5))``, which is positive for every ``n <= N``: a word
found in half (or all) of a small scope still adds to a record's score, so a tiny store
ranks real matches above nothing and never falls back to ordering by id. (Until schema
v9 / PostgreSQL v6 the idf was the classic ``ln((N - n + 0.5) / (n + 0.5))`` floored
at 1e-6, which scored such words zero.)
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Final

import attrs

K1: Final = 1.2
B: Final = 0.75


@attrs.frozen(slots=True)
class Document:
    doc_id: str
    term_counts: Counter[str]
    length: int


def idf(corpus_size: int, containing: int) -> float:
    """Lucene's BM25 idf: never zero or negative while ``containing <= corpus_size``."""
    return math.log(1 + (corpus_size - containing + 0.5) / (containing + 0.5))


def average_length(corpus_size: int, total_length: int) -> float:
    """Mean document length in words; 1.0 for an empty corpus or one of empty documents."""
    if corpus_size <= 0:
        return 1.0
    return total_length / corpus_size or 1.0


def term_weights(
    corpus_size: int, containing: Mapping[str, int], terms: Sequence[str]
) -> dict[str, float]:
    """The idf of each query term, from how many corpus documents contain it."""
    return {term: idf(corpus_size, containing.get(term, 0)) for term in terms}


def saturation(frequency: int, length: int, mean_length: float) -> float:
    """The term-frequency part of one term's score in one document (idf excluded)."""
    norm = K1 * (1 - B + B * length / mean_length)
    return frequency * (K1 + 1) / (frequency + norm)


UPPER_SATURATION: Final = K1 + 1
""":func:`saturation` never reaches this, whatever the frequency and length."""


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

    The exhaustive reference: ``corpus`` is the whole collection the statistics come
    from; documents that match no term are absent from the result rather than scored
    zero. :mod:`retrieval.lexical` must return exactly the best of these.
    """
    if not corpus or not terms:
        return {}
    mean_length = average_length(len(corpus), sum(doc.length for doc in corpus))
    containing = Counter(term for doc in corpus for term in dict.fromkeys(terms)
                         if term in doc.term_counts)
    weights = term_weights(len(corpus), containing, terms)
    scores: dict[str, float] = {}
    for doc in corpus:
        score = document_score(doc.term_counts, doc.length, terms, weights, mean_length)
        if score is not None:
            scores[doc.doc_id] = score
    return scores
