"""Retrieval recall on two data sets: generated long conversations, and a public set of
Wikipedia sections. hit@1/5/10 and nDCG@10 for lexical, vector and hybrid search, per
embedder, and the batch ingest rate.

**Generated conversations** (``recall_data.py``, seeded, no downloads): every turn of
every conversation is stored as a memory ``"<speaker>: <text>"`` in its own scope, and
each question is searched in its conversation's scope; a question is a hit at k when one
of its evidence turns is among the first k results (nDCG@10 with the evidence turns as
the relevant ones).

**Wikipedia sections** (``recall_wiki.py``): the English Wikipedia excerpt that the
gensim wheel carries (CC BY-SA 3.0 text; ``pip install -e '.[bench]'``), one memory per
paragraph in one scope, one query per section ("<title> <heading path>"), judged as
TREC CAR judges: grade 2 for the passages under the heading, 1 for the article's others.
``--wiki-articles`` bounds it (0 = all 94 articles).

Both are stored with ``GovernedMemoryManager.add_many`` (concurrency 32), and the rate
of that ingest is reported. Two paths measure the rankings:

- **governed**: ``GovernedMemoryManager`` over the native provider, so the figures are
  what an application gets. Lexical search is the native provider's BM25 (a manager
  without an embedder). Per embedder, one manager runs under a profile that names it
  (``[stores.embedder]``), embeds on write (``[indexing] mode = "sync"``) and has both
  modes; its vector and hybrid rows are the same index searched with per-search ranking
  options (``RankingOptions``: vector only; the default equal weights; lexical 2 :
  vector 1). A provider that cannot do this says why and those rows are absent.
- **baseline** (conversations only, clearly labelled): the governed lexical ranking, a
  brute-force cosine ranking over the embedder's vectors, and reciprocal-rank fusion
  (the provider's default rrf_k) of the two; a yardstick for the provider's own cosine and fusion.

Writes ``bench/results/recall.json`` and ``recall.md`` (``--quick`` writes nothing
unless ``--out`` is given).

    python bench/recall.py [--embedders hashing,minilm] [--seed 20261130]
                           [--conversations 4] [--turns 600] [--backend sqlite|memory]
                           [--wiki-articles 40 | --no-wiki] [--quick] [--out DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from recall_data import Conversation, DataSet, Question, fingerprint, generate

RESULTS = Path(__file__).parent / "results"
KS = (1, 5, 10)
NDCG_K = 10
DEPTH = 100
"""How deep the lexical ranking and the baseline's rankings go (exact at any depth: the
baseline fuses these with the provider's default rrf_k)."""
SEARCH_LIMIT = max(*KS, NDCG_K)
"""The page a vector or hybrid search asks for: the deepest k scored, as an application
asking for its top 10 would (the provider's candidate pools follow the limit:
``max(5 x limit, 50)`` per signal)."""
TENANT = "bench"
INGEST_CONCURRENCY = 32
WIKI_ARTICLES = 40
"""The default subset of the Wikipedia set: 40 of its 94 articles (2,167 passages, 749
queries) keep a MiniLM run within minutes on two cores; 0 takes them all."""

Ranking = tuple[str, ...]
"""Memory ids of the data set (turn or passage ids), best first."""


def _rrf_k() -> int:
    from governed_memory.indexing import RankingConfig

    return RankingConfig().rrf_k


RRF_K = _rrf_k()
"""The provider's default reciprocal-rank constant, which the baseline uses too."""
HYBRID_LABEL = f"hybrid (RRF k={RRF_K})"
GOVERNED_LABELS = {"vector": "vector (cosine)", "hybrid": HYBRID_LABEL,
                   "hybrid-lexical-2": "hybrid, lexical 2 : vector 1"}


# ------------------------------------------------------------------------------ scoring

def hit_at(ranking: Sequence[str], evidence: Iterable[str], k: int) -> bool:
    wanted = set(evidence)
    return any(turn_id in wanted for turn_id in ranking[:k])


def ndcg_at(ranking: Sequence[str], grades: Mapping[str, int], k: int = NDCG_K) -> float:
    """nDCG@k with gain ``2**grade - 1`` and the ideal ordering of every judged item."""
    def dcg(gains: Iterable[int]) -> float:
        return sum((2 ** g - 1) / math.log2(rank + 1)
                   for rank, g in enumerate(gains, start=1))

    ideal = dcg(sorted((g for g in grades.values() if g > 0), reverse=True)[:k])
    if ideal == 0:
        return 0.0
    return dcg(grades.get(item, 0) for item in ranking[:k]) / ideal


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> Ranking:
    """Sum of ``1 / (k + rank)`` over the rankings an id appears in (rank from 1); ties
    break by the best single rank, then by id, so the fusion is deterministic."""
    scores: dict[str, float] = {}
    best: dict[str, int] = {}
    for ranking in rankings:
        for rank, turn_id in enumerate(ranking, start=1):
            scores[turn_id] = scores.get(turn_id, 0.0) + 1.0 / (k + rank)
            best[turn_id] = min(best.get(turn_id, rank), rank)
    return tuple(sorted(scores, key=lambda t: (-scores[t], best[t], t)))


def cosine_rankings(query_vectors: Sequence[Sequence[float]],
                    doc_vectors: Sequence[Sequence[float]], doc_ids: Sequence[str],
                    depth: int = DEPTH) -> list[Ranking]:
    """Exact nearest neighbours by dot product (vectors are unit length); ties keep
    document order."""
    import numpy as np

    docs = np.asarray(doc_vectors, dtype=np.float64)
    queries = np.asarray(query_vectors, dtype=np.float64)
    if docs.size == 0 or queries.size == 0:
        return [() for _ in query_vectors]
    scores = queries @ docs.T
    rankings = []
    for row in scores:
        order = np.argsort(-row, kind="stable")[:depth]
        rankings.append(tuple(doc_ids[i] for i in order))
    return rankings


def _rates(judged: Sequence[tuple[Sequence[str], Mapping[str, int]]],
           relevant: int) -> dict[str, float]:
    """hit@k (an item of grade >= ``relevant`` in the first k) and nDCG@10, averaged."""
    n = len(judged)
    out = {f"hit@{k}": round(sum(
        any(grades.get(item, 0) >= relevant for item in ranking[:k])
        for ranking, grades in judged) / n, 4) for k in KS}
    out[f"ndcg@{NDCG_K}"] = round(sum(ndcg_at(ranking, grades)
                                      for ranking, grades in judged) / n, 4)
    return out


def summarise(questions: Sequence[Question], rankings: Mapping[str, Ranking]) -> dict[str, Any]:
    """hit@k and nDCG@10 (evidence turns relevant) over all questions and per kind."""
    def rates(subset: Sequence[Question]) -> dict[str, float]:
        return _rates([(rankings[q.question_id], dict.fromkeys(q.evidence, 1))
                       for q in subset], relevant=1)

    kinds = sorted({q.kind for q in questions})
    return {**rates(questions), "questions": len(questions),
            "by_kind": {kind: {**rates([q for q in questions if q.kind == kind]),
                               "questions": sum(q.kind == kind for q in questions)}
                        for kind in kinds}}


def summarise_graded(queries: Sequence[Any], rankings: Mapping[str, Ranking]
                     ) -> dict[str, Any]:
    """hit@k (a grade-2 passage in the first k) and graded nDCG@10."""
    return {**_rates([(rankings[q.query_id], q.relevance) for q in queries], relevant=2),
            "queries": len(queries)}


# ----------------------------------------------------------------------- governed search

def _scope(conversation: Conversation) -> Any:
    from governed_memory import Scope

    return Scope(TENANT, project_id="recall", user_id=conversation.conversation_id)


def _principal() -> Any:
    from governed_memory import Permission, Principal, PrincipalKind

    return Principal("svc:recall-bench", PrincipalKind.SERVICE, TENANT,
                     permissions=frozenset({Permission.READ, Permission.WRITE}))


class Ingest:
    """What the batch adds took: memories added, refused, and the wall time."""

    def __init__(self) -> None:
        self.added = 0
        self.refused: list[str] = []
        self.seconds = 0.0

    async def add(self, manager: Any, scope: Any, items: Sequence[Any]) -> None:
        from governed_memory.batch import MAX_BATCH_ITEMS

        principal = _principal()
        for offset in range(0, len(items), MAX_BATCH_ITEMS):
            start = time.perf_counter()
            result = await manager.add_many(principal, scope,
                                            items[offset:offset + MAX_BATCH_ITEMS],
                                            concurrency=INGEST_CONCURRENCY)
            self.seconds += time.perf_counter() - start
            self.added += len(result.added)
            self.refused.extend(f"{o.error_code}: {o.error}" for o in result.refused)

    def summary(self) -> dict[str, Any]:
        return {"added": self.added, "refused": len(self.refused),
                "first_refusal": self.refused[0] if self.refused else None,
                "seconds": round(self.seconds, 2),
                "per_s": round(self.added / self.seconds, 1) if self.seconds else None}


async def store_conversations(manager: Any, data: DataSet) -> Ingest:
    from governed_memory.batch import AddItem

    ingest = Ingest()
    for conversation in data.conversations:
        await ingest.add(manager, _scope(conversation), [
            AddItem(content=turn.memory_text, memory_type="episode",
                    metadata={"turn_id": turn.turn_id}) for turn in conversation.turns])
    return ingest


async def search_conversations(manager: Any, data: DataSet, ranking: Any = None,
                               signals: set[str] | None = None,
                               limit: int = DEPTH) -> dict[str, Ranking]:
    """Every question searched in its conversation's scope with ``ranking`` options; the
    names of the signals the hits' explanations carry are added to ``signals``."""
    principal = _principal()
    rankings: dict[str, Ranking] = {}
    for conversation in data.conversations:
        scope = _scope(conversation)
        for question in conversation.questions:
            result = await manager.search(principal, scope, question.text, limit=limit,
                                          ranking=ranking)
            if signals is not None:
                signals.update(signal.name for hit in result.hits
                               for signal in hit.explanation.signals)
            rankings[question.question_id] = tuple(
                str(hit.record.metadata["turn_id"]) for hit in result.hits)
    return rankings


def native_config(backend: str, directory: Path, name: str,
                  extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    config: dict[str, Any] = {"backend": backend}
    if backend == "sqlite":
        config["path"] = str(directory / f"{name}.db")
    config.update(extra or {})
    return config


async def with_manager(config: Mapping[str, Any],
                       use: Callable[[Any], Awaitable[Any]]) -> Any:
    from governed_memory import GovernedMemoryManager

    manager = GovernedMemoryManager.from_plugins("native", config)
    await manager.start()
    try:
        return await use(manager)
    finally:
        await manager.close()


def ranking_options() -> dict[str, Any]:
    """The per-search options of each governed vector/hybrid row."""
    from governed_memory.ranking_options import RankingOptions

    return {"vector": RankingOptions(modes=("vector",)), "hybrid": None,
            "hybrid-lexical-2": RankingOptions(weights={"lexical": 2.0})}


async def with_embedder_manager(backend: str, directory: Path, name: str, embedder: str,
                                use: Callable[[Any], Awaitable[Any]]) -> Any:
    """Run ``use`` with a manager under a profile that names ``embedder``, embeds on
    write and has both modes, exactly as an application would configure it; a provider
    or framework that cannot do this refuses the profile at start, and the reason is
    returned instead."""
    from governed_memory import GovernedMemoryManager
    from governed_memory.errors import GovernedMemoryError as GovernedError
    from governed_memory.profiles import parse_profile

    try:
        spec = parse_profile({
            "id": f"recall-bench-{name}", "version": "1.0.0",
            "provider": {"name": "native", "config": native_config(
                backend, directory, f"{name}-{embedder}")},
            "stores": {"embedder": {"kind": embedder}},
            "indexing": {"mode": "sync"},
            "retrieval": {"modes": ["lexical", "vector"], "top_k": 10},
        })
        manager = GovernedMemoryManager.from_profile(spec)
        await manager.start()
    except GovernedError as exc:
        return f"{type(exc).__name__}: {exc}"
    try:
        return await use(manager)
    finally:
        await manager.close()


def _vector_signal_missing(seen: set[str]) -> str | None:
    if any("vector" in name for name in seen):
        return None
    return ("the provider accepted the vector mode but its hits carry no vector signal "
            f"(signals seen: {', '.join(sorted(seen)) or 'none'})")


async def provider_vector_rankings(backend: str, directory: Path, embedder: str,
                                   data: DataSet
                                   ) -> tuple[dict[str, dict[str, Ranking]], Ingest] | str:
    """The provider's own vector-only and hybrid rankings of the conversations (one
    index, per-search options), and the ingest that built it; or why not."""
    async def use(manager: Any) -> tuple[dict[str, dict[str, Ranking]], Ingest] | str:
        ingest = await store_conversations(manager, data)
        out: dict[str, dict[str, Ranking]] = {}
        for method, options in ranking_options().items():
            seen: set[str] = set()
            out[method] = await search_conversations(manager, data, options, seen,
                                                     SEARCH_LIMIT)
            if method == "vector" and (missing := _vector_signal_missing(seen)):
                return missing  # never label lexical as vector
        return out, ingest

    result: tuple[dict[str, dict[str, Ranking]], Ingest] | str = await (
        with_embedder_manager(backend, directory, "conversations", embedder, use))
    return result


# --------------------------------------------------------------------------- embeddings

async def embed_all(embedder: Any, texts: Sequence[str], batch: int = 256
                    ) -> tuple[list[Sequence[float]], float]:
    """Vectors for ``texts`` and the embedder's throughput in texts per second."""
    vectors: list[Sequence[float]] = []
    start = time.perf_counter()
    for offset in range(0, len(texts), batch):
        vectors.extend(await embedder.embed(list(texts[offset:offset + batch])))
    elapsed = time.perf_counter() - start
    return vectors, len(texts) / elapsed if elapsed else float("inf")


async def baseline_rankings(embedder: Any, data: DataSet, lexical: Mapping[str, Ranking],
                            *, speaker_names: bool = True
                            ) -> tuple[dict[str, dict[str, Ranking]], float]:
    """Brute-force cosine rankings and their RRF with ``lexical``, per question."""
    vector: dict[str, Ranking] = {}
    hybrid: dict[str, Ranking] = {}
    rates: list[float] = []
    for conversation in data.conversations:
        ids = [turn.turn_id for turn in conversation.turns]
        texts = [turn.memory_text if speaker_names else turn.text
                 for turn in conversation.turns]
        docs, rate = await embed_all(embedder, texts)
        rates.append(rate)
        queries, _ = await embed_all(embedder, [q.text for q in conversation.questions])
        for question, ranking in zip(conversation.questions,
                                     cosine_rankings(queries, docs, ids), strict=True):
            vector[question.question_id] = ranking
            hybrid[question.question_id] = reciprocal_rank_fusion(
                [lexical[question.question_id], ranking])[:DEPTH]
    return {"vector": vector, "hybrid": hybrid}, sum(rates) / len(rates)


# ------------------------------------------------------------------------ wikipedia set

def _wiki_scope() -> Any:
    from governed_memory import Scope

    return Scope(TENANT, project_id="recall-wiki", user_id="wikipedia")


async def wiki_store(manager: Any, data: Any) -> Ingest:
    from governed_memory.batch import AddItem

    ingest = Ingest()
    await ingest.add(manager, _wiki_scope(), [
        AddItem(content=p.text, metadata={"passage_id": p.passage_id})
        for p in data.passages])
    return ingest


async def wiki_search(manager: Any, data: Any, ranking: Any = None,
                      signals: set[str] | None = None,
                      limit: int = DEPTH) -> dict[str, Ranking]:
    principal, scope = _principal(), _wiki_scope()
    rankings: dict[str, Ranking] = {}
    for query in data.queries:
        result = await manager.search(principal, scope, query.text, limit=limit,
                                      ranking=ranking)
        if signals is not None:
            signals.update(signal.name for hit in result.hits
                           for signal in hit.explanation.signals)
        rankings[query.query_id] = tuple(str(hit.record.metadata["passage_id"])
                                         for hit in result.hits)
    return rankings


async def wiki_run(args: argparse.Namespace, plugins: Any, directory: Path,
                   identities: Mapping[str, str]) -> dict[str, Any]:
    """The Wikipedia set's rows: lexical without an embedder, then vector and hybrid per
    embedder, each with the ingest rate of the manager that built its index."""
    import recall_wiki

    started = time.perf_counter()
    data = recall_wiki.load(articles=args.wiki_articles or None)
    rows: list[dict[str, Any]] = []
    ingests: list[dict[str, Any]] = []
    notes: dict[str, str] = {}

    async def lexical(manager: Any) -> None:
        ingest = await wiki_store(manager, data)
        ingests.append({"embedder": "-", **ingest.summary()})
        rows.append({"method": "lexical (BM25)", "embedder": "-",
                     **summarise_graded(data.queries, await wiki_search(manager, data))})

    await with_manager(native_config(args.backend, directory, "wiki-lexical"), lexical)
    for name in args.embedders:
        async def embedded(manager: Any, name: str = name) -> str | None:
            ingest = await wiki_store(manager, data)
            ingests.append({"embedder": name, **ingest.summary()})
            for method, options in ranking_options().items():
                seen: set[str] = set()
                found = await wiki_search(manager, data, options, seen, SEARCH_LIMIT)
                if method == "vector" and (missing := _vector_signal_missing(seen)):
                    return missing
                rows.append({"method": GOVERNED_LABELS[method], "embedder": name,
                             **summarise_graded(data.queries, found)})
            return None

        why = await with_embedder_manager(args.backend, directory, "wiki", name, embedded)
        if why:
            notes[name] = why
    return {"data": recall_wiki.describe(data), "results": rows, "ingest": ingests,
            "governed_vector_unavailable": notes,
            "seconds": round(time.perf_counter() - started, 1),
            "embedders": {k: v for k, v in identities.items() if k in args.embedders}}


# --------------------------------------------------------------------------------- run

def _load() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:  # not on every platform
        return []


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from governed_memory.plugins import PluginManager

    started = time.perf_counter()
    load_before = _load()
    data = generate(args.seed, conversations=args.conversations, turns=args.turns)
    questions = [q for c in data.conversations for q in c.questions]
    plugins = PluginManager.load()
    rows: list[dict[str, Any]] = []
    identities: dict[str, str] = {}
    throughput: dict[str, float] = {}
    notes: dict[str, str] = {}
    ingests: list[dict[str, Any]] = []
    wiki: dict[str, Any] | None = None
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)

        async def lexical_run(manager: Any) -> dict[str, Ranking]:
            ingest = await store_conversations(manager, data)
            ingests.append({"embedder": "-", **ingest.summary()})
            return await search_conversations(manager, data)

        lexical = await with_manager(native_config(args.backend, directory, "lexical"),
                                     lexical_run)
        rows.append({"method": "lexical (BM25)", "embedder": "-", "path": "governed",
                     **summarise(questions, lexical)})
        for name in args.embedders:
            embedder = plugins.embedders.get(name).factory({})
            identities[name] = str(embedder.identity)
            governed = await provider_vector_rankings(args.backend, directory, name, data)
            if isinstance(governed, str):
                notes[name] = governed
            else:
                found_by_method, ingest = governed
                ingests.append({"embedder": name, **ingest.summary()})
                for method, found_rankings in found_by_method.items():
                    rows.append({"method": GOVERNED_LABELS[method], "embedder": name,
                                 "path": "governed", **summarise(questions, found_rankings)})
            try:
                found, throughput[name] = await baseline_rankings(embedder, data, lexical)
                rows.append({"method": "vector (cosine)", "embedder": name, "path": "baseline",
                             **summarise(questions, found["vector"])})
                rows.append({"method": HYBRID_LABEL, "embedder": name,
                             "path": "baseline", **summarise(questions, found["hybrid"])})
                if args.ablation:
                    bare, _ = await baseline_rankings(embedder, data, lexical,
                                                      speaker_names=False)
                    rows.append({"method": "vector, text without speaker name",
                                 "embedder": name, "path": "baseline",
                                 **summarise(questions, bare["vector"])})
            finally:
                await embedder.close()
        conversations_seconds = time.perf_counter() - started
        if getattr(args, "wiki_articles", None) is not None:
            wiki = await wiki_run(args, plugins, directory, identities)
    meta = {
        "data": {"generator": data.version, "seed": data.seed,
                 "conversations": len(data.conversations), "turns": data.turn_count,
                 "questions": data.question_count, "sha256": fingerprint(data)},
        "backend": args.backend, "embedders": identities,
        "embed_texts_per_s": {k: round(v, 1) for k, v in throughput.items()},
        "governed_vector_unavailable": notes, "ingest": ingests,
        "ingest_concurrency": INGEST_CONCURRENCY,
        "seconds": round(conversations_seconds, 1),
        "load_average": {"start": load_before, "end": _load()},
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0], "machine": platform.machine(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    report: dict[str, Any] = {"meta": meta, "results": rows}
    if wiki is not None:
        report["wiki"] = wiki
    return report


# ---------------------------------------------------------------------------- markdown

def _ingest_lines(ingests: Sequence[Mapping[str, Any]], unit: str) -> list[str]:
    lines = [f"| embedder | {unit} | seconds | {unit}/s | refused |", "|---|---:|---:|---:|---:|"]
    for row in ingests:
        lines.append(f"| {row['embedder']} | {row['added']} | {row['seconds']} | "
                     f"{row['per_s']} | {row['refused']} |")
    first = next((row["first_refusal"] for row in ingests if row["first_refusal"]), None)
    if first:
        lines += ["", f"First refusal: `{first}`."]
    return lines


def _wiki_markdown(wiki: Mapping[str, Any]) -> list[str]:
    data = wiki["data"]
    lines = [
        "", "## Wikipedia sections (public data)", "",
        f"{data['articles']} articles, {data['passages']} passages stored as memories (one "
        f"paragraph each, median {data['passage_words_median']} words, one scope), "
        f"{data['queries']} queries (one per section: \"<title> <heading path>\"), "
        f"{data['relevant_per_query_mean']} passages under a query's heading on average; "
        f"generator `{data['generator']}`, set sha256 `{data['sha256'][:16]}`. Source: "
        f"`{data['file']}` from `{data['package']}` (file sha256 "
        f"`{data['file_sha256'][:16]}`); {data['licence']}. Judged as TREC CAR judges: "
        "grade 2 for the passages under the query's heading (subsections included), 1 for "
        "the article's other passages; hit@k = a grade-2 passage in the first k; nDCG@10 "
        "with gain 2^grade - 1. All rows are governed (`GovernedMemoryManager`, native "
        "provider); vector and hybrid rows search one index per embedder with per-search "
        "ranking options.", "",
        "| method | embedder | hit@1 | hit@5 | hit@10 | nDCG@10 |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for row in wiki["results"]:
        lines.append(f"| {row['method']} | {row['embedder']} | {row['hit@1']} | "
                     f"{row['hit@5']} | {row['hit@10']} | {row['ndcg@10']} |")
    lines += ["", f"Ingest (`add_many`, concurrency {INGEST_CONCURRENCY}, sync indexing: "
              "each embedder embeds on write):", ""]
    lines += _ingest_lines(wiki["ingest"], "passages")
    for name, why in wiki["governed_vector_unavailable"].items():
        lines.append(f"- governed vector/hybrid with `{name}` not measured: {why}")
    lines += ["", f"The Wikipedia part took {wiki['seconds']} s."]
    return lines


def markdown(report: Mapping[str, Any]) -> str:
    meta = report["meta"]
    data = meta["data"]
    kinds = sorted({kind for row in report["results"] for kind in row["by_kind"]})
    load = meta.get("load_average", {})
    lines = [
        "# Retrieval recall: generated conversations and Wikipedia sections",
        "",
        f"Native provider on {meta['backend']}; Python {meta['python']}, {meta['cpus']} "
        f"CPUs, {meta['when']}; load average (1, 5, 15 min) {load.get('start')} at the "
        f"start, {load.get('end')} at the end (other work on the machine slows the "
        "embedders).",
        "",
        "## Generated long conversations",
        "",
        f"{data['conversations']} conversations, {data['turns']} turns stored as memories "
        f"(`\"<speaker>: <text>\"`, one scope per conversation), {data['questions']} "
        f"questions with known evidence turns; generator `{data['generator']}`, seed "
        f"{data['seed']}, data sha256 `{data['sha256'][:16]}`. A question is a hit at k "
        "when an evidence turn is in the first k results; nDCG@10 counts the evidence "
        "turns as relevant.",
        "",
        "`governed` rows go through `GovernedMemoryManager` and the native provider: "
        "lexical is its BM25 (no embedder); vector and hybrid run under a profile that "
        "names the embedder (`[stores.embedder]`), embeds on write (`[indexing] mode = "
        "\"sync\"`) and has `[retrieval] modes = [\"lexical\", \"vector\"]`, one index "
        "searched with per-search ranking options: vector only, the default weights "
        "(the provider's weighted reciprocal-rank fusion, lexical 1 : vector 1), and "
        "lexical 2 : vector 1. `baseline` rows are a stand-alone yardstick computed by "
        "this bench from the same embedder: brute-force cosine, and reciprocal-rank fusion "
        f"(k = {RRF_K}, equal weights) of that with the governed BM25 ranking; the last row per "
        "embedder embeds the turn text without the speaker's name.",
        "",
        "| method | embedder | path | hit@1 | hit@5 | hit@10 | nDCG@10 | " + " | ".join(
            f"{kind} hit@5" for kind in kinds) + " |",
        "|---|---|---|---:|---:|---:|---:|" + "---:|" * len(kinds),
    ]
    for row in report["results"]:
        per_kind = " | ".join(str(row["by_kind"].get(kind, {}).get("hit@5", "-"))
                              for kind in kinds)
        lines.append(f"| {row['method']} | {row['embedder']} | {row['path']} | "
                     f"{row['hit@1']} | {row['hit@5']} | {row['hit@10']} | "
                     f"{row['ndcg@10']} | {per_kind} |")
    counts = {kind: next(row["by_kind"][kind]["questions"] for row in report["results"]
                         if kind in row["by_kind"]) for kind in kinds}
    lines += ["", "Question kinds: " + ", ".join(f"{kind} ({n})" for kind, n in counts.items())
              + ". paraphrase: shares no content word with the evidence but names; lexical: "
              "shares distinctive words; exchange: the evidence answers the other speaker's "
              "question; update: a later turn replaces an earlier fact and only it counts.",
              ""]
    for name, identity in meta["embedders"].items():
        rate = meta["embed_texts_per_s"].get(name)
        lines.append(f"- `{name}` = `{identity}`" + (f", {rate} texts/s embedding the "
                                                    "turns (batches of 256, baseline)"
                                                    if rate else ""))
    for name, why in meta["governed_vector_unavailable"].items():
        lines.append(f"- governed vector/hybrid with `{name}` not measured: {why}")
    if meta.get("ingest"):
        lines += ["", f"Ingest (`add_many` per conversation, concurrency "
                  f"{meta['ingest_concurrency']}, sync indexing):", ""]
        lines += _ingest_lines(meta["ingest"], "turns")
    lines += ["", f"The conversations part took {meta.get('seconds')} s."]
    if report.get("wiki"):
        lines += _wiki_markdown(report["wiki"])
    lines += ["", "Reproduce: `pip install -e '.[bench,embeddings]'` then "
              "`python bench/recall.py` (`--wiki-articles 0` for all 94 articles, "
              "`--quick` for a smoke run)."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--embedders", default="hashing,minilm",
                        type=lambda v: [n.strip() for n in v.split(",") if n.strip()])
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("--conversations", type=int, default=None,
                        help="default 4 (2 with --quick)")
    parser.add_argument("--turns", type=int, default=None, help="default 600 (200 with --quick)")
    parser.add_argument("--backend", choices=("sqlite", "memory"), default="sqlite")
    parser.add_argument("--no-ablation", dest="ablation", action="store_false",
                        help="skip the vector run on texts without the speaker's name")
    parser.add_argument("--wiki-articles", type=int, default=None,
                        help=f"articles of the Wikipedia set (default {WIKI_ARTICLES}, 8 "
                        "with --quick; 0 = all 94)")
    parser.add_argument("--no-wiki", action="store_true", help="skip the Wikipedia set")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run on small sizes, without the ablation; writes "
                        "nothing unless --out is given")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"where recall.json and recall.md go (default {RESULTS})")
    args = parser.parse_args()
    quick = args.quick
    args.conversations = args.conversations or (2 if quick else 4)
    args.turns = args.turns or (200 if quick else 600)
    if quick:
        args.ablation = False
    if args.no_wiki:
        args.wiki_articles = None
    else:
        args.wiki_articles = (args.wiki_articles if args.wiki_articles is not None
                              else 8 if quick else WIKI_ARTICLES)
        import recall_wiki

        try:
            recall_wiki.source_path()
        except recall_wiki.MissingSource as exc:
            parser.exit(2, f"recall.py: {exc} (or pass --no-wiki)\n")
    report = asyncio.run(run(args))
    text = markdown(report)
    out = args.out if args.out is not None else (None if quick else RESULTS)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "recall.json").write_text(json.dumps(report, indent=2) + "\n")
        (out / "recall.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
