"""The in-memory vector stores a scope's index scans: faiss when it is installed, else numpy.

Both keep rows in positions ``0 .. size-1`` and score a query against all of them; what
they hold is a copy of the stored vectors, never the source of any score a search
returns (storage rescores every candidate exactly). Two things matter here:

- **speed**: faiss's ``IndexScalarQuantizer`` with ``QT_fp16`` keeps each vector as 16-bit
  floats and scans them with SIMD (4-5 ms per query over 100k 384-d vectors on one core
  here, half the memory of float32, no training, nothing derived from the data). Graph
  indexes (HNSW in faiss, hnswlib and usearch) were measured too: on the scale bench's
  vectors they stay below recall@10 0.95 at 100k even at 5 ms per query, and take 45-110 s
  to build (see docs/retrieval.md). numpy's float32 matrix product is the fallback
  without faiss: exact, about 2-4 times slower, twice the memory.
- **erasure**: removing a row overwrites it in place (the last rows move into the holes,
  the vacated tail is zeroed, then truncated), so no erased vector stays in the store's
  buffer, its spare capacity included. :meth:`wipe` zeroes everything before release.

Scores differ from the exact float64 cosine by at most :data:`SCORE_ERROR`: fp16 rounds
each component to within 2**-11 of its value, so by Cauchy-Schwarz the dot product of
two unit vectors moves by at most 2**-11 (4.9e-4), plus float32 accumulation (~2e-5).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol

from governed_memory.errors import MemoryStorageError

from governed_memory_native.retrieval.numeric import deferred

if TYPE_CHECKING:
    import numpy as np
else:
    np = deferred(globals())

SCORE_ERROR: Final = 1e-3
"""An upper bound on |engine score - exact cosine| for unit vectors (twice the fp16
bound above, to spare any doubt)."""

_faiss_lock = threading.Lock()
_faiss_module: Any = None
_faiss_missing = False


def faiss_module() -> Any | None:
    """faiss, imported on first use (it is the optional ``ann`` extra), or ``None``.

    On first import its OpenMP pool is set to one thread, for the whole process: a
    single-query scan runs 3-4 times slower on two spinning threads here than on one,
    and those threads take the core the event loop needs.
    """
    global _faiss_module, _faiss_missing
    with _faiss_lock:
        if _faiss_module is None and not _faiss_missing:
            try:
                import faiss
            except ImportError:
                _faiss_missing = True
                return None
            faiss.omp_set_num_threads(1)
            _faiss_module = faiss
        return _faiss_module


class VectorEngine(Protocol):
    name: str

    @property
    def size(self) -> int: ...

    def add(self, vectors: np.ndarray) -> None:
        """Append rows (float32, unit length) at positions ``size ..``."""
        ...

    def remove(self, positions: Sequence[int]) -> list[tuple[int, int]]:
        """Remove rows, overwriting them; returns ``(from, to)`` for each row that moved."""
        ...

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Positions and scores of the ``k`` best rows, score descending."""
        ...

    def rows(self) -> np.ndarray:
        """A float32 copy of the rows (inspection and tests)."""
        ...

    def wipe(self) -> None:
        """Zero every row and release the memory."""
        ...


def new_engine(dimension: int) -> VectorEngine:
    faiss = faiss_module()
    return NumpyEngine(dimension) if faiss is None else FaissEngine(faiss, dimension)


def engine_name() -> str:
    faiss = faiss_module()
    return "numpy-exact" if faiss is None else f"faiss-{faiss.__version__}-fp16"


def matrix_of(blobs: Sequence[bytes], dimension: int) -> np.ndarray:
    """Stored vectors (little-endian float32 bytes) as one float32 matrix."""
    width = 4 * dimension
    if any(len(blob) != width for blob in blobs):
        raise MemoryStorageError("a stored vector has the wrong dimension")
    flat = np.frombuffer(b"".join(blobs), dtype="<f4")
    return flat.reshape(len(blobs), dimension).astype(np.float32)


def _moves(size: int, positions: Sequence[int]) -> tuple[int, list[tuple[int, int]]]:
    """Removing ``positions``: the new size, and which tail rows fill which holes."""
    doomed = set(positions)
    kept = size - len(doomed)
    holes = sorted(p for p in doomed if p < kept)
    movers = [p for p in range(kept, size) if p not in doomed]
    return kept, list(zip(movers, holes, strict=True))


class FaissEngine:
    """Rows as fp16 codes in a faiss ``IndexScalarQuantizer`` (inner product)."""

    name = "faiss-fp16"

    def __init__(self, faiss: Any, dimension: int) -> None:
        self._faiss = faiss
        self._dimension = dimension
        self._index = faiss.IndexScalarQuantizer(
            dimension, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT)

    @property
    def size(self) -> int:
        return int(self._index.ntotal)

    def _codes(self) -> np.ndarray:
        """The index's code buffer as writable fp16 rows (a view, not a copy)."""
        size = self.size
        if size == 0:
            return np.zeros((0, self._dimension), dtype=np.float16)
        raw = self._faiss.rev_swig_ptr(self._index.codes.data(), size * self._index.code_size)
        return np.asarray(raw).view(np.float16).reshape(size, self._dimension)

    def add(self, vectors: np.ndarray) -> None:
        if len(vectors):
            self._index.add(np.ascontiguousarray(vectors, dtype=np.float32))

    def remove(self, positions: Sequence[int]) -> list[tuple[int, int]]:
        if not positions:
            return []
        size = self.size
        kept, moves = _moves(size, positions)
        codes = self._codes()
        for source, target in moves:
            codes[target] = codes[source]
        codes[kept:] = 0
        self._index.remove_ids(self._faiss.IDSelectorRange(kept, size))
        return moves

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        k = min(k, self.size)
        if k <= 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        scores, positions = self._index.search(query.reshape(1, -1).astype(np.float32), k)
        chosen = positions[0] >= 0
        return positions[0][chosen], scores[0][chosen]

    def rows(self) -> np.ndarray:
        return self._codes().astype(np.float32)

    def buffer(self) -> np.ndarray:
        """The code buffer itself, as bytes (tests look for erased vectors in it)."""
        return self._codes().view(np.uint8).copy()

    def wipe(self) -> None:
        self._codes()[:] = 0
        self._index.reset()


class NumpyEngine:
    """Rows in a float32 matrix that grows by doubling; exact scores."""

    name = "numpy-exact"

    def __init__(self, dimension: int) -> None:
        self._dimension = dimension
        self._rows = np.zeros((0, dimension), dtype=np.float32)
        self._size = 0

    @property
    def size(self) -> int:
        return self._size

    def add(self, vectors: np.ndarray) -> None:
        needed = self._size + len(vectors)
        if needed > len(self._rows):
            grown = np.zeros((max(needed, 2 * len(self._rows), 64), self._dimension),
                             dtype=np.float32)
            grown[:self._size] = self._rows[:self._size]
            self._rows[:] = 0  # the old buffer goes back to the allocator zeroed
            self._rows = grown
        self._rows[self._size:needed] = vectors
        self._size = needed

    def remove(self, positions: Sequence[int]) -> list[tuple[int, int]]:
        if not positions:
            return []
        kept, moves = _moves(self._size, positions)
        for source, target in moves:
            self._rows[target] = self._rows[source]
        self._rows[kept:self._size] = 0
        self._size = kept
        return moves

    def search(self, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        k = min(k, self._size)
        if k <= 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        scores = self._rows[:self._size] @ query.astype(np.float32)
        chosen = (np.argpartition(-scores, k - 1)[:k] if k < self._size
                  else np.arange(self._size))
        order = chosen[np.argsort(-scores[chosen], kind="stable")]
        return order.astype(np.int64), scores[order]

    def rows(self) -> np.ndarray:
        return self._rows[:self._size].copy()

    def buffer(self) -> np.ndarray:
        """The whole buffer, spare capacity included, as bytes (tests look for erased
        vectors in it)."""
        return self._rows.view(np.uint8).copy()

    def wipe(self) -> None:
        self._rows[:] = 0
        self._rows = np.zeros((0, self._dimension), dtype=np.float32)
        self._size = 0
