"""Retrieval, written once for every backend: the analyzer, BM25 and the exact lexical
top-k, vectors and their indexes, fusion of the signals, ranking in worker processes,
the indexing outbox that gives records their vectors, and retrieval snapshots for replay.

Before the package was arranged in rooms, ``governed_memory_native.retrieval`` was the
fusion module; this package took its name, so its names (``fuse``, ``Fused``, …) are
still answered here, with a ``DeprecationWarning`` naming :mod:`retrieval.fusion`.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any, Final

_FUSION: Final = frozenset({"Fused", "fuse", "needs_records", "lexical_only", "pool_size",
                            "LEXICAL", "VECTOR", "RECENCY", "IMPORTANCE", "TIE_BREAK"})


def __getattr__(name: str) -> Any:
    if name not in _FUSION:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(f"{__name__}.{name} moved to {__name__}.fusion; import it from there",
                  DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module(f"{__name__}.fusion"), name)
