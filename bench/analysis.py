"""Retrieval analysis for issue 18: which analyzer, BM25 constants, fusion constants,
weights and candidate depths make search find the right memory, measured offline.

Why this study exists: on a held-out long-conversation benchmark (LoCoMo-like, kept out
of the repository) lexical BM25 beat MiniLM vector search (hit@10 0.576 vs 0.518) and
hybrid with lexical 2 : vector 1 was best (0.639), while on the public sets of
``bench/recall.py`` MiniLM alone beats hybrid. The defaults (no stemming, no stopwords,
k1 = 1.2, b = 0.75, rrf_k = 60, weights 1 : 1, pools of max(5 x limit, 50)) were not
chosen from data. This script measures each choice on the two public sets so that the
defaults can be, and says which settings are near-best on *every* set rather than best
on one.

How: nothing goes through the governed manager. The data are ``recall.py``'s loaders
(``recall_data.generate``: generated conversations, one scope per conversation;
``recall_wiki.load``: Wikipedia sections, one scope) and its scoring (``summarise``,
``summarise_graded``). Lexical scores are computed with the native provider's own
``tokens.words`` and the exact arithmetic of ``bm25.document_score`` (checked equal to
it, and to ``lexical_topk.top_k``, for the provider's constants), so the baseline is
the provider's ranking bit for bit; ties break by insertion order (the provider breaks
them by record id, which follows insertion). Vectors come from the registered embedders
(``hashing``, ``minilm``), stored as the provider stores them (unit float32), cached on
disk (``--cache``). Per query the full lexical and cosine rankings are computed once;
every fusion variant (weighted RRF as in ``retrieval.fuse``, ties by id; pools capped
per signal; a min-max and a z-score convex combination) is then a cheap array
operation.

Studies, each reported as hit@5, hit@10 and nDCG@10 per data set:

1. analyzer: provider words; + possessive rule; + Snowball English stemming (PyStemmer,
   checked against pure-Python snowballstemmer); + stopwords (Snowball's English list,
   or Lucene's classic 33-word list); combinations; a letter/digit split;
2. BM25 k1 x b for every analyzer;
3. fusion: rrf_k x weights x per-signal pool depth, and score-based alternatives, for
   each embedder (and MiniLM over the conversation turns without the speaker's name);
4. costs: stemmer speed per 1,000 words, and the time of ``lexical_topk.top_k``,
   ``vectors.cosine_ranking`` and ``retrieval.fuse`` at each pool depth.

A setting's robust score is the smallest, over the data sets, of its mean of (hit@5,
hit@10, nDCG@10) divided by the best mean any setting of the same study reaches there.

    python bench/analysis.py [--quick] [--out DIR] [--embedders hashing,minilm]
                             [--cache DIR] [--no-cache]

Writes ``analysis.json`` and ``analysis.md`` to ``--out`` (default ``bench/results``;
``--quick`` writes nothing unless ``--out`` is given).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

import recall
import recall_data
import recall_wiki
from governed_memory_native.retrieval import bm25, tokens
from governed_memory_native.retrieval import cosine as vectors
from governed_memory_native.retrieval import fusion as retrieval
from governed_memory_native.retrieval import lexical as lexical_topk

RESULTS = Path(__file__).parent / "results"
CACHE = Path("/tmp/governed-memory-analysis")
TOP = 10
LIMIT = 10
"""The page size an application asks for (the profiles' ``top_k``); the provider's
current pool rule gives ``retrieval.pool_size(LIMIT)`` candidates per signal."""
FULL = 10 ** 9
"""Pool depth meaning the full ranking."""

K1S = (0.9, 1.2, 1.5, 2.0)
BS = (0.4, 0.6, 0.75, 0.9)
RRF_KS = (1, 2, 5, 10, 20, 40, 60, 100)
"""The issue's grid (5 to 100) and two below it, to see whether the best is at its edge."""
WEIGHTS = ((1.0, 0.0), (3.0, 1.0), (2.0, 1.0), (1.5, 1.0), (1.0, 1.0), (1.0, 1.5),
           (1.0, 2.0), (0.0, 1.0))
POOLS = ("rule", 100, 200, 500, "full")
ALPHAS = (0.3, 0.5, 0.7)
"""Lexical share of the score-based convex combinations."""
RECOMMENDED: dict[str, Any] = {"analyzer": "possessive + stem", "k1": 1.2, "b": 0.75,
                               "w_lexical": 1.0, "w_vector": 1.0, "rrf_k": 5,
                               "pool": "rule"}
"""The defaults this study recommends (see the module's report): near-best on every
set for every embedder, without leaning on the vector signal, which the held-out
benchmark found the weaker one."""

# --------------------------------------------------------------------------- analyzers

SNOWBALL_ENGLISH_STOP = """
i me my myself we our ours ourselves you your yours yourself yourselves he him his
himself she her hers herself it its itself they them their theirs themselves what which
who whom this that these those am is are was were be been being have has had having do
does did doing would should could ought i'm you're he's she's it's we're they're i've
you've we've they've i'd you'd he'd she'd we'd they'd i'll you'll he'll she'll we'll
they'll isn't aren't wasn't weren't hasn't haven't hadn't doesn't don't didn't won't
wouldn't shan't shouldn't can't cannot couldn't mustn't let's that's who's what's here's
there's when's where's why's how's a an the and but if or because as until while of at
by for with about against between into through during before after above below to from
up down in out on off over under again further then once here there when where why how
all any both each few more most other some such no nor not only own same so than too
very
"""
"""The Snowball project's English stop word list (snowballstem.org,
``algorithms/english/stop.txt``, BSD licence), the comment lines dropped. Its words go
through the same tokenizer, so ``don't`` contributes ``don`` and ``t``."""

LUCENE_CLASSIC_STOP = """
a an and are as at be but by for if in into is it no not of on or such that the their
then there these they this to was will with
"""
"""Lucene's classic ``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`` (33 words)."""

_POSSESSIVE = tokens.POSSESSIVE
_ALNUM = re.compile(r"(?<=[^\W\d_])(?=\d)|(?<=\d)(?=[^\W\d_])")


# The provider's words before schema v13, the base every analyzer here extends; since
# v13 tokens.words is "possessive + stem" of these (checked on every run).
plain_words = tokens.plain_words


def _stop_set(text: str) -> frozenset[str]:
    return frozenset(word for item in text.split() for word in plain_words(item))


SNOWBALL_STOP = _stop_set(SNOWBALL_ENGLISH_STOP)
LUCENE_STOP = _stop_set(LUCENE_CLASSIC_STOP)


@dataclass(frozen=True)
class Analyzer:
    """Text to index terms: the provider's words with optional extra steps, in the order
    possessive rule, words, letter/digit split, stopwords, stemming (index and query)."""

    name: str
    possessive: bool = False
    stem: str | None = None
    """A Snowball algorithm name (``english`` is Porter2; ``porter`` the original)."""
    stop: frozenset[str] = frozenset()
    split_digits: bool = False

    def __call__(self, text: str) -> list[str]:
        if self.possessive:
            text = _POSSESSIVE.sub("", text)
        words = plain_words(text)
        if self.split_digits:
            words = [part for word in words for part in _ALNUM.split(word) if part]
        if self.stop:
            words = [word for word in words if word not in self.stop]
        if self.stem:
            words = _stemmer(self.stem).stemWords(words)
        return words


_STEMMERS: dict[str, Any] = {}


def _stemmer(algorithm: str) -> Any:
    if algorithm not in _STEMMERS:
        import Stemmer

        _STEMMERS[algorithm] = Stemmer.Stemmer(algorithm)
    return _STEMMERS[algorithm]


ANALYZERS = (
    Analyzer("words (before v13)"),
    Analyzer("possessive", possessive=True),
    Analyzer("stem", stem="english"),
    Analyzer("stop (Snowball list)", stop=SNOWBALL_STOP),
    Analyzer("stop (Lucene 33)", stop=LUCENE_STOP),
    Analyzer("stem + stop", stem="english", stop=SNOWBALL_STOP),
    Analyzer("possessive + stem", possessive=True, stem="english"),
    Analyzer("possessive + stem + stop", possessive=True, stem="english",
             stop=SNOWBALL_STOP),
    Analyzer("possessive + stem + Lucene stop", possessive=True, stem="english",
             stop=LUCENE_STOP),
    Analyzer("possessive + Porter stem + stop", possessive=True, stem="porter",
             stop=SNOWBALL_STOP),
    Analyzer("possessive + stem + stop + digit split", possessive=True, stem="english",
             stop=SNOWBALL_STOP, split_digits=True),
)
BASE = ANALYZERS[0]
ANALYZERS_BY_NAME = {analyzer.name: analyzer for analyzer in ANALYZERS}

# ------------------------------------------------------------------------------- data


@dataclass
class Split:
    """One searched scope: its documents (in insertion order) and its queries."""

    doc_ids: list[str]
    texts: dict[str, list[str]]
    """Document texts per variant: ``memory`` (as stored) and, for conversations,
    ``bare`` (the turn without the speaker's name)."""
    query_ids: list[str]
    queries: list[str]


@dataclass
class Data:
    name: str
    splits: list[Split]
    evaluate: Callable[[Mapping[str, tuple[str, ...]]], dict[str, Any]]
    describe: dict[str, Any]
    embed_variants: dict[str, str] = field(default_factory=dict)
    """Vector signal name -> (embedder name, text variant) encoded as "embedder:variant"."""


def conversations(seed: int, count: int, turns: int) -> Data:
    data = recall_data.generate(seed, conversations=count, turns=turns)
    questions = [q for c in data.conversations for q in c.questions]
    splits = [Split([t.turn_id for t in c.turns],
                    {"memory": [t.memory_text for t in c.turns],
                     "bare": [t.text for t in c.turns]},
                    [q.question_id for q in c.questions], [q.text for q in c.questions])
              for c in data.conversations]

    def evaluate(rankings: Mapping[str, tuple[str, ...]]) -> dict[str, Any]:
        out = recall.summarise(questions, rankings)
        out["by_kind"] = {kind: {"hit@5": v["hit@5"], "hit@10": v["hit@10"]}
                          for kind, v in out["by_kind"].items()}
        return out

    describe = {"generator": data.version, "seed": seed, "conversations": count,
                "turns": data.turn_count, "questions": data.question_count,
                "sha256": recall_data.fingerprint(data)}
    return Data(f"conv-{count}x{turns}", splits, evaluate, describe)


def wiki(articles: int | None) -> Data:
    data = recall_wiki.load(articles=articles)
    split = Split([p.passage_id for p in data.passages],
                  {"memory": [p.text for p in data.passages]},
                  [q.query_id for q in data.queries], [q.text for q in data.queries])
    describe = dict(recall_wiki.describe(data))
    describe["sha256_recall_wiki"] = describe.pop("sha256")
    describe["sha256"] = wiki_fingerprint(data)
    return Data(f"wiki-{len(data.articles)}", [split],
                lambda rankings: recall.summarise_graded(data.queries, rankings), describe)


def wiki_fingerprint(data: Any) -> str:
    """SHA-256 over passages and (query text, judgements) sorted by query text.

    ``recall_wiki.fingerprint`` hashes queries in generation order and numbers them by
    it; that order depends on set iteration (``PYTHONHASHSEED``) when two heading paths
    start at the same passage, so it differs run to run for the same content."""
    digest = hashlib.sha256(recall_wiki.GENERATOR.encode())
    for passage in data.passages:
        digest.update(json.dumps([passage.passage_id, passage.text]).encode())
    for text, grades in sorted((q.text, sorted(q.relevance.items())) for q in data.queries):
        digest.update(json.dumps([text, grades]).encode())
    return digest.hexdigest()


# ---------------------------------------------------------------------------- lexical


@dataclass
class LexicalIndex:
    """One split analyzed: per term the documents holding it and their frequencies."""

    lengths: np.ndarray
    postings: dict[str, tuple[np.ndarray, np.ndarray]]
    query_terms: list[tuple[str, ...]]
    counts: list[Counter[str]]

    @classmethod
    def build(cls, split: Split, analyzer: Analyzer) -> LexicalIndex:
        counts = [Counter(analyzer(text)) for text in split.texts["memory"]]
        lengths = np.array([sum(c.values()) for c in counts], dtype=np.float64)
        grouped: dict[str, tuple[list[int], list[int]]] = {}
        for index, count in enumerate(counts):
            for term, frequency in count.items():
                docs, freqs = grouped.setdefault(term, ([], []))
                docs.append(index)
                freqs.append(frequency)
        postings = {term: (np.array(d, dtype=np.int64), np.array(f, dtype=np.float64))
                    for term, (d, f) in grouped.items()}
        # as tokens.query_tokens: distinct words in first-seen order, at most 128
        query_terms = [tuple(dict.fromkeys(analyzer(q)))[:tokens.MAX_QUERY_TOKENS]
                       for q in split.queries]
        return cls(lengths, postings, query_terms, counts)

    def scores(self, k1: float, b: float) -> np.ndarray:
        """BM25 of every (query, document); ``-inf`` where no query term occurs.

        The operations of ``bm25.document_score`` in its order (terms in query order,
        ``w * f * (k1 + 1) / (f + norm)``), element-wise in float64, so each score is the
        provider's to the last bit."""
        n = len(self.lengths)
        mean = bm25.average_length(n, int(self.lengths.sum()))
        norm = k1 * (1 - b + b * self.lengths / mean)
        out = np.full((len(self.query_terms), n), -np.inf)
        for row, terms in enumerate(self.query_terms):
            containing = {t: len(self.postings[t][0]) for t in terms if t in self.postings}
            weights = bm25.term_weights(n, containing, terms)
            total = np.zeros(n)
            matched = np.zeros(n, dtype=bool)
            for term in terms:
                if term not in self.postings:
                    continue
                docs, freqs = self.postings[term]
                total[docs] = total[docs] + weights[term] * freqs * (k1 + 1) / (
                    freqs + norm[docs])
                matched[docs] = True
            out[row, matched] = total[matched]
        return out


def top_indices(scores: np.ndarray, k: int = TOP) -> list[np.ndarray]:
    """Per row the best ``k`` columns with a finite score: score descending, then column
    (insertion order, as record ids) ascending."""
    n = scores.shape[1]
    kk = min(k, n)
    if kk == 0:
        return [np.zeros(0, dtype=np.int64) for _ in range(scores.shape[0])]
    thresholds = np.partition(scores, n - kk, axis=1)[:, n - kk]
    out = []
    for row, threshold in zip(scores, thresholds, strict=True):
        columns = np.flatnonzero((row >= threshold) & np.isfinite(row))
        columns = columns[np.lexsort((columns, -row[columns]))][:k]
        out.append(columns)
    return out


def full_ranks(scores: np.ndarray) -> np.ndarray:
    """1-based rank of every column per row (score descending, column ascending); a
    large sentinel where the score is not finite (not a candidate)."""
    q, n = scores.shape
    columns = np.broadcast_to(np.arange(n), (q, n))
    keyed = np.where(np.isfinite(scores), -scores, np.inf)
    order = np.lexsort((columns, keyed), axis=-1)
    ranks = np.empty((q, n), dtype=np.int64)
    np.put_along_axis(ranks, order, np.arange(1, n + 1)[None, :].repeat(q, 0), axis=1)
    return np.where(np.isfinite(scores), ranks, FULL)


def rankings_of(data: Data, tops: Sequence[list[np.ndarray]]) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for split, per_query in zip(data.splits, tops, strict=True):
        for qid, columns in zip(split.query_ids, per_query, strict=True):
            out[qid] = tuple(split.doc_ids[i] for i in columns)
    return out


def metrics(result: Mapping[str, Any]) -> dict[str, Any]:
    out = {key: result[key] for key in ("hit@5", "hit@10", "ndcg@10")}
    out["hit@1"] = result["hit@1"]
    out["mean"] = round((out["hit@5"] + out["hit@10"] + out["ndcg@10"]) / 3, 4)
    if "by_kind" in result:
        out["by_kind"] = result["by_kind"]
    return out


# ------------------------------------------------------------------------------ checks


class _Postings(lexical_topk.OneTermAtATime[int]):
    """A ``lexical_topk.PostingsSource`` over a :class:`LexicalIndex` (documents are
    column numbers; ids are zero-padded column numbers, so ties break by insertion)."""

    def __init__(self, index: LexicalIndex) -> None:
        self.index = index
        self.by_term = {t: dict(zip(d.tolist(), f.astype(int).tolist(), strict=True))
                        for t, (d, f) in index.postings.items()}

    async def statistics(self, terms: Sequence[str]) -> lexical_topk.Statistics[int]:
        return lexical_topk.Statistics(
            len(self.index.lengths), int(self.index.lengths.sum()),
            {t: len(self.by_term.get(t, ())) for t in terms})

    async def postings_of(self, term: str) -> Sequence[tuple[int, int, int]]:
        lengths = self.index.lengths
        return [(d, f, int(lengths[d])) for d, f in self.by_term.get(term, {}).items()]

    async def probe_of(self, term: str, docs: Sequence[int]) -> Mapping[int, int]:
        found = self.by_term.get(term, {})
        return {d: found[d] for d in docs if d in found}

    async def identify(self, docs: Sequence[int]) -> Mapping[int, str]:
        return {d: f"{d:09d}" for d in docs}


def check_provider_arithmetic(index: LexicalIndex, scores: np.ndarray, queries: int = 40
                              ) -> dict[str, int]:
    """Compare with ``bm25.document_score`` (every score of the first ``queries``) and
    with ``lexical_topk.top_k`` at limit 50 (ranking and scores); raise on a mismatch."""
    mean = bm25.average_length(len(index.lengths), int(index.lengths.sum()))
    checked = 0
    for row, terms in enumerate(index.query_terms[:queries]):
        containing = {t: len(index.postings[t][0]) for t in terms if t in index.postings}
        weights = bm25.term_weights(len(index.lengths), containing, terms)
        for doc, count in enumerate(index.counts):
            ref = bm25.document_score(count, int(index.lengths[doc]), terms, weights, mean)
            mine = scores[row, doc]
            if (ref is None) != (not np.isfinite(mine)) or (ref is not None and ref != mine):
                raise AssertionError(f"BM25 mismatch at query {row} doc {doc}: {ref} {mine}")
            checked += 1
    source = _Postings(index)
    tops = top_indices(scores, 50)
    ranked = 0
    for row, terms in enumerate(index.query_terms[:queries]):
        found = asyncio.run(lexical_topk.top_k(source, terms, 50))
        mine = [(int(c), float(scores[row, c])) for c in tops[row]]
        if [(d, s) for d, s in found.ranked] != mine:
            raise AssertionError(f"top_k mismatch at query {row}")
        ranked += 1
    return {"scores_checked": checked, "topk_queries_checked": ranked}


# --------------------------------------------------------------------------- embeddings


def _cache_key(identity: str, texts: Sequence[str]) -> str:
    digest = hashlib.sha256(identity.encode())
    for text in texts:
        digest.update(b"\x00" + text.encode())
    return digest.hexdigest()[:24]


class Vectors:
    """Unit float32 vectors per embedder, cached on disk by (identity, texts)."""

    def __init__(self, cache: Path | None) -> None:
        from governed_memory.plugins import PluginManager

        self.cache = cache
        self.plugins = PluginManager.load()
        self.embedders: dict[str, Any] = {}
        self.identities: dict[str, str] = {}
        self.rates: dict[str, list[float]] = {}

    def _embedder(self, name: str) -> Any:
        if name not in self.embedders:
            self.embedders[name] = self.plugins.embedders.get(name).factory({})
            self.identities[name] = str(self.embedders[name].identity)
        return self.embedders[name]

    def get(self, name: str, texts: Sequence[str]) -> np.ndarray:
        embedder = self._embedder(name)
        path = None
        if self.cache is not None:
            path = self.cache / f"{name}-{_cache_key(self.identities[name], texts)}.npy"
            if path.is_file():
                return np.load(path)
        vectors_, rate = asyncio.run(recall.embed_all(embedder, texts))
        self.rates.setdefault(name, []).append(rate)
        array = np.asarray(vectors_, dtype=np.float64)
        # as vectors.encode: normalised again, stored as little-endian float32
        array = (array / np.linalg.norm(array, axis=1, keepdims=True)).astype(vectors.DTYPE)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, array)
        return array

    def close(self) -> None:
        for embedder in self.embedders.values():
            asyncio.run(embedder.close())


def cosine(queries: np.ndarray, docs: np.ndarray) -> np.ndarray:
    """Cosine of every (query, document) in float64 of the stored float32; ``-inf``
    where it is not positive (the provider drops those from the vector signal)."""
    scores = queries.astype(np.float64) @ docs.astype(np.float64).T
    return np.where(scores > 0, scores, -np.inf)


# ------------------------------------------------------------------------------ fusion


@dataclass
class Signals:
    """One split's full lexical and cosine rankings: raw scores and 1-based ranks."""

    lexical: np.ndarray
    lexical_ranks: np.ndarray
    vector: np.ndarray
    vector_ranks: np.ndarray


def pool_depth(pool: str | int) -> int:
    if pool == "rule":
        return retrieval.pool_size(LIMIT)
    if pool == "full":
        return FULL
    return int(pool)


def rrf(signals: Signals, w_lexical: float, w_vector: float, k: int, pool: int
        ) -> np.ndarray:
    """``retrieval.fuse``'s weighted RRF over pools of ``pool`` per signal; ``-inf`` for
    documents in neither pool."""
    in_l = signals.lexical_ranks <= pool
    in_v = signals.vector_ranks <= pool
    lexical = np.where(in_l, w_lexical / (k + signals.lexical_ranks), 0.0)
    vector = np.where(in_v, w_vector / (k + signals.vector_ranks), 0.0)
    return np.where(in_l | in_v, lexical + vector, -np.inf)


def _normalise(values: np.ndarray, member: np.ndarray, how: str) -> np.ndarray:
    """Per row, min-max or z-score over the pool members; non-members get the pool's
    lowest normalised value (0 for min-max)."""
    masked = np.where(member, values, np.nan)
    with np.errstate(all="ignore"):
        if how == "minmax":
            low = np.nanmin(masked, axis=1, keepdims=True)
            span = np.nanmax(masked, axis=1, keepdims=True) - low
            normal = np.where(span > 0, (masked - low) / span, 1.0)
            floor = np.zeros_like(low)
        else:
            mean = np.nanmean(masked, axis=1, keepdims=True)
            std = np.nanstd(masked, axis=1, keepdims=True)
            normal = np.where(std > 0, (masked - mean) / std, 0.0)
            floor = np.nanmin(normal, axis=1, keepdims=True)
    floor = np.nan_to_num(floor, nan=0.0)
    return np.where(member, np.nan_to_num(normal, nan=0.0), floor)


def combine(signals: Signals, alpha: float, pool: int, how: str) -> np.ndarray:
    in_l = signals.lexical_ranks <= pool
    in_v = signals.vector_ranks <= pool
    score = (alpha * _normalise(signals.lexical, in_l, how)
             + (1 - alpha) * _normalise(signals.vector, in_v, how))
    return np.where(in_l | in_v, score, -np.inf)


# ------------------------------------------------------------------------------- study


def robust(rows: list[dict[str, Any]], sets: Sequence[str], key: str = "mean") -> None:
    """Add ``robust`` (min over sets of value / best value there) and ``rank`` to rows."""
    best = {s: max((r["sets"][s][key] for r in rows if s in r["sets"]), default=0.0)
            for s in sets}
    for row in rows:
        ratios = [row["sets"][s][key] / best[s] if best[s] else 0.0 for s in sets]
        row["robust"] = round(min(ratios), 4)
        row["robust_mean"] = round(sum(ratios) / len(ratios), 4)
    order = sorted(range(len(rows)), key=lambda i: (-rows[i]["robust"],
                                                    -rows[i]["robust_mean"]))
    for rank, i in enumerate(order, start=1):
        rows[i]["rank"] = rank


def lexical_study(datasets: Sequence[Data], log: Callable[[str], None]
                  ) -> tuple[list[dict[str, Any]], dict[str, Any], dict[tuple[str, str], Any]]:
    rows: dict[tuple[str, float, float], dict[str, Any]] = {}
    checks: dict[str, Any] = {}
    indexes: dict[tuple[str, str], list[LexicalIndex]] = {}
    for data in datasets:
        for analyzer in ANALYZERS:
            started = time.perf_counter()
            built = [LexicalIndex.build(split, analyzer) for split in data.splits]
            indexes[(data.name, analyzer.name)] = built
            for k1 in K1S:
                for b in BS:
                    scores = [index.scores(k1, b) for index in built]
                    if analyzer is BASE and (k1, b) == (bm25.K1, bm25.B):
                        checks[data.name] = check_provider_arithmetic(built[0], scores[0])
                    result = data.evaluate(rankings_of(data, [top_indices(s)
                                                              for s in scores]))
                    row = rows.setdefault((analyzer.name, k1, b), {
                        "analyzer": analyzer.name, "k1": k1, "b": b, "sets": {}})
                    row["sets"][data.name] = metrics(result)
            log(f"  lexical {data.name} {analyzer.name}: "
                f"{time.perf_counter() - started:.1f} s")
    out = list(rows.values())
    robust(out, [d.name for d in datasets])
    return out, checks, indexes


def fusion_study(datasets: Sequence[Data], store: Vectors, embedders: Sequence[str],
                 lexical_configs: Mapping[str, tuple[str, float, float]],
                 indexes: Mapping[tuple[str, str], list[LexicalIndex]],
                 log: Callable[[str], None], quick: bool) -> list[dict[str, Any]]:
    rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    for data in datasets:
        variants = [(name, "memory") for name in embedders]
        if "minilm" in embedders and "bare" in data.splits[0].texts:
            variants.append(("minilm", "bare"))
        for label, (analyzer, k1, b) in lexical_configs.items():
            lexical = [index.scores(k1, b) for index in indexes[(data.name, analyzer)]]
            lexical_ranks = [full_ranks(s) for s in lexical]
            for embedder, variant in variants:
                started = time.perf_counter()
                vector_name = embedder if variant == "memory" else f"{embedder}, no speaker"
                signals = []
                for split, lex, lex_ranks in zip(data.splits, lexical, lexical_ranks,
                                                 strict=True):
                    docs = store.get(embedder, split.texts[variant])
                    queries = store.get(embedder, split.queries)
                    cos = cosine(queries, docs)
                    signals.append(Signals(lex, lex_ranks, cos, full_ranks(cos)))

                def record(key: tuple[Any, ...], fields: dict[str, Any],
                           score: Callable[[Signals], np.ndarray],
                           data: Data = data, signals: list[Signals] = signals) -> None:
                    result = data.evaluate(rankings_of(
                        data, [top_indices(score(s)) for s in signals]))
                    row = rows.setdefault(key, {**fields, "sets": {}})
                    row["sets"][data.name] = metrics(result)

                base = {"lexical": label, "vector": vector_name}
                for w_l, w_v in WEIGHTS:
                    if w_v == 0 or w_l == 0:
                        pure = "lexical" if w_v == 0 else "vector"
                        record((label, vector_name, "rrf", w_l, w_v, None, None),
                               {**base, "method": pure, "w_lexical": w_l, "w_vector": w_v,
                                "rrf_k": None, "pool": None},
                               (lambda s: s.lexical) if w_v == 0 else (lambda s: s.vector))
                        continue
                    for k in (RRF_KS if not quick else (10, 60)):
                        for pool in POOLS:
                            depth = pool_depth(pool)
                            record((label, vector_name, "rrf", w_l, w_v, k, pool),
                                   {**base, "method": "rrf", "w_lexical": w_l,
                                    "w_vector": w_v, "rrf_k": k, "pool": pool},
                                   lambda s, w_l=w_l, w_v=w_v, k=k, depth=depth:
                                   rrf(s, w_l, w_v, k, depth))
                for how in ("minmax", "zscore"):
                    for alpha in ALPHAS:
                        for pool in ("rule", "full"):
                            depth = pool_depth(pool)
                            record((label, vector_name, how, alpha, pool),
                                   {**base, "method": how, "alpha": alpha, "pool": pool},
                                   lambda s, alpha=alpha, depth=depth, how=how:
                                   combine(s, alpha, depth, how))
                log(f"  fusion {data.name} {label} {vector_name}: "
                    f"{time.perf_counter() - started:.1f} s")
    out = list(rows.values())
    names = [d.name for d in datasets]
    for lexical in lexical_configs:
        for vector_name in {r["vector"] for r in out}:
            group = [r for r in out if r["lexical"] == lexical and r["vector"] == vector_name]
            sets = [s for s in names if all(s in r["sets"] for r in group)]
            if group and sets:
                robust(group, sets)
    return out


# ------------------------------------------------------------------------------- costs


def stemmer_costs(datasets: Sequence[Data]) -> dict[str, Any]:
    """Agreement of PyStemmer and pure-Python snowballstemmer on every word of the
    data, and each one's time per 1,000 words of running text."""
    import Stemmer
    from snowballstemmer.english_stemmer import EnglishStemmer

    stream: list[str] = []
    for data in datasets:
        for split in data.splits:
            for text in split.texts["memory"] + split.queries:
                stream.extend(plain_words(text))
    vocabulary = sorted(set(stream))
    fast = Stemmer.Stemmer("english")
    uncached = Stemmer.Stemmer("english", 0)
    pure = EnglishStemmer()
    a, b = fast.stemWords(vocabulary), pure.stemWords(vocabulary)
    differ = [(w, x, y) for w, x, y in zip(vocabulary, a, b, strict=True) if x != y]
    sample = stream[:200_000]
    texts = [t for d in datasets for s in d.splits for t in s.texts["memory"]][:3000]
    text_words = sum(len(tokens.words(t)) for t in texts)

    def per_1k(work: Callable[[], object], words: int, repeat: int = 3) -> float:
        best = float("inf")
        for _ in range(repeat):
            start = time.perf_counter()
            work()
            best = min(best, time.perf_counter() - start)
        return round(best / words * 1000 * 1000, 4)  # ms per 1,000 words

    return {
        "vocabulary": len(vocabulary), "disagreements": len(differ),
        "disagreement_examples": differ[:10], "words_timed": len(sample),
        "ms_per_1k_words": {
            "tokens.words (the provider's tokenizer, for scale)":
                per_1k(lambda: [tokens.words(t) for t in texts], text_words),
            "PyStemmer stemWords (cache on, default)":
                per_1k(lambda: fast.stemWords(sample), len(sample)),
            "PyStemmer stemWords (cache off)":
                per_1k(lambda: uncached.stemWords(sample), len(sample)),
            "PyStemmer stemWord per word (cache on)":
                per_1k(lambda: [fast.stemWord(w) for w in sample], len(sample)),
            "snowballstemmer pure Python stemWords":
                per_1k(lambda: pure.stemWords(sample), len(sample), repeat=1),
        },
    }


def pool_costs(data: Data, store: Vectors | None, embedder: str | None,
               queries: int) -> dict[str, Any]:
    """Mean milliseconds per query of the provider's own functions at each pool depth:
    ``lexical_topk.top_k`` (in-memory postings), ``vectors.cosine_ranking`` and
    ``retrieval.fuse`` (no storage or record loading: those add per candidate)."""
    from governed_memory.indexing import RankingConfig

    split = max(data.splits, key=lambda s: len(s.doc_ids))
    index = LexicalIndex.build(split, BASE)
    source = _Postings(index)
    terms = index.query_terms[:queries]
    blobs: list[tuple[str, bytes]] = []
    query_blobs: list[bytes] = []
    dimension = 0
    if store is not None and embedder is not None:
        docs = store.get(embedder, split.texts["memory"])
        query_vectors = store.get(embedder, split.queries[:queries])
        dimension = docs.shape[1]
        blobs = [(f"{i:09d}", row.tobytes()) for i, row in enumerate(docs)]
        query_blobs = [row.tobytes() for row in query_vectors]
    config = RankingConfig(modes=("lexical", "vector"))
    out: dict[str, Any] = {"data": data.name, "documents": len(split.doc_ids),
                           "queries": len(terms), "ms_per_query": {}}
    for pool in POOLS:
        depth = min(pool_depth(pool), len(split.doc_ids))
        lexical_ms = vector_ms = fuse_ms = 0.0
        async def lexical_all(depth: int = depth) -> tuple[list[Any], float]:
            found, seconds = [], 0.0
            for query_terms in terms:
                start = time.perf_counter()
                found.append(await lexical_topk.top_k(source, query_terms, depth))
                seconds += time.perf_counter() - start
            return found, seconds

        pages, lexical_ms = asyncio.run(lexical_all())
        for row, page in enumerate(pages):
            lexical = [(f"{d:09d}", s) for d, s in page.ranked]
            vector: list[tuple[str, float]] = []
            if blobs:
                start = time.perf_counter()
                ranked = vectors.cosine_ranking(query_blobs[row], blobs, dimension, depth)
                vector_ms += time.perf_counter() - start
                vector = [(i, s) for i, s in ranked if s > 0]
            start = time.perf_counter()
            retrieval.fuse(config, lexical=lexical, vector=vector, records={}, now=0.0,
                           limit=LIMIT)
            fuse_ms += time.perf_counter() - start
        n = max(len(terms), 1)
        out["ms_per_query"][str(pool)] = {
            "depth": depth, "lexical_top_k": round(lexical_ms / n * 1000, 3),
            "cosine_ranking": round(vector_ms / n * 1000, 3) if blobs else None,
            "fuse": round(fuse_ms / n * 1000, 3)}
    return out


# ------------------------------------------------------------------------ verification

_GOVERNED = {"lexical (BM25)": ("lexical", 1.0, 0.0, None, None),
             "vector (cosine)": ("vector", 0.0, 1.0, None, None),
             recall.HYBRID_LABEL: ("rrf", 1.0, 1.0, recall.RRF_K, "rule"),
             "hybrid, lexical 2 : vector 1": ("rrf", 2.0, 1.0, recall.RRF_K, "rule")}
"""``recall.py``'s governed rows and the offline row that must equal each: its vector
and hybrid searches ask for ``recall.SEARCH_LIMIT`` (10), so their pools are
``retrieval.pool_size(10)`` = 50 per signal (the "rule" pools at limit 10)."""


def verify(datasets: Sequence[Data], fusion: Sequence[Mapping[str, Any]],
           path: Path = RESULTS / "recall.json") -> list[dict[str, Any]]:
    """This study's provider rows beside the governed rows of ``recall.json`` for the
    same data (conversations by fingerprint; Wikipedia by source file and sizes)."""
    if not path.is_file():
        return []
    report = json.loads(path.read_text())
    assert retrieval.pool_size(recall.SEARCH_LIMIT) == 50
    sources = [(report["meta"]["data"], [r for r in report["results"]
                                         if r.get("path") == "governed"])]
    if "wiki" in report:
        sources.append((report["wiki"]["data"], report["wiki"]["results"]))
    out = []
    for described, rows in sources:
        same = [d for d in datasets if d.describe.get("sha256") == described.get("sha256")
                or ("file_sha256" in d.describe
                    and d.describe["file_sha256"] == described.get("file_sha256")
                    and all(d.describe.get(k) == described.get(k)
                            for k in ("articles", "passages", "queries")))]
        if not same:
            continue
        data = same[0]
        for row in rows:
            method, w_l, w_v, k, pool = _GOVERNED[row["method"]]
            embedder = "hashing" if row["embedder"] == "-" else row["embedder"]
            # the provider's analyzer since v13 is the recommended one (see main)
            mine = next((r for r in fusion if r["lexical"] == "recommended"
                         and r["vector"] == embedder and r["method"] == method
                         and r.get("w_lexical") == w_l and r.get("w_vector") == w_v
                         and r.get("rrf_k") == k and r.get("pool") == pool
                         and data.name in r["sets"]), None)
            if mine is None:
                continue
            theirs = {key: row[key] for key in ("hit@1", "hit@5", "hit@10", "ndcg@10")}
            ours = {key: mine["sets"][data.name][key] for key in theirs}
            out.append({"data": data.name, "governed": f"{row['method']} ({row['embedder']})",
                        "governed_values": theirs, "offline_values": ours,
                        "equal": theirs == ours})
    return out


# --------------------------------------------------------------------------------- run


def _load() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def _versions() -> dict[str, str]:
    out = {}
    for name in ("governed-memory", "numpy", "PyStemmer", "snowballstemmer", "onnxruntime",
                 "tokenizers", "gensim"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).parent, check=False).stdout.strip()
    except OSError:
        return ""


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    load_start = _load()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.1f} s] {message}", file=sys.stderr,
              flush=True)

    if args.quick:
        datasets = [conversations(args.seed, 2, 150), wiki(3)]
    else:
        datasets = [conversations(args.seed, 4, 600), conversations(args.seed, 10, 600),
                    wiki(recall.WIKI_ARTICLES), wiki(None)]
    log("data: " + ", ".join(d.name for d in datasets))
    provider = ANALYZERS_BY_NAME[RECOMMENDED["analyzer"]]
    differ = sum(provider(text) != tokens.words(text) for data in datasets
                 for split in data.splits for text in split.texts["memory"] + split.queries)
    if differ:
        raise AssertionError(f"tokens.words differs from {provider.name!r} on {differ} texts")
    lexical_rows, checks, indexes = lexical_study(datasets, log)
    best_lexical = min(lexical_rows, key=lambda r: r["rank"])
    lexical_configs = {
        "provider": (BASE.name, bm25.K1, bm25.B),
        "recommended": (RECOMMENDED["analyzer"], RECOMMENDED["k1"], RECOMMENDED["b"]),
    }
    store = Vectors(None if args.no_cache else args.cache)
    try:
        fusion_rows = fusion_study(datasets, store, args.embedders, lexical_configs,
                                   indexes, log, args.quick)
        log("costs")
        stemming = stemmer_costs(datasets)
        biggest = max(datasets, key=lambda d: max(len(s.doc_ids) for s in d.splits))
        embedder = "minilm" if "minilm" in args.embedders else (
            args.embedders[0] if args.embedders else None)
        pools = [pool_costs(biggest, store, embedder, 50 if args.quick else 300)]
        conv = datasets[1] if not args.quick else datasets[0]
        pools.append(pool_costs(conv, store, embedder, 50 if args.quick else 300))
    finally:
        store.close()
    meta = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "commit": _commit(), "versions": _versions(), "embedders": store.identities,
        "embed_texts_per_s": {k: round(sum(v) / len(v), 1) for k, v in store.rates.items()},
        "python": sys.version.split()[0], "machine": platform.machine(),
        "cpus": os.cpu_count(), "limit": LIMIT, "pool_rule": retrieval.pool_size(LIMIT),
        "load_average": {"start": load_start, "end": _load()},
        "seconds": round(time.perf_counter() - started, 1),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "stopwords": {"snowball": sorted(SNOWBALL_STOP), "lucene": sorted(LUCENE_STOP)},
    }
    return {"meta": meta, "data": {d.name: d.describe for d in datasets},
            "provider_checks": checks, "lexical": lexical_rows,
            "lexical_configs": lexical_configs,
            "lexical_robust_best": {k: best_lexical[k] for k in ("analyzer", "k1", "b")},
            "fusion": fusion_rows, "verification": verify(datasets, fusion_rows),
            "costs": {"stemming": stemming, "pools": pools}}


# ---------------------------------------------------------------------------- markdown


def _cells(row: Mapping[str, Any], sets: Sequence[str], best: Mapping[str, float]
           ) -> str:
    cells = []
    for s in sets:
        m = row["sets"].get(s)
        if m is None:
            cells.append("- | - | -")
            continue
        values = []
        for key in ("hit@5", "hit@10", "ndcg@10"):
            text = f"{m[key]:.3f}"
            values.append(f"**{text}**" if m[key] >= best[(s, key)] - 1e-9 else text)
        cells.append(" | ".join(values))
    return " | ".join(cells)


def _table(rows: Sequence[Mapping[str, Any]], sets: Sequence[str],
           label: Callable[[Mapping[str, Any]], str], header: str,
           best_of: Sequence[Mapping[str, Any]] | None = None) -> list[str]:
    pool = best_of if best_of is not None else rows
    best = {(s, key): max(r["sets"][s][key] for r in pool if s in r["sets"])
            for s in sets for key in ("hit@5", "hit@10", "ndcg@10")}
    lines = [f"| {header} | " + " | ".join(f"{s} h@5 | h@10 | nDCG" for s in sets)
             + " | robust |",
             "|---|" + "---:|" * (3 * len(sets) + 1)]
    for row in rows:
        lines.append(f"| {label(row)} | {_cells(row, sets, best)} | {row['robust']:.3f} |")
    return lines


def _weights(row: Mapping[str, Any]) -> str:
    return f"{row['w_lexical']:g}:{row['w_vector']:g}"


def _fusion_label(row: Mapping[str, Any]) -> str:
    if row["method"] in ("lexical", "vector"):
        return f"{row['method']} only"
    if row["method"] == "rrf":
        return f"RRF {_weights(row)} k={row['rrf_k']} pool={row['pool']}"
    return f"{row['method']} alpha={row['alpha']} pool={row['pool']}"


def markdown(report: Mapping[str, Any]) -> str:
    meta = report["meta"]
    sets = list(report["data"])
    lexical = report["lexical"]
    lines = [
        "# Retrieval analysis (issue 18): analyzer, BM25 constants, fusion",
        "",
        f"`{meta['command']}` at commit `{meta['commit'][:12]}`, {meta['when']}; Python "
        f"{meta['python']}, {meta['cpus']} CPUs, load average {meta['load_average']['start']}"
        f" at the start and {meta['load_average']['end']} at the end; took "
        f"{meta['seconds']} s. Versions: " + ", ".join(
            f"{k} {v}" for k, v in meta["versions"].items()) + ".",
        "",
        "Offline: the provider's tokenizer and BM25 arithmetic (checked equal to "
        "`bm25.document_score` and `lexical_topk.top_k`: " + ", ".join(
            f"{k}: {v['scores_checked']} scores, {v['topk_queries_checked']} top-50 lists"
            for k, v in report["provider_checks"].items()) + "), brute-force cosine "
        "over the embedders' unit float32 vectors, and `retrieval.fuse`'s weighted RRF "
        f"(ties by insertion order = record id). Pages of {meta['limit']} (a profile's "
        f"`top_k`), so the current pool rule is {meta['pool_rule']} per signal. Each "
        "cell: hit@5 | hit@10 | nDCG@10; **bold** = best of the table on that set; "
        "robust = min over the sets of mean(hit@5, hit@10, nDCG@10) / the best mean of "
        "the study there (1 = best everywhere).",
        "",
        "## Data",
        "",
    ]
    for name, d in report["data"].items():
        if "conversations" in d:
            lines.append(f"- `{name}`: {d['conversations']} generated conversations, "
                         f"{d['turns']} turns stored as `\"<speaker>: <text>\"` (one scope "
                         f"each), {d['questions']} questions; `{d['generator']}` seed "
                         f"{d['seed']}, sha256 `{d['sha256'][:16]}`.")
        else:
            lines.append(f"- `{name}`: {d['articles']} Wikipedia articles, {d['passages']}"
                         f" passages (one scope), {d['queries']} section queries; "
                         f"`{d['generator']}`, content sha256 `{d['sha256'][:16]}` "
                         "(order-independent; `recall_wiki.fingerprint` varies with "
                         "PYTHONHASHSEED), source file sha256 "
                         f"`{d['file_sha256'][:16]}` from {d['package']}.")
    checks = report.get("verification", [])
    if checks:
        equal = sum(c["equal"] for c in checks)
        lines += ["", f"**Baseline check against `bench/results/recall.json`** (governed "
                  f"rows, `GovernedMemoryManager`): {equal} of {len(checks)} rows equal "
                  "this study's offline rows in hit@1, hit@5, hit@10 and nDCG@10 to 4 "
                  "places (its hybrid rows searched with limit 100, so pools of 500)."]
        for c in checks:
            if not c["equal"]:
                lines.append(f"- differs: {c['data']} {c['governed']}: governed "
                             f"{c['governed_values']}, offline {c['offline_values']}")
    lines += _recommendation(report, sets)
    lines += _findings(report, sets)
    lines += ["", "## 1. Analyzer (k1 = 1.2, b = 0.75)", ""]
    default_rows = [r for r in lexical if (r["k1"], r["b"]) == (bm25.K1, bm25.B)]
    lines += _table(default_rows, sets, lambda r: r["analyzer"], "analyzer")
    conv_sets = [s for s in sets if "by_kind" in default_rows[0]["sets"].get(s, {})]
    if conv_sets:
        s = conv_sets[-1]
        kinds = sorted(default_rows[0]["sets"][s]["by_kind"])
        lines += ["", f"Per question kind on `{s}` (hit@10):", "",
                  "| analyzer | " + " | ".join(kinds) + " |",
                  "|---|" + "---:|" * len(kinds)]
        for r in default_rows:
            lines.append(f"| {r['analyzer']} | " + " | ".join(
                f"{r['sets'][s]['by_kind'][k]['hit@10']:.3f}" for k in kinds) + " |")
    lines += ["", "## 2. BM25 k1 x b", "",
              "Best 12 (analyzer, k1, b) by robust score, then the provider's words at "
              "every k1 x b:", ""]
    ranked = sorted(lexical, key=lambda r: r["rank"])
    lines += _table(ranked[:12], sets, lambda r: f"{r['analyzer']}, k1={r['k1']}, "
                    f"b={r['b']}", "analyzer, k1, b", best_of=lexical)
    lines.append("")
    base_rows = [r for r in lexical if r["analyzer"] == BASE.name]
    lines += _table(base_rows, sets, lambda r: f"words, k1={r['k1']}, b={r['b']}",
                    "k1, b", best_of=lexical)
    best = report["lexical_robust_best"]
    lines += ["", f"Robust best lexical: **{best['analyzer']}, k1 = {best['k1']}, b = "
              f"{best['b']}**.", ""]
    fusion = report["fusion"]
    lines += ["## 3. Fusion", ""]
    for lexical_label in report["lexical_configs"]:
        for vector_name in sorted({r["vector"] for r in fusion}):
            group = [r for r in fusion if r["lexical"] == lexical_label
                     and r["vector"] == vector_name]
            if not group:
                continue
            group_sets = [s for s in sets if all(s in r["sets"] for r in group)]
            lines += [f"### lexical = {lexical_label}, vector = {vector_name}", ""]
            picks = sorted(group, key=lambda r: r["rank"])[:8]
            fixed = [r for r in group if r["method"] in ("lexical", "vector")
                     or (r["method"] == "rrf" and r["rrf_k"] == 60 and r["pool"] == "rule"
                         and r["w_lexical"] in (1.0, 2.0) and r["w_vector"] == 1.0)]
            shown = list({id(r): r for r in [*fixed, *picks]}.values())
            lines += _table(shown, group_sets, _fusion_label, "fusion", best_of=group)
            lines.append("")
            lines += _rrf_grid(group, group_sets)
            lines.append("")
    lines += ["## 4. Costs", ""]
    stem = report["costs"]["stemming"]
    lines += [f"Stemmers on the data's {stem['vocabulary']} distinct words: PyStemmer and "
              f"pure-Python snowballstemmer disagree on {stem['disagreements']}. Time per "
              f"1,000 words (best of 3 over {stem['words_timed']} words of running text):",
              "", "| step | ms / 1k words |", "|---|---:|"]
    for name, value in stem["ms_per_1k_words"].items():
        lines.append(f"| {name} | {value} |")
    for costs in report["costs"]["pools"]:
        lines += ["", f"Per-signal pool depth on `{costs['data']}` ({costs['documents']} "
                  f"documents in the scope, {costs['queries']} queries), mean ms per query "
                  "of the provider's functions (no storage I/O):", "",
                  "| pool | depth | lexical_topk.top_k | cosine_ranking | fuse |",
                  "|---|---:|---:|---:|---:|"]
        for pool, c in costs["ms_per_query"].items():
            lines.append(f"| {pool} | {c['depth']} | {c['lexical_top_k']} | "
                         f"{c['cosine_ranking']} | {c['fuse']} |")
    lines += ["", "Reproduce: `pip install -e '.[bench,embeddings]' PyStemmer "
              "snowballstemmer`, then `python bench/analysis.py` (`--quick` for a smoke "
              "run; embeddings are cached under /tmp/governed-memory-analysis)."]
    return "\n".join(lines) + "\n"


def _find(rows: Sequence[Mapping[str, Any]], **wanted: Any) -> Mapping[str, Any] | None:
    return next((r for r in rows if all(r.get(k) == v for k, v in wanted.items())), None)


def _recommendation(report: Mapping[str, Any], sets: Sequence[str]) -> list[str]:
    """Current defaults, the recommended ones, each change alone, the held-out set's
    best weighting and the best of the grid, per vector signal."""
    fusion = report["fusion"]
    rec = RECOMMENDED
    lines = ["", "## Recommendation", "",
             f"Recommended: analyzer **{rec['analyzer']}** (Snowball English, no "
             f"stopwords), **k1 = {rec['k1']}, b = {rec['b']}**, weighted RRF **lexical "
             f"{rec['w_lexical']:g} : vector {rec['w_vector']:g}, rrf_k = {rec['rrf_k']}**, "
             f"pools by the **current rule** ({report['meta']['pool_rule']} per signal at "
             f"limit {LIMIT}). `vs best` = min over the sets of mean(hit@5, hit@10, "
             "nDCG@10) / the best mean of any fusion setting with that vector signal."]
    lines += _across_signals(fusion, sets)
    for vector in sorted({r["vector"] for r in fusion}):
        group = [r for r in fusion if r["vector"] == vector]
        group_sets = [s for s in sets if all(s in r["sets"] for r in group)]
        best = {s: max(r["sets"][s]["mean"] for r in group) for s in group_sets}

        def rrf_row(lexical: str, w_l: float, w_v: float, k: int,
                    group: list[dict[str, Any]] = group) -> Mapping[str, Any] | None:
            return _find(group, lexical=lexical, method="rrf", w_lexical=w_l,
                         w_vector=w_v, rrf_k=k, pool=rec["pool"])

        top = max(group, key=lambda r: min(r["sets"][s]["mean"] / best[s]
                                           for s in group_sets))
        shown = [
            ("current: words, 1:1, k=60", rrf_row("provider", 1.0, 1.0, 60)),
            ("**recommended**", rrf_row("recommended", rec["w_lexical"], rec["w_vector"],
                                        rec["rrf_k"])),
            ("analyzer only: recommended analyzer, 1:1, k=60",
             rrf_row("recommended", 1.0, 1.0, 60)),
            (f"rrf_k only: words, 1:1, k={rec['rrf_k']}",
             rrf_row("provider", 1.0, 1.0, rec["rrf_k"])),
            ("1:1, k=2", rrf_row("recommended", 1.0, 1.0, 2)),
            ("1:1, k=10", rrf_row("recommended", 1.0, 1.0, 10)),
            ("held-out's best weighting: 2:1, k=60", rrf_row("recommended", 2.0, 1.0, 60)),
            (f"2:1, k={rec['rrf_k']}", rrf_row("recommended", 2.0, 1.0, rec["rrf_k"])),
            (f"1:2, k={rec['rrf_k']}", rrf_row("recommended", 1.0, 2.0, rec["rrf_k"])),
            (f"best of the grid: {top['lexical']} lexical, {_fusion_label(top)}", top),
            ("lexical only (recommended analyzer)",
             _find(group, lexical="recommended", method="lexical")),
            ("vector only", _find(group, lexical="provider", method="vector")),
        ]
        lines += ["", f"Vector signal **{vector}**:", "",
                  "| setting | " + " | ".join(f"{s} h@5 | h@10 | nDCG" for s in group_sets)
                  + " | vs best |", "|---|" + "---:|" * (3 * len(group_sets) + 1)]
        for label, row in shown:
            if row is None:
                continue
            cells = " | ".join(f"{row['sets'][s]['hit@5']:.3f} | {row['sets'][s]['hit@10']:.3f}"
                               f" | {row['sets'][s]['ndcg@10']:.3f}" for s in group_sets)
            ratio = min(row["sets"][s]["mean"] / best[s] for s in group_sets)
            lines.append(f"| {label} | {cells} | {ratio:.3f} |")
    return lines


def _setting(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return (row["lexical"], row["method"], row.get("w_lexical"), row.get("w_vector"),
            row.get("rrf_k"), row.get("alpha"), row.get("pool"))


def across_signals(fusion: Sequence[Mapping[str, Any]], sets: Sequence[str]
                   ) -> list[dict[str, Any]]:
    """Each fusion setting's worst and mean ratio to the best, over every (vector
    signal, data set): how it does whichever embedder (and text format) it meets."""
    best: dict[tuple[str, str], float] = {}
    for row in fusion:
        for s, m in row["sets"].items():
            best[(row["vector"], s)] = max(best.get((row["vector"], s), 0.0), m["mean"])
    ratios: dict[tuple[Any, ...], dict[tuple[str, str], float]] = {}
    rows: dict[tuple[Any, ...], Mapping[str, Any]] = {}
    for row in fusion:
        key = _setting(row)
        rows.setdefault(key, row)
        for s, m in row["sets"].items():
            if s in sets:
                ratios.setdefault(key, {})[(row["vector"], s)] = (
                    m["mean"] / best[(row["vector"], s)])
    complete = max(len(v) for v in ratios.values())
    out = [{"setting": _fusion_label(rows[k]), "lexical": k[0], "worst": round(min(v.values()), 4),
            "mean": round(sum(v.values()) / len(v), 4),
            "worst_at": "{} on {}".format(*min(v, key=v.__getitem__))}
           for k, v in ratios.items() if len(v) == complete]
    return sorted(out, key=lambda r: (-r["worst"], -r["mean"]))


def _across_signals(fusion: Sequence[Mapping[str, Any]], sets: Sequence[str]) -> list[str]:
    ranked = across_signals(fusion, sets)
    rec = RECOMMENDED
    wanted = {("recommended", f"RRF {rec['w_lexical']:g}:{rec['w_vector']:g} "
               f"k={rec['rrf_k']} pool={rec['pool']}"),
              ("provider", "RRF 1:1 k=60 pool=rule")}
    shown = [(i, r) for i, r in enumerate(ranked, start=1)
             if i <= 12 or (r["lexical"], r["setting"]) in wanted]
    lines = ["", "Every fusion setting over every (vector signal, data set) pair, best 12 "
             "by the worst ratio to that pair's best, plus the current and the recommended "
             "defaults (which embedder, and which text format, an application has is not "
             "known to a default):", "",
             "| # | lexical | setting | worst | mean | worst at |", "|---:|---|---|---:|---:|---|"]
    for i, r in shown:
        lines.append(f"| {i} | {r['lexical']} | {r['setting']} | {r['worst']:.3f} | "
                     f"{r['mean']:.3f} | {r['worst_at']} |")
    return lines


def _findings(report: Mapping[str, Any], sets: Sequence[str]) -> list[str]:
    """A few differences read off the tables (hit@10 per set, in set order)."""
    lexical, fusion = report["lexical"], report["fusion"]

    def lex(analyzer: str) -> Mapping[str, Any] | None:
        return _find(lexical, analyzer=analyzer, k1=bm25.K1, b=bm25.B)

    def delta(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> str:
        if a is None or b is None:
            return "n/a"
        return ", ".join(f"{s} {b['sets'][s]['hit@10'] - a['sets'][s]['hit@10']:+.3f}"
                         for s in sets if s in a["sets"] and s in b["sets"])

    base = lex(BASE.name)
    lines = ["", "## Findings (hit@10 differences, lexical only unless said)", ""]
    for name in ("stem", "possessive", "stop (Snowball list)", "stop (Lucene 33)",
                 "possessive + stem", "possessive + stem + stop"):
        lines.append(f"- {name} vs the provider's words: {delta(base, lex(name))}")
    for vector in ("minilm", "hashing"):
        rule = _find(fusion, lexical="provider", vector=vector, method="rrf", w_lexical=1.0,
                     w_vector=1.0, rrf_k=60, pool="rule")
        deep = _find(fusion, lexical="provider", vector=vector, method="rrf", w_lexical=1.0,
                     w_vector=1.0, rrf_k=60, pool=500)
        lines.append(f"- current hybrid ({vector}, 1:1, k=60), pools of 500 (what `recall.py`"
                     f" measures: it searches with limit 100) vs 50 (limit 10): "
                     f"{delta(rule, deep)}")
    return lines


def _rrf_grid(group: Sequence[Mapping[str, Any]], sets: Sequence[str]) -> list[str]:
    """hit@10 per (weights, rrf_k) at the rule pool and at the full ranking: the mean
    over the sets of hit@10, to show the shape of the surface."""
    lines = []
    for pool in ("rule", "full"):
        rows = [r for r in group if r["method"] == "rrf" and r["pool"] == pool]
        ks = sorted({r["rrf_k"] for r in rows})
        weights = sorted({(r["w_lexical"], r["w_vector"]) for r in rows},
                         key=lambda w: -w[0] / w[1])
        if not rows:
            continue
        lines += [f"Mean over {', '.join(sets)} of hit@10 / nDCG@10, RRF, pool = {pool}:",
                  "", "| weights | " + " | ".join(f"k={k}" for k in ks) + " |",
                  "|---|" + "---:|" * len(ks)]
        for w in weights:
            cells = []
            for k in ks:
                r = next(x for x in rows if (x["w_lexical"], x["w_vector"]) == w
                         and x["rrf_k"] == k)
                h = sum(r["sets"][s]["hit@10"] for s in sets) / len(sets)
                n = sum(r["sets"][s]["ndcg@10"] for s in sets) / len(sets)
                cells.append(f"{h:.3f} / {n:.3f}")
            lines.append(f"| {w[0]:g}:{w[1]:g} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


METRICS = ("hit@1", "hit@5", "hit@10", "ndcg@10", "mean")


def to_json(report: Mapping[str, Any]) -> str:
    """The report as JSON, one study row a line; fusion rows keep their metrics as
    lists in ``fusion_metrics`` order (the per-kind figures are in the lexical rows)."""
    fusion = [{**row, "sets": {s: [m[k] for k in METRICS] for s, m in row["sets"].items()}}
              for row in report["fusion"]]
    parts = []
    for key, value in {**report, "fusion_metrics": list(METRICS), "fusion": fusion}.items():
        if key in ("lexical", "fusion"):
            body = "[\n" + ",\n".join(json.dumps(row, separators=(",", ":"))
                                       for row in value) + "\n]"
        else:
            body = json.dumps(value, indent=1)
        parts.append(f"{json.dumps(key)}: {body}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--embedders", default="hashing,minilm",
                        type=lambda v: [n.strip() for n in v.split(",") if n.strip()])
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("--cache", type=Path, default=CACHE,
                        help=f"embedding cache directory (default {CACHE})")
    parser.add_argument("--no-cache", action="store_true")
    parser.add_argument("--quick", action="store_true",
                        help="tiny data and a reduced grid; writes nothing unless --out")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"where analysis.json and analysis.md go (default {RESULTS})")
    args = parser.parse_args()
    report = run(args)
    text = markdown(report)
    out = args.out if args.out is not None else (None if args.quick else RESULTS)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "analysis.json").write_text(to_json(report))
        (out / "analysis.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
