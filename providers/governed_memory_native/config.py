"""The provider's profile config, checked strictly and without touching the filesystem.

A typo in a profile (``busy_timeout`` for ``busy_timeout_ms``) must stop start-up with the
key named, not silently fall back to a default that changes durability or locking.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import attrs
from governed_memory.errors import MemoryConfigurationError

HOME_ENV: Final = "GOVERNED_MEMORY_HOME"
DEFAULT_BUSY_TIMEOUT_MS: Final = 5_000
MAX_BUSY_TIMEOUT_MS: Final = 600_000
KNOWN_KEYS: Final = frozenset({"backend", "path", "busy_timeout_ms"})


class BackendKind(enum.StrEnum):
    SQLITE = "sqlite"
    MEMORY = "memory"


@attrs.frozen(slots=True)
class NativeConfig:
    backend: BackendKind = BackendKind.SQLITE
    path: Path | None = None
    """The SQLite file; ``None`` for the memory backend."""
    busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS


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
    if backend is BackendKind.MEMORY:
        if "path" in raw:
            raise MemoryConfigurationError("path: only the sqlite backend stores a file")
        return NativeConfig(backend=backend, path=None, busy_timeout_ms=busy)
    path = _path(raw["path"]) if "path" in raw else default_path(environ)
    return NativeConfig(backend=backend, path=path, busy_timeout_ms=busy)


def _backend(value: object) -> BackendKind:
    if not isinstance(value, str):
        raise MemoryConfigurationError("backend: must be a string ('sqlite' or 'memory')")
    try:
        return BackendKind(value)
    except ValueError:
        raise MemoryConfigurationError(
            f"backend: {value!r} is not one of 'sqlite', 'memory'"
        ) from None


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
