"""Vectors as stored (little-endian float32 bytes) and exact cosine ranking over them.

Every backend stores the same bytes, so a vector read back from SQLite or PostgreSQL
ranks exactly as the in-memory one. An embedder promises unit vectors; they are checked
and normalised again here, because a vector that is not finite or has no length would
poison every later ranking silently.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from governed_memory.embedding import EmbedderIdentity
from governed_memory.errors import MemoryUnavailableError

from governed_memory_native.retrieval.numeric import deferred

if TYPE_CHECKING:
    import numpy as np
else:
    np = deferred(globals())

DTYPE: Final = "<f4"
"""Little-endian float32, as every backend stores vectors (a dtype string: naming it
does not import numpy)."""


class BadVectorError(MemoryUnavailableError):
    """The embedder returned something that is not a usable vector of its dimension."""


def encode(vector: Sequence[float], identity: EmbedderIdentity) -> bytes:
    """The unit vector as stored bytes; refuses a wrong dimension, NaN, inf or zero."""
    array = np.asarray(vector, dtype=np.float64)
    if array.shape != (identity.dimension,):
        raise BadVectorError(f"embedder {identity} returned a vector of shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise BadVectorError(f"embedder {identity} returned a non-finite vector")
    norm = float(np.linalg.norm(array))
    if norm == 0.0:
        raise BadVectorError(f"embedder {identity} returned a zero vector")
    return (array / norm).astype(DTYPE).tobytes()


def decode(blob: bytes, dimension: int) -> np.ndarray:
    array = np.frombuffer(blob, dtype=DTYPE)
    if array.shape != (dimension,):
        raise BadVectorError("a stored vector has the wrong dimension")
    return array


def cosine_ranking(query: bytes, candidates: Sequence[tuple[str, bytes]],
                   dimension: int, limit: int) -> list[tuple[str, float]]:
    """The ``limit`` most similar candidates: similarity descending, then id ascending.

    Exact: every candidate is scored, so nothing is missed that an approximate index
    might skip. Only candidates scoring at least the ``limit``-th best are sorted, ties
    at that boundary included, so the order stays total and stable without sorting them
    all.

    Each score is a function of its own row alone: ``einsum`` runs the same loop over
    every row, whereas a BLAS matrix product picks kernels by the number of rows, so a
    vector could score a last bit differently in a set of 1 than in a set of 3. Every
    backend, and a vector index's shortlist (see :mod:`retrieval.vector_index`), passes a
    different set of candidates for the same record: they must all score it alike.
    """
    if not candidates or limit <= 0:
        return []
    candidates = sorted(candidates, key=lambda item: item[0])
    matrix = np.frombuffer(b"".join(blob for _, blob in candidates), dtype=DTYPE)
    matrix = matrix.reshape(len(candidates), dimension).astype(np.float64)
    scores = np.einsum("ij,j->i", matrix, decode(query, dimension).astype(np.float64))
    if len(candidates) > limit:
        cutoff = np.partition(scores, len(candidates) - limit)[len(candidates) - limit]
        chosen = np.flatnonzero(scores >= cutoff)
    else:
        chosen = np.arange(len(candidates))
    ranked = sorted(((candidates[int(i)][0], float(scores[i])) for i in chosen),
                    key=lambda item: (-item[1], item[0]))
    return ranked[:limit]
