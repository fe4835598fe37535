"""The input rule every built-in embedder applies before doing any work."""

from __future__ import annotations

from collections.abc import Sequence

from governed_memory.errors import MemoryValidationError


def check_texts(texts: Sequence[str]) -> tuple[str, ...]:
    """A tuple of the texts; a bare string or a non-string item is a caller's mistake that
    would otherwise embed characters one by one, or fail deep inside a model."""
    if isinstance(texts, str | bytes) or not isinstance(texts, Sequence):
        raise MemoryValidationError("texts must be a sequence of strings", field="texts")
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise MemoryValidationError(
                f"texts[{index}] must be a string, got {type(text).__name__}", field="texts")
    return tuple(texts)
