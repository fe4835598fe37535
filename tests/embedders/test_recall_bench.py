"""The recall bench's data and scoring: the generator is deterministic and keeps the
promises its docstring makes, and hit@k and the fusion count what they claim."""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load_bench_module(name: str) -> ModuleType:
    """Import ``bench/<name>.py`` by path: putting bench/ on sys.path would shadow real
    packages with same-named bench scripts (bench/mem0.py is not the mem0 package)."""
    path = BENCH / f"{name}.py"
    loaded = sys.modules.get(name)
    if loaded is not None and getattr(loaded, "__file__", None) == str(path):
        return loaded
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


recall_data = load_bench_module("recall_data")  # recall.py imports it by this name
recall = load_bench_module("recall")
NAMES, generate, data_fingerprint = recall_data.NAMES, recall_data.generate, \
    recall_data.fingerprint

SMALL = {"conversations": 2, "turns": 150, "facts_per_conversation": 8}
STOPWORDS = frozenset({
    "a", "an", "the", "is", "was", "were", "be", "been", "to", "of", "in", "on", "at", "for",
    "with", "and", "or", "but", "what", "which", "who", "where", "when", "how", "why", "did",
    "does", "do", "has", "have", "had", "that", "this", "from", "by", "as", "it", "i", "i'm",
    "i've", "my", "me", "we", "our", "us", "you", "your", "they", "their", "s", "after",
    "since", "each", "day", "these", "days", "now",
})


def content_words(text: str) -> set[str]:
    names = {name.lower() for name in NAMES}
    return set(re.findall(r"[a-z']+", text.lower())) - STOPWORDS - names


def test_the_same_seed_gives_the_same_data_and_another_seed_other_data() -> None:
    assert data_fingerprint(generate(3, **SMALL)) == data_fingerprint(generate(3, **SMALL))
    assert data_fingerprint(generate(3, **SMALL)) != data_fingerprint(generate(4, **SMALL))


def test_the_default_data_set_is_pinned() -> None:
    """The published figures name this fingerprint; a generator change must bump
    GENERATOR_VERSION and re-run the bench rather than drift silently."""
    data = generate()
    assert (data.turn_count, data.question_count) == (2400, 126)
    assert data_fingerprint(data) == (
        "ac7a134dfb43e624dddb4728010a4ab71ca9b33b85604f28ac415c4a4f30a16e")


def test_every_question_has_evidence_in_its_own_conversation() -> None:
    data = generate()
    for conversation in data.conversations:
        turns = {turn.turn_id: turn for turn in conversation.turns}
        assert len(turns) == len(conversation.turns)
        assert {turn.speaker for turn in conversation.turns} == set(conversation.speakers)
        for question in conversation.questions:
            assert question.evidence and all(e in turns for e in question.evidence)
            evidence = [turns[e] for e in question.evidence]
            # a question names the person whose fact it asks about, who said the evidence
            assert any(turn.speaker in question.text for turn in evidence), question


def test_paraphrased_questions_share_no_content_word_with_their_evidence() -> None:
    for conversation in generate().conversations:
        turns = {turn.turn_id: turn for turn in conversation.turns}
        for question in conversation.questions:
            if question.kind != "paraphrase":
                continue
            for turn_id in question.evidence:
                shared = content_words(question.text) & content_words(
                    turns[turn_id].memory_text)
                assert not shared, (question.text, turns[turn_id].memory_text)


def test_lexical_questions_share_a_content_word_with_their_evidence() -> None:
    for conversation in generate().conversations:
        turns = {turn.turn_id: turn for turn in conversation.turns}
        for question in conversation.questions:
            if question.kind == "lexical":
                assert any(content_words(question.text)
                           & content_words(turns[e].memory_text) for e in question.evidence)


def test_an_updated_fact_counts_only_the_later_turn() -> None:
    for conversation in generate().conversations:
        positions = {turn.turn_id: i for i, turn in enumerate(conversation.turns)}
        updates = [q for q in conversation.questions if q.kind == "update"]
        for question in updates:
            (evidence,) = question.evidence
            assert positions[evidence] > 0


def test_hit_at_k_counts_any_evidence_in_the_first_k() -> None:
    ranking = ("t1", "t2", "t3", "t4", "t5", "t6")
    assert recall.hit_at(ranking, {"t5"}, 5)
    assert not recall.hit_at(ranking, {"t6"}, 5)
    assert recall.hit_at(ranking, {"t6", "t2"}, 5)
    assert not recall.hit_at((), {"t1"}, 10)


def test_reciprocal_rank_fusion_rewards_agreement_and_breaks_ties_stably() -> None:
    fused = recall.reciprocal_rank_fusion([("a", "b", "c"), ("b", "d", "a")])
    assert fused[0] == "b"  # ranks 2 and 1
    assert fused[1] == "a"  # ranks 1 and 3
    assert set(fused) == {"a", "b", "c", "d"}
    # "c" (rank 3 once) and "d" (rank 2 once): the better single rank wins
    assert fused.index("d") < fused.index("c")
    assert recall.reciprocal_rank_fusion([("x", "y"), ("y", "x")]) == ("x", "y")


def test_cosine_rankings_are_exact_and_stable() -> None:
    docs = [(1.0, 0.0), (0.0, 1.0), (1.0, 0.0), (0.6, 0.8)]
    (ranking,) = recall.cosine_rankings([(1.0, 0.0)], docs, ["a", "b", "c", "d"])
    assert ranking == ("a", "c", "d", "b")


def test_summary_splits_by_kind() -> None:
    data = generate(5, **SMALL)
    questions = [q for c in data.conversations for q in c.questions]
    perfect = {q.question_id: q.evidence for q in questions}
    summary = recall.summarise(questions, perfect)
    assert summary["hit@5"] == summary["hit@10"] == 1.0
    assert sum(kind["questions"] for kind in summary["by_kind"].values()) == len(questions)
    assert recall.summarise(questions, {q.question_id: () for q in questions})["hit@10"] == 0


async def test_the_bench_runs_end_to_end_on_a_small_data_set(tmp_path: Path) -> None:
    args = argparse.Namespace(embedders=["hashing"], seed=7, conversations=1, turns=120,
                              backend="memory", ablation=True, out=tmp_path)
    report = await recall.run(args)
    methods = {(row["method"], row["path"]) for row in report["results"]}
    assert ("lexical (BM25)", "governed") in methods
    assert ("hybrid (RRF k=5)", "baseline") in methods
    for row in report["results"]:
        assert 0.0 <= row["hit@5"] <= row["hit@10"] <= 1.0
    # the provider's exact cosine over the same embedder agrees with the brute-force one
    assert not report["meta"]["governed_vector_unavailable"]
    rows = {(row["method"], row["path"]): row for row in report["results"]}
    governed, baseline = rows["vector (cosine)", "governed"], rows["vector (cosine)", "baseline"]
    assert abs(governed["hit@10"] - baseline["hit@10"]) <= 0.1
    assert ("hybrid (RRF k=5)", "governed") in rows
    assert report["meta"]["data"]["turns"] == 120
    assert "| lexical (BM25) | - | governed |" in recall.markdown(report)


@pytest.mark.parametrize("bad", [{"turns": 10}, {"conversations": 0},
                                 {"facts_per_conversation": 0}])
def test_impossible_sizes_are_refused(bad: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        generate(1, **{**SMALL, **bad})
