"""The native provider's indexing-outbox settings (part of its profile config).

They live beside, not inside, the backend settings: every backend runs the same outbox,
so the retry budget is a property of the provider, read once by the factory.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

import attrs
from governed_memory.errors import MemoryConfigurationError

INDEX_KEYS: Final = frozenset({"index_max_attempts", "index_backoff_s",
                               "snapshot_retention_s"})
MAX_ATTEMPTS: Final = 100
MAX_BACKOFF_S: Final = 3600.0


@attrs.frozen(slots=True)
class IndexingConfig:
    max_attempts: int = 5
    """Attempts an index job gets (each lease counts one) before it is dead-lettered."""
    backoff_s: float = 1.0
    """The first retry's delay; each later one doubles it, up to five minutes."""
    snapshot_retention_s: float = 30 * 86_400.0
    """How long a retrieval snapshot stays replayable; older ones are removed as new
    ones are stored (a bounded number each time)."""


def parse_indexing_config(raw: Mapping[str, Any]) -> IndexingConfig:
    values: dict[str, Any] = {}
    if "index_max_attempts" in raw:
        value = raw["index_max_attempts"]
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_ATTEMPTS:
            raise MemoryConfigurationError(
                f"index_max_attempts: must be an integer from 1 to {MAX_ATTEMPTS}")
        values["max_attempts"] = value
    if "index_backoff_s" in raw:
        value = raw["index_backoff_s"]
        if (isinstance(value, bool) or not isinstance(value, int | float)
                or not math.isfinite(value) or not 0 <= value <= MAX_BACKOFF_S):
            raise MemoryConfigurationError(
                f"index_backoff_s: must be a number of seconds from 0 to {MAX_BACKOFF_S:g}")
        values["backoff_s"] = float(value)
    if "snapshot_retention_s" in raw:
        value = raw["snapshot_retention_s"]
        if (isinstance(value, bool) or not isinstance(value, int | float)
                or not math.isfinite(value) or not value > 0):
            raise MemoryConfigurationError(
                "snapshot_retention_s: must be a positive number of seconds")
        values["snapshot_retention_s"] = float(value)
    return IndexingConfig(**values)
