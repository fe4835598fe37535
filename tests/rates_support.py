"""Redis for the rate-window tests: the server gate (skip, or fail under ``CI=true``), a
key prefix per test and its cleanup. (The cache tests' helpers live in ``tests/cache``,
which is not on the path of tests elsewhere.)"""

from __future__ import annotations

import os
import uuid

import pytest

REDIS_URL = os.environ.get("GOVERNED_MEMORY_REDIS_URL", "redis://127.0.0.1:6379/0")

_state: dict[str, str | None] = {}


def redis_unavailable_reason() -> str | None:
    if "reason" not in _state:
        try:
            import redis

            client = redis.Redis.from_url(REDIS_URL, socket_timeout=1, socket_connect_timeout=1)
            try:
                client.ping()
                _state["reason"] = None
            finally:
                client.close()
        except ImportError:
            _state["reason"] = "the redis package is not installed (pip install '.[redis]')"
        except Exception as exc:
            _state["reason"] = f"Redis is not reachable at {REDIS_URL}: {exc}"
    return _state["reason"]


def require_redis() -> str:
    """The server's URL; skips with the reason, or fails when ``CI=true``."""
    reason = redis_unavailable_reason()
    if reason is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and {reason}", pytrace=False)
        pytest.skip(reason)
    return REDIS_URL


def unique_prefix(label: str = "rates") -> str:
    return f"gmtest:{label}:{uuid.uuid4().hex[:12]}:"


def delete_prefix(prefix: str) -> int:
    import redis

    if not prefix:
        raise ValueError("an empty prefix would match every key of the server")
    client = redis.Redis.from_url(REDIS_URL)
    try:
        keys = list(client.scan_iter(match=prefix + "*", count=1000))
        for start in range(0, len(keys), 500):
            client.delete(*keys[start:start + 500])
        return len(keys)
    finally:
        client.close()
