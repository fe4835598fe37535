"""Embedders for Mem0: a deterministic one of our own, and the bridge Mem0 calls.

Mem0 has no registry for custom embedders; what works (see the mem0 notes) is building
it with a listed provider and replacing ``memory.embedding_model`` with an object that
has ``embed(text, memory_action)`` and ``embed_batch(texts, memory_action)``. The bridge
is that object: it hands Mem0 the vectors of a governed ``Embedder`` (the same one the
native provider would use), so a benchmark compares stores, not models.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
import threading
from collections.abc import Sequence
from typing import Any, Final

from governed_memory.embedding import Embedder, EmbedderIdentity
from governed_memory.errors import MemoryUnavailableError

_WORD: Final = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder:
    """Feature-hashed bag of words, L2-normalised: deterministic, offline, instant.

    Two texts sharing no word have cosine 0 (barring a hash collision), so tests can
    reason about which records a search ranks first without a model.
    """

    def __init__(self, dimension: int = 256) -> None:
        self._identity = EmbedderIdentity("hashing-bow", "1", dimension)

    @property
    def identity(self) -> EmbedderIdentity:
        return self._identity

    def embed_one(self, text: str) -> list[float]:
        size = self._identity.dimension
        vector = [0.0] * size
        for word in _WORD.findall(text.lower()):
            digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
            vector[int.from_bytes(digest, "big") % size] += 1.0
        norm = math.sqrt(sum(v * v for v in vector))
        if norm == 0.0:
            vector[0] = 1.0  # a text without words still needs a unit vector
            return vector
        return [v / norm for v in vector]

    async def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        return [self.embed_one(text) for text in texts]

    async def close(self) -> None:
        return None


class Mem0EmbedderBridge:
    """What Mem0 calls from inside its (synchronous) operations.

    The adapter runs Mem0 in a worker thread while the event loop that called it waits;
    a governed embedder is async, so its coroutine is sent back to that loop. The
    hashing embedder is computed inline.
    """

    def __init__(self, embedder: Embedder, timeout_s: float = 30.0) -> None:
        self._embedder = embedder
        self._timeout_s = timeout_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._guard = threading.Lock()

    @property
    def identity(self) -> EmbedderIdentity:
        return self._embedder.identity

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Called under the store lock before Mem0 runs, with the caller's loop."""
        with self._guard:
            self._loop = loop

    def embed(self, text: str, memory_action: Any = None) -> list[float]:
        return self.embed_batch([text], memory_action)[0]

    def embed_batch(self, texts: Sequence[str], memory_action: Any = "add") -> list[list[float]]:
        if isinstance(self._embedder, HashingEmbedder):
            return [self._embedder.embed_one(text) for text in texts]
        with self._guard:
            loop = self._loop
        if loop is None or loop.is_closed():
            raise MemoryUnavailableError("the embedder has no running event loop to run on")
        future = asyncio.run_coroutine_threadsafe(self._embedder.embed(list(texts)), loop)
        try:
            # Bounded: this thread holds the store lock while it waits.
            vectors = future.result(timeout=self._timeout_s)
        except TimeoutError:
            future.cancel()
            raise MemoryUnavailableError("the embedder did not answer in time") from None
        return [[float(v) for v in vector] for vector in vectors]
