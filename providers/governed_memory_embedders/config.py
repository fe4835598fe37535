"""Strict configuration for the built-in embedders, checked without loading a model.

A misspelt key (``threads`` for ``intra_op_num_threads``) must stop start-up with the key
named: a silent default would change speed, or worse, which vectors a store holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import attrs
from governed_memory.errors import MemoryConfigurationError

HASHING_DIMENSION: Final = (8, 8192)
THREADS: Final = (1, 64)
BATCH_SIZE: Final = (1, 1024)


@attrs.frozen(slots=True)
class HashingConfig:
    dimension: int = 384
    """384 by default so a test profile can stand in for MiniLM without a schema change."""


@attrs.frozen(slots=True)
class MiniLMConfig:
    intra_op_num_threads: int = 1
    """ONNX Runtime threads per inference; under CPU contention one was faster."""
    batch_size: int = 32
    """Texts per model call; a larger batch pads more, a smaller one calls more often."""
    model_path: Path | None = None
    """An ``model.onnx`` placed by hand; default: the one the embeddings extra installs."""
    tokenizer_path: Path | None = None
    """A ``tokenizer.json`` placed by hand; default: the one the embeddings extra installs."""


def parse_hashing_config(raw: Mapping[str, Any]) -> HashingConfig:
    _known(raw, "hashing", {"dimension"})
    values: dict[str, Any] = {}
    if "dimension" in raw:
        values["dimension"] = _int(raw["dimension"], "dimension", HASHING_DIMENSION)
    return HashingConfig(**values)


def parse_minilm_config(raw: Mapping[str, Any]) -> MiniLMConfig:
    _known(raw, "minilm", {"intra_op_num_threads", "batch_size", "model_path", "tokenizer_path"})
    values: dict[str, Any] = {}
    if "intra_op_num_threads" in raw:
        values["intra_op_num_threads"] = _int(raw["intra_op_num_threads"],
                                              "intra_op_num_threads", THREADS)
    if "batch_size" in raw:
        values["batch_size"] = _int(raw["batch_size"], "batch_size", BATCH_SIZE)
    for name in ("model_path", "tokenizer_path"):
        if name in raw:
            values[name] = _file(raw[name], name)
    return MiniLMConfig(**values)


def _known(raw: Mapping[str, Any], kind: str, known: set[str]) -> None:
    if not isinstance(raw, Mapping):
        raise MemoryConfigurationError(f"{kind} embedder config must be a mapping")
    unknown = sorted(str(key) for key in raw if key not in known)
    if unknown:
        raise MemoryConfigurationError(
            f"unknown {kind} embedder config key(s): {', '.join(unknown)}; "
            f"known: {', '.join(sorted(known))}")


def _int(value: object, name: str, bounds: tuple[int, int]) -> int:
    low, high = bounds
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise MemoryConfigurationError(f"{name}: must be an integer from {low} to {high}")
    return value


def _file(value: object, name: str) -> Path:
    if not isinstance(value, str | Path) or not str(value).strip():
        raise MemoryConfigurationError(f"{name}: must be a non-empty path")
    path = Path(value).expanduser()
    if not path.is_file():
        raise MemoryConfigurationError(f"{name}: {path} is not a file")
    return path
