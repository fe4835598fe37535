"""The embedder contract: what a vector index needs to know to never mix two models.

A vector is only comparable with vectors of the same model, revision and dimension, so
an embedder declares all three and every stored vector records them; a store that finds
vectors of another identity re-embeds them instead of ranking across models.
Embedders are plugins (``register_embedders``); loading a model happens on first use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import attrs


@attrs.frozen(slots=True)
class EmbedderIdentity:
    """Which model produced a vector. Two vectors are comparable iff identities are equal."""

    id: str
    model_revision: str
    dimension: int

    def __str__(self) -> str:
        return f"{self.id}@{self.model_revision}/{self.dimension}"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised vectors of ``identity.dimension`` floats.

    ``embed`` takes a batch on purpose: one model call per text is the main cost seen in
    other memory systems. Implementations may run the model in a worker thread; they
    must be safe to call concurrently.
    """

    @property
    def identity(self) -> EmbedderIdentity: ...

    async def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        """One vector per text, in order; raises ``MemoryUnavailableError`` when the
        model cannot run (missing extra, failed load)."""
        ...

    async def close(self) -> None: ...
