"""Redis for the tests that need the server (the search cache's, the rate windows'): the
gate (skip, or fail under ``CI=true``), a key prefix per test and its cleanup."""

from __future__ import annotations

import os
import uuid

import pytest

REDIS_URL = os.environ.get("GOVERNED_MEMORY_REDIS_URL", "redis://127.0.0.1:6379/0")

_redis_state: dict[str, str | None] = {}


def redis_unavailable_reason() -> str | None:
    """None when Redis answers at ``GOVERNED_MEMORY_REDIS_URL``, else why not."""
    if "reason" not in _redis_state:
        try:
            import redis

            client = redis.Redis.from_url(REDIS_URL, socket_timeout=1, socket_connect_timeout=1)
            try:
                client.ping()
                _redis_state["reason"] = None
            finally:
                client.close()
        except ImportError:
            _redis_state["reason"] = "the redis package is not installed (pip install '.[redis]')"
        except Exception as exc:
            _redis_state["reason"] = f"Redis is not reachable at {REDIS_URL}: {exc}"
    return _redis_state["reason"]


def require_redis() -> str:
    """The server's URL; skips with the reason, or fails when ``CI=true``: CI must never
    skip silently."""
    reason = redis_unavailable_reason()
    if reason is not None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and {reason}", pytrace=False)
        pytest.skip(reason)
    return REDIS_URL


def require_redis_package() -> None:
    """For modules that import ``governed_memory_redis``: skip the module without the
    ``redis`` package, or fail it when ``CI=true``."""
    try:
        import redis  # noqa: F401
    except ImportError:
        reason = "the redis package is not installed (pip install '.[redis]')"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true and {reason}", pytrace=False)
        pytest.skip(reason, allow_module_level=True)


def unique_prefix(label: str = "t") -> str:
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
