"""The provider's profile config, checked strictly and without touching the filesystem.

A typo in a profile (``busy_timeout`` for ``busy_timeout_ms``) must stop start-up with the
key named, not silently fall back to a default that changes durability or locking.

The indexing-outbox settings live beside, not inside, the backend settings: every backend
runs the same outbox, so the retry budget is a property of the provider, read once by the
factory.
"""

from __future__ import annotations

import enum
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
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
    (see :mod:`sqlite.lexical`). Every search reads its scopes' delta, so this bounds
    what a search pays for what writes saved. ``0`` indexes every write directly."""
    ranking_processes: int | None = None
    """SQLite and PostgreSQL: worker processes that rank lexical searches
    (:mod:`retrieval.ranking.pool`), started once a search examines enough records to be worth
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

HOME_ENV: Final = "GOVERNED_MEMORY_HOME"
DEFAULT_BUSY_TIMEOUT_MS: Final = 5_000
MAX_BUSY_TIMEOUT_MS: Final = 600_000
POSTGRES_DSN_ENV: Final = "GOVERNED_MEMORY_POSTGRES_DSN"
DEFAULT_POSTGRES_SCHEMA: Final = "governed_memory"
DEFAULT_POOL_MIN_SIZE: Final = 1
DEFAULT_POOL_MAX_SIZE: Final = 10
MAX_POOL_SIZE: Final = 1_000
POSTGRES_KEYS: Final = frozenset({"dsn", "schema", "pool_min_size", "pool_max_size"})
KNOWN_KEYS: Final = (frozenset({"backend", "path", "busy_timeout_ms"}) | POSTGRES_KEYS
                    | INDEX_KEYS)


class BackendKind(enum.StrEnum):
    SQLITE = "sqlite"
    MEMORY = "memory"
    POSTGRES = "postgres"


@attrs.frozen(slots=True)
class NativeConfig:
    backend: BackendKind = BackendKind.SQLITE
    path: Path | None = None
    """The SQLite file; ``None`` for the memory backend."""
    busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS
    dsn: str | None = attrs.field(default=None, repr=False)
    """The PostgreSQL connection string (may hold a password: never in a repr or error)."""
    schema: str = DEFAULT_POSTGRES_SCHEMA
    """The PostgreSQL schema that holds the tables; created on start if missing."""
    pool_min_size: int = DEFAULT_POOL_MIN_SIZE
    pool_max_size: int = DEFAULT_POOL_MAX_SIZE


def default_path(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    home = env.get(HOME_ENV)
    base = Path(home) if home else Path(".governed-memory")
    return base / "memory.db"


def parse_config(raw: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> NativeConfig:
    if not isinstance(raw, Mapping):
        raise MemoryConfigurationError("native provider config must be a mapping")
    unknown = sorted(str(key) for key in raw if key not in KNOWN_KEYS)
    if unknown:
        raise MemoryConfigurationError(
            f"unknown native provider config key(s): {', '.join(unknown)}; "
            f"known: {', '.join(sorted(KNOWN_KEYS))}"
        )
    backend = _backend(raw.get("backend", BackendKind.SQLITE.value))
    busy = _busy_timeout(raw.get("busy_timeout_ms", DEFAULT_BUSY_TIMEOUT_MS))
    if backend is BackendKind.POSTGRES:
        return _postgres_config(raw, busy, environ)
    misplaced = sorted(str(key) for key in raw if key in POSTGRES_KEYS)
    if misplaced:
        raise MemoryConfigurationError(
            f"{misplaced[0]}: only the postgres backend takes {', '.join(misplaced)}"
        )
    if backend is BackendKind.MEMORY:
        if "path" in raw:
            raise MemoryConfigurationError("path: only the sqlite backend stores a file")
        return NativeConfig(backend=backend, path=None, busy_timeout_ms=busy)
    path = _path(raw["path"]) if "path" in raw else default_path(environ)
    return NativeConfig(backend=backend, path=path, busy_timeout_ms=busy)


def _backend(value: object) -> BackendKind:
    if not isinstance(value, str):
        raise MemoryConfigurationError(
            "backend: must be a string ('sqlite', 'memory' or 'postgres')"
        )
    try:
        return BackendKind(value)
    except ValueError:
        raise MemoryConfigurationError(
            f"backend: {value!r} is not one of 'sqlite', 'memory', 'postgres'"
        ) from None


def _postgres_config(raw: Mapping[str, Any], busy: int,
                     environ: Mapping[str, str] | None) -> NativeConfig:
    """The dsn comes from the profile or, failing that, ``GOVERNED_MEMORY_POSTGRES_DSN``
    (so a profile can name the backend without carrying a password)."""
    if "path" in raw:
        raise MemoryConfigurationError("path: the postgres backend takes a dsn, not a path")
    env = os.environ if environ is None else environ
    dsn = raw["dsn"] if "dsn" in raw else env.get(POSTGRES_DSN_ENV)
    if dsn is None:
        raise MemoryConfigurationError(
            f"dsn: the postgres backend needs a dsn (in the config or {POSTGRES_DSN_ENV})"
        )
    if not isinstance(dsn, str) or not dsn.strip() or "\x00" in dsn:
        raise MemoryConfigurationError("dsn: must be a non-empty connection string")
    schema = raw.get("schema", DEFAULT_POSTGRES_SCHEMA)
    _check_schema(schema)
    low = _pool_size(raw.get("pool_min_size", DEFAULT_POOL_MIN_SIZE), "pool_min_size", 0)
    high = _pool_size(raw.get("pool_max_size", max(DEFAULT_POOL_MAX_SIZE, low)),
                      "pool_max_size", 1)
    if low > high:
        raise MemoryConfigurationError(
            f"pool_min_size: {low} is more than pool_max_size ({high})"
        )
    return NativeConfig(backend=BackendKind.POSTGRES, path=None, busy_timeout_ms=busy,
                        dsn=dsn, schema=schema, pool_min_size=low, pool_max_size=high)


_SCHEMA_NAME: Final = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def _check_schema(value: object) -> None:
    if not isinstance(value, str) or _SCHEMA_NAME.fullmatch(value) is None:
        raise MemoryConfigurationError(
            "schema: must be a lower-case PostgreSQL identifier (letters, digits and _, "
            "at most 63 characters, not starting with a digit)"
        )
    if value.startswith("pg_"):
        raise MemoryConfigurationError("schema: names starting with pg_ are reserved")


def _pool_size(value: object, field: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise MemoryConfigurationError(f"{field}: must be an integer")
    if not minimum <= value <= MAX_POOL_SIZE:
        raise MemoryConfigurationError(
            f"{field}: must be between {minimum} and {MAX_POOL_SIZE}, got {value}"
        )
    return value


def _path(value: object) -> Path:
    if not isinstance(value, str | os.PathLike):
        raise MemoryConfigurationError("path: must be a filesystem path string")
    text = os.fspath(value)
    if not isinstance(text, str) or not text.strip() or "\x00" in text:
        raise MemoryConfigurationError("path: must be a non-empty filesystem path")
    if text == ":memory:" or text.startswith("file:"):
        raise MemoryConfigurationError(
            "path: must name a file; use backend = 'memory' for non-durable storage"
        )
    return Path(text)


def _busy_timeout(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise MemoryConfigurationError("busy_timeout_ms: must be an integer of milliseconds")
    if not 0 <= value <= MAX_BUSY_TIMEOUT_MS:
        raise MemoryConfigurationError(
            f"busy_timeout_ms: must be between 0 and {MAX_BUSY_TIMEOUT_MS}, got {value}"
        )
    return value
