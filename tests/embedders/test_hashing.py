"""The hashing embedder: the same vectors everywhere, unit length, and near for texts
that share words."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from embedders_support import dot, norm
from governed_memory.embedding import Embedder, EmbedderIdentity
from governed_memory.errors import (
    MemoryConfigurationError,
    MemoryUnavailableError,
    MemoryValidationError,
)
from governed_memory_embedders import HashingEmbedder, build_hashing_embedder
from governed_memory_embedders.hashing import REVISION, hash_vector
from hypothesis import given
from hypothesis import strategies as st

# Pinned output: if these change, every stored hashing vector silently changes meaning,
# so the algorithm must get a new REVISION instead.
GOLDEN_TEXT = "Alice: my sister Maya moved to Lisbon in March."
GOLDEN = {0: 0.070888121, 2: 0.0, 63: -0.141776241, 72: -0.283552482, 99: -0.354440603}


def test_is_an_embedder_with_a_versioned_identity() -> None:
    embedder = build_hashing_embedder({"dimension": 64})
    assert isinstance(embedder, Embedder)
    assert embedder.identity == EmbedderIdentity("hashing", REVISION, 64)
    assert build_hashing_embedder({}).identity.dimension == 384


async def test_vectors_are_unit_length_and_of_the_declared_dimension() -> None:
    embedder = build_hashing_embedder({"dimension": 32})
    texts = ["Bob: the train leaves at 9", "", "   ", "!!!", "é" * 5000, "日本語のテキスト"]
    vectors = await embedder.embed(texts)
    assert len(vectors) == len(texts)
    for vector in vectors:
        assert len(vector) == 32
        assert norm(vector) == pytest.approx(1.0, abs=1e-12)


@given(st.text(max_size=200), st.integers(min_value=8, max_value=512))
def test_any_text_gives_a_finite_unit_vector(text: str, dimension: int) -> None:
    vector = hash_vector(text, dimension)
    assert len(vector) == dimension
    assert norm(vector) == pytest.approx(1.0, abs=1e-9)


async def test_golden_values_are_stable() -> None:
    vector = (await HashingEmbedder().embed([GOLDEN_TEXT]))[0]
    for index, value in GOLDEN.items():
        assert vector[index] == pytest.approx(value, abs=1e-9)


def test_same_vectors_in_another_process_with_another_hash_seed() -> None:
    code = ("import json; from governed_memory_embedders.hashing import hash_vector; "
            f"print(json.dumps(hash_vector({GOLDEN_TEXT!r}, 384)))")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True).stdout
    assert tuple(json.loads(out)) == hash_vector(GOLDEN_TEXT, 384)


async def test_a_batch_equals_its_texts_one_by_one_in_order() -> None:
    embedder = HashingEmbedder()
    texts = [f"speaker {i}: note number {i} about item {i * 7}" for i in range(50)]
    batch = await embedder.embed(texts)
    singles = [(await embedder.embed([text]))[0] for text in texts]
    assert list(batch) == singles
    assert await embedder.embed([]) == ()


async def test_a_large_batch_is_hashed_off_the_loop_with_the_same_result() -> None:
    embedder = HashingEmbedder()
    texts = [f"long text {i} " + "word " * 2000 for i in range(3)]  # > the inline bound
    assert list(await embedder.embed(texts)) == list(embedder.embed_sync(texts))


async def test_shared_words_and_stems_are_closer_than_unrelated_text() -> None:
    query, near, stem, far = await HashingEmbedder().embed([
        "where did Maya move to", "Alice: Maya moved to Lisbon", "Alice: Maya is moving house",
        "Bob: the quarterly report is late"])
    assert dot(query, near) > dot(query, far)
    assert dot(query, stem) > dot(query, far)


async def test_normalisation_ignores_case_and_unicode_form() -> None:
    a, b = await HashingEmbedder().embed(["CAFÉ Lisbon", "cafe\u0301 lisbon"])
    assert a == b


@pytest.mark.parametrize("config, message", [
    ({"dimension": 4}, "dimension: must be an integer from 8"),
    ({"dimension": "384"}, "dimension: must be an integer"),
    ({"dimension": True}, "dimension: must be an integer"),
    ({"dimensions": 384}, "unknown hashing embedder config key(s): dimensions"),
])
def test_bad_config_is_a_configuration_error_naming_the_key(config: dict[str, object],
                                                             message: str) -> None:
    with pytest.raises(MemoryConfigurationError, match=message.replace("(", r"\(")
                       .replace(")", r"\)")):
        build_hashing_embedder(config)


@pytest.mark.parametrize("texts", ["a bare string", ["ok", 3], [b"bytes"], None])
async def test_non_text_input_is_a_validation_error(texts: object) -> None:
    with pytest.raises(MemoryValidationError) as caught:
        await HashingEmbedder().embed(texts)  # type: ignore[arg-type]
    assert caught.value.field == "texts"


async def test_a_closed_embedder_refuses_to_embed() -> None:
    embedder = HashingEmbedder()
    await embedder.close()
    with pytest.raises(MemoryUnavailableError, match="closed"):
        await embedder.embed(["text"])
