"""The Redis gate for the store conformance classes: skip with the reason when Redis is
absent, fail instead when ``CI=true``; and removal of one test's key prefix."""

from __future__ import annotations

import os
import uuid

import pytest

REDIS_URL = os.environ.get("GOVERNED_MEMORY_REDIS_URL", "redis://127.0.0.1:6379/0")
_state: dict[str, str | None] = {}


def require_redis() -> None:
    if "reason" not in _state:
        try:
            import redis

            client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
            try:
                client.ping()
            finally:
                client.close()
            _state["reason"] = None
        except ImportError:
            _state["reason"] = "the redis package is not installed (pip install '.[redis]')"
        except Exception as exc:
            _state["reason"] = f"Redis is not reachable at {REDIS_URL}: {exc}"
    reason = _state["reason"]
    if reason is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)


def unique_prefix(label: str) -> str:
    return f"gmtest:{label}:{uuid.uuid4().hex[:12]}:"


async def delete_prefix(prefix: str) -> int:
    import redis.asyncio as redis_asyncio

    client = redis_asyncio.Redis.from_url(REDIS_URL)
    try:
        keys = [key async for key in client.scan_iter(match=prefix + "*", count=1000)]
        if keys:
            await client.delete(*keys)
        return len(keys)
    finally:
        await client.aclose()
