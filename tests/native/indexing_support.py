"""Embedders for indexing tests: the deterministic hashing one, wrapped to count calls,
fail on demand, or pause mid-call (so a test can act while a worker holds a lease)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from governed_memory.embedding import EmbedderIdentity
from governed_memory.errors import MemoryUnavailableError
from governed_memory.indexing import IndexingMode, IndexingSettings, RankingConfig
from governed_memory_embedders.config import HashingConfig
from governed_memory_embedders.hashing import HashingEmbedder


class ControlledEmbedder:
    """Hashing vectors, plus: ``calls`` (texts per call), ``fail_on`` (a substring that
    makes a call fail), ``failing`` (every call fails) and ``gate`` (when set, each
    call waits for it after announcing itself on ``entered``)."""

    def __init__(self, dimension: int = 64, revision_suffix: str = "") -> None:
        self._inner = HashingEmbedder(HashingConfig(dimension=dimension))
        inner = self._inner.identity
        self._identity = EmbedderIdentity(inner.id, inner.model_revision + revision_suffix,
                                          inner.dimension)
        self.calls: list[list[str]] = []
        self.fail_on: str | None = None
        self.failing = False
        self.gate: asyncio.Event | None = None
        self.entered = asyncio.Event()
        self.closed = False

    @property
    def identity(self) -> EmbedderIdentity:
        return self._identity

    async def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        self.calls.append(list(texts))
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.failing or (self.fail_on is not None
                            and any(self.fail_on in text for text in texts)):
            raise MemoryUnavailableError("the test embedder was told to fail")
        return await self._inner.embed(texts)

    async def close(self) -> None:
        self.closed = True

    @property
    def texts_embedded(self) -> int:
        return sum(len(call) for call in self.calls)


def settings(embedder: object, mode: str = "sync",
             modes: tuple[str, ...] = ("lexical", "vector"), **weights: float
             ) -> IndexingSettings:
    return IndexingSettings(mode=IndexingMode(mode), embedder=embedder,  # type: ignore[arg-type]
                            ranking=RankingConfig(modes=modes, weights=weights))
