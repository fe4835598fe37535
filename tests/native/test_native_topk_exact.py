"""``lexical_topk.top_k`` is the exhaustive BM25 top-k, also when most documents hold
every query word (early completion probes terms that are read later: a document must
not count such a term twice)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping, Sequence

from governed_memory_native.retrieval.bm25 import Document, score_documents
from governed_memory_native.retrieval.lexical import OneTermAtATime, Statistics, first_reads, top_k
from hypothesis import given, settings
from hypothesis import strategies as st


class Corpus(OneTermAtATime[str]):
    """A PostingsSource over plain word counts."""

    def __init__(self, docs: Mapping[str, Counter[str]]) -> None:
        self.docs = docs

    async def statistics(self, terms: Sequence[str]) -> Statistics[str]:
        return Statistics(len(self.docs), sum(sum(v.values()) for v in self.docs.values()),
                          {t: sum(1 for v in self.docs.values() if t in v) for t in terms})

    async def postings_of(self, term: str) -> list[tuple[str, int, int]]:
        return [(d, v[term], sum(v.values())) for d, v in self.docs.items() if term in v]

    async def probe_of(self, term: str, docs: Sequence[str]) -> dict[str, int]:
        return {d: self.docs[d][term] for d in docs if term in self.docs[d]}

    async def identify(self, docs: Sequence[str]) -> dict[str, str]:
        return {d: d for d in docs}


def exhaustive(docs: Mapping[str, Counter[str]], tokens: Sequence[str],
               limit: int) -> list[tuple[str, float]]:
    scores = score_documents([Document(d, v, sum(v.values())) for d, v in docs.items()],
                             tokens)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:limit]


WORDS = ("quiet", "mode", "tea", "green", "desk", "dark", "hike", "zebra")
# Dense bodies: most words in most records, once or twice (what makes early completion
# probe terms that are read later).
bodies = st.dictionaries(st.sampled_from(WORDS), st.integers(1, 2), min_size=3)


@settings(max_examples=400, deadline=None)
@given(st.lists(bodies, min_size=1, max_size=30), st.integers(1, 12),
       st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))
def test_top_k_equals_exhaustive_bm25_on_dense_corpora(
        corpus: list[dict[str, int]], limit: int, query: list[str]) -> None:
    docs = {f"d{i:03d}": Counter(body) for i, body in enumerate(corpus)}
    found = asyncio.run(top_k(Corpus(docs), query, limit))
    expected = exhaustive(docs, query, limit)
    assert [doc for doc, _ in found.ranked] == [doc for doc, _ in expected]
    for (_, got), (_, want) in zip(found.ranked, expected, strict=True):
        assert abs(got - want) <= 1e-9 * max(1.0, abs(want))


# A store where most records hold both query words: completing the best candidates
# early probes "mode" before its postings are read, and reading them must not add the
# same part again (the limits 3 to 9 came back wrong when it did).
DENSE = [
    {"green": 2, "dark": 1, "mode": 1, "zebra": 1, "hike": 1, "quiet": 1, "tea": 1},
    {"dark": 2, "zebra": 1, "quiet": 1, "green": 1, "mode": 1, "hike": 1, "tea": 1},
    {"mode": 2, "quiet": 1, "dark": 1, "hike": 1, "green": 1, "zebra": 1, "tea": 1, "again": 1},
    {"zebra": 2, "green": 1, "hike": 1, "dark": 1, "quiet": 1, "mode": 1, "tea": 1},
    {"hike": 2, "mode": 1, "green": 1, "quiet": 1, "zebra": 1, "dark": 1, "tea": 1},
    {"quiet": 2, "hike": 1, "zebra": 1, "mode": 1, "dark": 1, "green": 1, "tea": 1, "again": 1},
    {"green": 2, "dark": 1, "mode": 1, "zebra": 1, "hike": 1, "quiet": 1, "tea": 1},
    {"dark": 2, "zebra": 1, "quiet": 1, "green": 1, "mode": 1, "hike": 1, "tea": 1, "again": 1},
    {"mode": 2, "quiet": 1, "dark": 1, "hike": 1, "green": 1, "zebra": 1, "tea": 1},
    {"zebra": 2, "green": 1, "hike": 1, "dark": 1, "quiet": 1, "mode": 1, "tea": 1},
    {"hike": 2, "mode": 1, "green": 1, "quiet": 1, "zebra": 1, "dark": 1, "tea": 1},
    {"green": 2, "dark": 1, "zebra": 1, "hike": 1, "tea": 1, "again": 1},
    {"dark": 2, "zebra": 1, "green": 1, "hike": 1, "tea": 1},
]


def test_a_term_probed_early_is_not_counted_twice() -> None:
    docs = {f"d{i:02d}": Counter(body) for i, body in enumerate(DENSE)}
    for limit in range(1, 14):
        found = asyncio.run(top_k(Corpus(docs), ("quiet", "mode"), limit))
        assert [doc for doc, _ in found.ranked] == [
            doc for doc, _ in exhaustive(docs, ("quiet", "mode"), limit)], limit


class Counted(Corpus):
    """The corpus, counting the requests a search makes (a round trip each on
    PostgreSQL)."""

    def __init__(self, docs: Mapping[str, Counter[str]]) -> None:
        super().__init__(docs)
        self.requests: list[tuple[str, tuple[str, ...]]] = []

    async def postings(self, terms: Sequence[str]) -> Mapping[str, Sequence[tuple[str, int, int]]]:
        self.requests.append(("postings", tuple(terms)))
        return await super().postings(terms)

    async def probe(self, terms: Sequence[str], docs: Sequence[str], *,
                    next_read: str | None = None) -> Mapping[str, Mapping[str, int]]:
        self.requests.append(("probe", tuple(terms)))
        return await super().probe(terms, docs, next_read=next_read)


def test_the_rarest_terms_come_in_one_request_and_a_completion_in_one_more() -> None:
    """Three rare words are read together (their postings sum to far below
    READ_TOGETHER), the best candidates are completed by one probe of every unread
    word, and "the" (in every record) is then never read: two requests, where a term at
    a time made one per word read and one per word probed."""
    docs = {f"d{i:03d}": Counter(["the"] + ["zebra"] * (i % 50 == 0) + ["quartz"] * (i % 60 == 0)
                                 + ["ylang"] * (i % 70 == 0)) for i in range(400)}
    counted = Counted(docs)
    found = asyncio.run(top_k(counted, ("zebra", "quartz", "ylang", "the"), 3))
    assert [doc for doc, _ in found.ranked] == [
        doc for doc, _ in exhaustive(docs, ("zebra", "quartz", "ylang", "the"), 3)]
    assert counted.requests == [("postings", ("ylang", "quartz", "zebra")), ("probe", ("the",))]
    assert first_reads(["ylang", "quartz", "zebra", "the"],
                       {"ylang": 6, "quartz": 7, "zebra": 8, "the": 400}, 400) == [
        "ylang", "quartz", "zebra"]
