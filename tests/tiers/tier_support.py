"""Service gates for the tier store tests: skip with the reason when Redis is absent,
fail instead when ``CI=true``."""

from __future__ import annotations

import os
import uuid

import pytest

REDIS_URL = os.environ.get("GOVERNED_MEMORY_REDIS_URL", "redis://127.0.0.1:6379/0")
_state: dict[str, str | None] = {}


def _fail_or_skip(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)


def require_redis() -> None:
    if "redis" not in _state:
        try:
            import redis

            redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
            _state["redis"] = None
        except ImportError:
            _state["redis"] = "the redis package is not installed (pip install '.[redis]')"
        except Exception as exc:
            _state["redis"] = f"Redis is not reachable at GOVERNED_MEMORY_REDIS_URL: {exc}"
    reason = _state["redis"]
    if reason is not None:
        _fail_or_skip(reason)


def unique_prefix() -> str:
    return f"gmtest:ws:{uuid.uuid4().hex[:12]}:"


def delete_prefix(prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    try:
        keys = list(client.scan_iter(match=prefix + "*", count=1000))
        if keys:
            client.delete(*keys)
    finally:
        client.close()
