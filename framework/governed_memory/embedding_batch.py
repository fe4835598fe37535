"""``BatchingEmbedder``: concurrent ``embed`` calls become one model call.

A write in ``sync`` indexing embeds its content alone, and a model call per text is the
main cost of ingest (MiniLM: about 24 texts/s one by one, 175/s in batches, on these
machines). Requests that arrive while a model call runs wait for it and then go
together in the next call, so a lone write pays no wait at all and a burst of writes
(``add_many``, a busy server) is embedded in a few batches; each caller still gets the
vectors of its own texts.

A failed batch does not fail its neighbours: unless the model itself is unavailable
(which every text would meet), each request of the batch is tried again alone, so one
text the model refuses fails only the write that brought it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import attrs

from governed_memory.embedding import Embedder, EmbedderIdentity
from governed_memory.errors import MemoryUnavailableError

__all__ = ["BatchingEmbedder"]

DEFAULT_MAX_TEXTS = 256
"""Texts per model call at most: large enough to reach the model's batch throughput,
small enough that one call does not hold a burst's first writes for long."""


@attrs.define
class _Pending:
    texts: tuple[str, ...]
    future: asyncio.Future[Sequence[Sequence[float]]]


class BatchingEmbedder:
    """An :class:`Embedder` over another, with the same identity and vectors."""

    def __init__(self, inner: Embedder, *, max_texts: int = DEFAULT_MAX_TEXTS) -> None:
        if max_texts < 1:
            raise ValueError("max_texts must be at least 1")
        self._inner = inner
        self._max_texts = max_texts
        self._pending: list[_Pending] = []
        self._drainer: asyncio.Task[None] | None = None

    @property
    def inner(self) -> Embedder:
        return self._inner

    @property
    def identity(self) -> EmbedderIdentity:
        return self._inner.identity

    async def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        batch = tuple(texts)
        if not batch:
            return await self._inner.embed(batch)
        loop = asyncio.get_running_loop()
        drainer = self._drainer
        if drainer is not None and not drainer.done() and drainer.get_loop() is not loop:
            # Another loop's burst is in progress; its futures cannot cross loops.
            return await self._inner.embed(batch)
        pending = _Pending(batch, loop.create_future())
        self._pending.append(pending)
        if self._drainer is None or self._drainer.done():
            self._drainer = loop.create_task(self._drain())
        return await pending.future

    async def close(self) -> None:
        await self._inner.close()

    async def _drain(self) -> None:
        while self._pending:
            taken: list[_Pending] = []
            count = 0
            while self._pending and (not taken or
                                     count + len(self._pending[0].texts) <= self._max_texts):
                request = self._pending.pop(0)
                if request.future.done():  # its caller was cancelled
                    continue
                taken.append(request)
                count += len(request.texts)
            if taken:
                await self._embed_together(taken)

    async def _embed_together(self, requests: list[_Pending]) -> None:
        texts = [text for request in requests for text in request.texts]
        try:
            vectors = list(await self._inner.embed(texts))
            if len(vectors) != len(texts):
                raise MemoryUnavailableError(
                    f"the embedder {self.identity} returned {len(vectors)} vectors for "
                    f"{len(texts)} texts")
        except Exception as exc:
            if len(requests) == 1 or isinstance(exc, MemoryUnavailableError):
                for request in requests:
                    _settle(request, error=exc)
                return
            for request in requests:  # find the text that failed; the others succeed
                try:
                    _settle(request, vectors=await self._inner.embed(request.texts))
                except Exception as alone:
                    _settle(request, error=alone)
            return
        start = 0
        for request in requests:
            _settle(request, vectors=vectors[start:start + len(request.texts)])
            start += len(request.texts)


def _settle(request: _Pending, *, vectors: Sequence[Sequence[float]] | None = None,
            error: BaseException | None = None) -> None:
    if request.future.done():
        return
    if error is not None:
        request.future.set_exception(error)
    else:
        assert vectors is not None
        request.future.set_result(vectors)
