"""A deterministic embedder for tests and for machines without a model: signed feature
hashing of words and character trigrams.

Tests need vectors that are the same in every process, on every Python version and
platform, and that still put texts sharing words (or word stems) near each other, so a
vector index can be exercised without a model. Python's ``hash()`` is salted per process,
so features are hashed with BLAKE2b under a personalisation string instead. The
algorithm is versioned in ``model_revision``: change it and stored vectors re-embed.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any, Final

from governed_memory.embedding import EmbedderIdentity
from governed_memory.errors import MemoryUnavailableError

from governed_memory_embedders.config import HashingConfig, parse_hashing_config
from governed_memory_embedders.inputs import check_texts

REVISION: Final = "fh1-w1-c3"
"""Feature-hashing v1: word unigrams (weight 1) and padded character trigrams."""
_PERSON: Final = b"gm-embed-fh1"
_WORD: Final = re.compile(r"\w+")
_TRIGRAM_WEIGHT: Final = 0.25
_EMPTY_FEATURE: Final = "\x00empty"
_INLINE_CHARS: Final = 16_384
"""Batches larger than this are hashed in a worker thread, off the event loop."""


class HashingEmbedder:
    """Bag of hashed words and trigrams, L2-normalised. Not semantic: it knows no
    synonyms, so paraphrases only meet through shared words or stems."""

    def __init__(self, config: HashingConfig | None = None) -> None:
        self._config = config or HashingConfig()
        self._identity = EmbedderIdentity("hashing", REVISION, self._config.dimension)
        self._closed = False

    @property
    def identity(self) -> EmbedderIdentity:
        return self._identity

    async def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        batch = check_texts(texts)
        if self._closed:
            raise MemoryUnavailableError("the hashing embedder is closed")
        if sum(len(text) for text in batch) > _INLINE_CHARS:
            return await asyncio.to_thread(self.embed_sync, batch)
        return self.embed_sync(batch)

    def embed_sync(self, texts: Sequence[str]) -> tuple[tuple[float, ...], ...]:
        """The same vectors as ``embed``, for callers without an event loop."""
        return tuple(hash_vector(text, self._config.dimension) for text in check_texts(texts))

    async def close(self) -> None:
        self._closed = True


def features(text: str) -> list[tuple[str, float]]:
    """Weighted features of ``text``: each word, and each trigram of ``<word>``."""
    normalised = unicodedata.normalize("NFKC", text).casefold()
    found: list[tuple[str, float]] = []
    for word in _WORD.findall(normalised):
        found.append(("w:" + word, 1.0))
        padded = f"<{word}>"
        found.extend(("c:" + padded[i:i + 3], _TRIGRAM_WEIGHT) for i in range(len(padded) - 2))
    return found or [(_EMPTY_FEATURE, 1.0)]


def hash_vector(text: str, dimension: int) -> tuple[float, ...]:
    """The unit vector of ``text``; a text with no word maps to one fixed unit vector."""
    vector = [0.0] * dimension
    for feature, weight in features(text):
        digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8, person=_PERSON).digest()
        value = int.from_bytes(digest, "little")
        sign = -1.0 if value >> 63 else 1.0
        vector[value % dimension] += sign * weight
    norm = math.sqrt(math.fsum(x * x for x in vector))
    if norm == 0.0:  # signed features cancelled out exactly: use the no-word vector
        return hash_vector("", dimension)
    return tuple(x / norm for x in vector)


def build_hashing_embedder(config: Mapping[str, Any]) -> HashingEmbedder:
    return HashingEmbedder(parse_hashing_config(config))
