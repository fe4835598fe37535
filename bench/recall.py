"""Retrieval recall on generated long conversations: evidence hit@5 and hit@10 for
lexical, vector and hybrid search, per embedder.

The data set comes from ``recall_data.py`` (seeded, no downloads): every turn of every
conversation is stored as a memory ``"<speaker>: <text>"`` in its own scope, and each
question is searched in its conversation's scope; a question is a hit at k when one of
its evidence turns is among the first k results.

Two paths measure the same thing:

- **governed**: ``GovernedMemoryManager`` over the native provider, so the figures are
  what an application gets. Lexical search is the native provider's BM25. Vector and
  hybrid run through the provider too when it is configured with the embedder (the
  provider says so by declaring ``vector_search``); otherwise those rows are absent.
- **baseline** (stand-alone, clearly labelled): the governed lexical ranking, a
  brute-force cosine ranking over the embedder's vectors, and reciprocal-rank fusion
  (k = 60) of the two. It needs nothing from the provider but lexical search, so it
  gives figures for every embedder, and a yardstick for the provider's own fusion.

Writes ``bench/results/recall.json`` and ``recall.md``.

    python bench/recall.py [--embedders hashing,minilm] [--seed 20261130]
                           [--conversations 4] [--turns 600] [--backend sqlite|memory]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from recall_data import Conversation, DataSet, Question, fingerprint, generate

RESULTS = Path(__file__).parent / "results"
KS = (5, 10)
DEPTH = 100
"""How deep each ranking goes before fusion (the provider's page limit)."""
RRF_K = 60
TENANT = "bench"

Ranking = tuple[str, ...]
"""Turn ids, best first."""


# ------------------------------------------------------------------------------ scoring

def hit_at(ranking: Sequence[str], evidence: Iterable[str], k: int) -> bool:
    wanted = set(evidence)
    return any(turn_id in wanted for turn_id in ranking[:k])


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


def summarise(questions: Sequence[Question], rankings: Mapping[str, Ranking]) -> dict[str, Any]:
    """hit@k over all questions and per question kind."""
    def rates(subset: Sequence[Question]) -> dict[str, float]:
        return {f"hit@{k}": round(sum(hit_at(rankings[q.question_id], q.evidence, k)
                                      for q in subset) / len(subset), 4) for k in KS}

    kinds = sorted({q.kind for q in questions})
    return {**rates(questions), "questions": len(questions),
            "by_kind": {kind: {**rates([q for q in questions if q.kind == kind]),
                               "questions": sum(q.kind == kind for q in questions)}
                        for kind in kinds}}


# ----------------------------------------------------------------------- governed search

def _scope(conversation: Conversation) -> Any:
    from governed_memory import Scope

    return Scope(TENANT, project_id="recall", user_id=conversation.conversation_id)


def _principal() -> Any:
    from governed_memory import Permission, Principal, PrincipalKind

    return Principal("svc:recall-bench", PrincipalKind.SERVICE, TENANT,
                     permissions=frozenset({Permission.READ, Permission.WRITE}))


async def governed_rankings(manager: Any, data: DataSet,
                            signals: set[str] | None = None) -> dict[str, Ranking]:
    """Store every turn through ``manager`` and search every question with it; the
    names of the ranking signals the hits' explanations carry are added to ``signals``."""
    principal = _principal()
    for conversation in data.conversations:
        scope = _scope(conversation)
        for turn in conversation.turns:
            await manager.add(principal, scope, turn.memory_text,
                              memory_type="episode", metadata={"turn_id": turn.turn_id})
    rankings: dict[str, Ranking] = {}
    for conversation in data.conversations:
        scope = _scope(conversation)
        for question in conversation.questions:
            result = await manager.search(principal, scope, question.text, limit=DEPTH)
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


async def provider_vector_rankings(backend: str, directory: Path, embedder: str,
                                   data: DataSet) -> dict[str, dict[str, Ranking]] | str:
    """Vector-only and hybrid rankings from the native provider itself, or why not.

    Each runs under a profile that names the embedder (``[stores.embedder]``), embeds on
    write (``[indexing] mode = "sync"``) and picks the retrieval modes, exactly as an
    application would configure it; the provider's default fusion weighs lexical and
    vector equally. A provider or framework that cannot do this refuses the profile at
    start, and the reason is reported instead of figures.
    """
    from governed_memory import GovernedMemoryManager
    from governed_memory.errors import GovernedMemoryError as GovernedError
    from governed_memory.profiles import parse_profile

    out: dict[str, dict[str, Ranking]] = {}
    for method, modes in (("vector", ["vector"]), ("hybrid", ["lexical", "vector"])):
        try:
            spec = parse_profile({
                "id": f"recall-bench-{method}", "version": "1.0.0",
                "provider": {"name": "native", "config": native_config(
                    backend, directory, f"{embedder}-{method}")},
                "stores": {"embedder": {"kind": embedder}},
                "indexing": {"mode": "sync"},
                "retrieval": {"modes": modes, "top_k": 10},
            })
            manager = GovernedMemoryManager.from_profile(spec)
            await manager.start()
        except GovernedError as exc:
            return f"{type(exc).__name__}: {exc}"
        seen: set[str] = set()
        try:
            out[method] = await governed_rankings(manager, data, seen)
        finally:
            await manager.close()
        if not any("vector" in name for name in seen):  # never label lexical as vector
            return (f"the provider accepted modes {modes} but its hits carry no vector "
                    f"signal (signals seen: {', '.join(sorted(seen)) or 'none'})")
    return out


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


# --------------------------------------------------------------------------------- run

async def run(args: argparse.Namespace) -> dict[str, Any]:
    from governed_memory.plugins import PluginManager

    data = generate(args.seed, conversations=args.conversations, turns=args.turns)
    questions = [q for c in data.conversations for q in c.questions]
    plugins = PluginManager.load()
    rows: list[dict[str, Any]] = []
    identities: dict[str, str] = {}
    throughput: dict[str, float] = {}
    notes: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        lexical = await with_manager(native_config(args.backend, directory, "lexical"),
                                     lambda m: governed_rankings(m, data))
        rows.append({"method": "lexical (BM25)", "embedder": "-", "path": "governed",
                     **summarise(questions, lexical)})
        for name in args.embedders:
            embedder = plugins.embedders.get(name).factory({})
            identities[name] = str(embedder.identity)
            governed = await provider_vector_rankings(args.backend, directory, name, data)
            if isinstance(governed, str):
                notes[name] = governed
            else:
                labels = {"vector": "vector (cosine)", "hybrid": "hybrid (RRF k=60)"}
                for method, found_rankings in governed.items():
                    rows.append({"method": labels[method], "embedder": name,
                                 "path": "governed", **summarise(questions, found_rankings)})
            try:
                found, throughput[name] = await baseline_rankings(embedder, data, lexical)
                rows.append({"method": "vector (cosine)", "embedder": name, "path": "baseline",
                             **summarise(questions, found["vector"])})
                rows.append({"method": "hybrid (RRF k=60)", "embedder": name,
                             "path": "baseline", **summarise(questions, found["hybrid"])})
                if args.ablation:
                    bare, _ = await baseline_rankings(embedder, data, lexical,
                                                      speaker_names=False)
                    rows.append({"method": "vector, text without speaker name",
                                 "embedder": name, "path": "baseline",
                                 **summarise(questions, bare["vector"])})
            finally:
                await embedder.close()
    meta = {
        "data": {"generator": data.version, "seed": data.seed,
                 "conversations": len(data.conversations), "turns": data.turn_count,
                 "questions": data.question_count, "sha256": fingerprint(data)},
        "backend": args.backend, "embedders": identities,
        "embed_texts_per_s": {k: round(v, 1) for k, v in throughput.items()},
        "governed_vector_unavailable": notes,
        "python": sys.version.split()[0], "machine": platform.machine(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    return {"meta": meta, "results": rows}


def markdown(report: Mapping[str, Any]) -> str:
    meta = report["meta"]
    data = meta["data"]
    kinds = sorted({kind for row in report["results"] for kind in row["by_kind"]})
    lines = [
        "# Retrieval recall on generated long conversations",
        "",
        f"{data['conversations']} conversations, {data['turns']} turns stored as memories "
        f"(`\"<speaker>: <text>\"`, one scope per conversation), {data['questions']} "
        f"questions with known evidence turns; generator `{data['generator']}`, seed "
        f"{data['seed']}, data sha256 `{data['sha256'][:16]}`; native provider on "
        f"{meta['backend']}; Python {meta['python']}, {meta['when']}. A question is a hit "
        "at k when an evidence turn is in the first k results.",
        "",
        "`governed` rows go through `GovernedMemoryManager` and the native provider: "
        "lexical is its BM25; vector and hybrid run under a profile that names the "
        "embedder (`[stores.embedder]`), embeds on write (`[indexing] mode = \"sync\"`) "
        "and sets `[retrieval] modes` to `[\"vector\"]` or `[\"lexical\", \"vector\"]` "
        "with the default weights (the provider's exact cosine, and its weighted "
        "reciprocal-rank fusion). `baseline` rows are a stand-alone yardstick computed by "
        "this bench from the same embedder: brute-force cosine, and reciprocal-rank fusion "
        "(k = 60, equal weights) of that with the governed BM25 ranking; the last row per "
        "embedder embeds the turn text without the speaker's name.",
        "",
        "| method | embedder | path | hit@5 | hit@10 | " + " | ".join(
            f"{kind} hit@5" for kind in kinds) + " |",
        "|---|---|---|---:|---:|" + "---:|" * len(kinds),
    ]
    for row in report["results"]:
        per_kind = " | ".join(str(row["by_kind"].get(kind, {}).get("hit@5", "-"))
                              for kind in kinds)
        lines.append(f"| {row['method']} | {row['embedder']} | {row['path']} | "
                     f"{row['hit@5']} | {row['hit@10']} | {per_kind} |")
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
                                                    "turns (batches of 256)" if rate else ""))
    for name, why in meta["governed_vector_unavailable"].items():
        lines.append(f"- governed vector/hybrid with `{name}` not measured: {why}")
    lines += ["", "Reproduce: `python bench/recall.py`"]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--embedders", default="hashing,minilm",
                        type=lambda v: [n.strip() for n in v.split(",") if n.strip()])
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("--conversations", type=int, default=4)
    parser.add_argument("--turns", type=int, default=600)
    parser.add_argument("--backend", choices=("sqlite", "memory"), default="sqlite")
    parser.add_argument("--no-ablation", dest="ablation", action="store_false",
                        help="skip the vector run on texts without the speaker's name")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    report = asyncio.run(run(args))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "recall.json").write_text(json.dumps(report, indent=2) + "\n")
    text = markdown(report)
    (args.out / "recall.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
