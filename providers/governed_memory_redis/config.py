"""The Redis store's configuration, checked strictly and without connecting.

A misspelt key in a profile (``timeout`` for ``socket_timeout_s``) must stop start-up
with the key named rather than leave the cache on a default that behaves differently.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Any, Final

import attrs
from governed_memory.errors import MemoryConfigurationError

URL_ENV: Final = "GOVERNED_MEMORY_REDIS_URL"
DEFAULT_URL: Final = "redis://127.0.0.1:6379/0"
DEFAULT_PREFIX: Final = "gm:cache:"


@attrs.frozen(slots=True)
class RedisStoreConfig:
    url: str = DEFAULT_URL
    key_prefix: str = DEFAULT_PREFIX
    """Every key the store writes starts with this, so one Redis can hold several
    deployments (and a test can clean up exactly its own keys)."""
    max_value_bytes: int = 1024 * 1024
    max_ttl_s: float = 3600.0
    """An entry never lives longer than this, whatever TTL the wrapper asks for."""
    max_connections: int = 32
    socket_timeout_s: float = 0.25
    connect_timeout_s: float = 0.25
    retries: int = 1
    """Retries of a command after a connection error or timeout (a pooled connection
    may have been dropped); more would only delay the bypass during an outage."""


_INTS: Final = {"max_value_bytes": (1, 512 * 1024 * 1024), "max_connections": (1, 10_000),
                "retries": (0, 5)}
_FLOATS: Final = {"max_ttl_s": (0.001, 30 * 86400.0), "socket_timeout_s": (0.001, 60.0),
                  "connect_timeout_s": (0.001, 60.0)}


def parse_redis_config(raw: Mapping[str, Any],
                       environ: Mapping[str, str] | None = None) -> RedisStoreConfig:
    """Build a config from a profile's ``cache`` store section; the URL defaults to
    ``$GOVERNED_MEMORY_REDIS_URL``, then to the local server."""
    return RedisStoreConfig(**read_config(raw, "cache store", _INTS, _FLOATS,
                                          default_prefix=DEFAULT_PREFIX, environ=environ))


def read_config(raw: Mapping[str, Any], what: str, ints: Mapping[str, tuple[int, int]],
                floats: Mapping[str, tuple[float, float]], *, default_prefix: str,
                environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A Redis-backed store's table, strictly: ``url`` (default
    ``$GOVERNED_MEMORY_REDIS_URL``, then the local server), ``key_prefix``, and the
    bounded integers and seconds the store names; an unknown key or a value out of its
    bounds is a ``MemoryConfigurationError`` naming the key. The one reader of the cache
    store and the rate store (:mod:`governed_memory_redis.rates`)."""
    if not isinstance(raw, Mapping):
        raise MemoryConfigurationError(f"redis {what} config must be a table")
    known = {"url", "key_prefix", *ints, *floats}
    unknown = sorted(str(key) for key in raw if key not in known)
    if unknown:
        raise MemoryConfigurationError(
            f"unknown redis {what} config key(s): {', '.join(unknown)}; "
            f"known: {', '.join(sorted(known))}")
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {
        "url": _text(raw.get("url", env.get(URL_ENV) or DEFAULT_URL), "url"),
        "key_prefix": _text(raw.get("key_prefix", default_prefix), "key_prefix"),
    }
    for name, (low, high) in ints.items():
        if name in raw:
            value = raw[name]
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise MemoryConfigurationError(f"{name}: must be an integer from {low} to {high}")
            values[name] = value
    for name, (low_f, high_f) in floats.items():
        if name in raw:
            value = raw[name]
            if (isinstance(value, bool) or not isinstance(value, int | float)
                    or not math.isfinite(value) or not low_f <= value <= high_f):
                raise MemoryConfigurationError(
                    f"{name}: must be a number of seconds from {low_f:g} to {high_f:g}")
            values[name] = float(value)
    return values


def _text(value: object, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise MemoryConfigurationError(f"{name}: must be a non-empty string")
    if name == "key_prefix" and ("{" in value or "}" in value):
        raise MemoryConfigurationError("key_prefix: braces are reserved for the tenant hash tag")
    return value
