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
                               "snapshot_retention_s", "vector_index_min_vectors",
                               "vector_index_max_vectors", "lexical_delta_max",
                               "ranking_processes"})
MAX_ATTEMPTS: Final = 100
MAX_BACKOFF_S: Final = 3600.0
DEFAULT_INDEX_MIN_VECTORS: Final = 500
DEFAULT_INDEX_MAX_VECTORS: Final = 1_000_000
MAX_INDEX_VECTORS: Final = 1_000_000_000
DEFAULT_LEXICAL_DELTA_MAX: Final = 64
MAX_LEXICAL_DELTA: Final = 10_000
MAX_RANKING_PROCESSES: Final = 64


@attrs.frozen(slots=True)
class IndexingConfig:
    max_attempts: int = 5
    """Attempts an index job gets (each lease counts one) before it is dead-lettered."""
    backoff_s: float = 1.0
    """The first retry's delay; each later one doubles it, up to five minutes."""
    snapshot_retention_s: float = 30 * 86_400.0
    """How long a retrieval snapshot stays replayable; older ones are removed as new
    ones are stored (a bounded number each time)."""
    vector_index_min_vectors: int = DEFAULT_INDEX_MIN_VECTORS
    """A scope with fewer stored vectors (of the configured embedder) is searched exactly
    in storage; from this many on, through an in-process vector index (measured: below
    it, reading the scope's vectors costs less than the index's own reads)."""
    vector_index_max_vectors: int = DEFAULT_INDEX_MAX_VECTORS
    """Vectors all in-process indexes may hold together; the least recently searched are
    dropped beyond it (and rebuilt from storage when searched again). A scope larger
    than this alone is searched exactly in storage."""
    lexical_delta_max: int = DEFAULT_LEXICAL_DELTA_MAX
    """SQLite: how many unmerged rows (new records' postings and tombstones) a scope's
    lexical delta may hold; a write that fills it schedules a merge into the main index
    (see :mod:`sqlite_lexical`). Every search reads its scopes' delta, so this bounds
    what a search pays for what writes saved. ``0`` indexes every write directly."""
    ranking_processes: int | None = None
    """SQLite and PostgreSQL: worker processes that rank lexical searches
    (:mod:`ranking_pool`), started once a search examines enough records to be worth
    moving. ``None`` ("auto"): two on a machine of two cores or more, none on one;
    ``0``: every search ranks in the provider's process."""


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
    for name in ("vector_index_min_vectors", "vector_index_max_vectors"):
        if name in raw:
            value = raw[name]
            if (isinstance(value, bool) or not isinstance(value, int)
                    or not 0 <= value <= MAX_INDEX_VECTORS):
                raise MemoryConfigurationError(
                    f"{name}: must be an integer from 0 to {MAX_INDEX_VECTORS:,}")
            values[name] = value
    if "lexical_delta_max" in raw:
        value = raw["lexical_delta_max"]
        if (isinstance(value, bool) or not isinstance(value, int)
                or not 0 <= value <= MAX_LEXICAL_DELTA):
            raise MemoryConfigurationError(
                f"lexical_delta_max: must be an integer from 0 to {MAX_LEXICAL_DELTA:,}")
        values["lexical_delta_max"] = value
    if "ranking_processes" in raw:
        value = raw["ranking_processes"]
        if value != "auto" and (isinstance(value, bool) or not isinstance(value, int)
                                or not 0 <= value <= MAX_RANKING_PROCESSES):
            raise MemoryConfigurationError(
                "ranking_processes: must be 'auto' or an integer from 0 to "
                f"{MAX_RANKING_PROCESSES}")
        values["ranking_processes"] = None if value == "auto" else value
    return IndexingConfig(**values)
