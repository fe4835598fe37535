"""Working-state stores: merge and replace, TTL by the injected clock and by Redis
itself, concurrent merges that lose nothing. Redis runs against the real server (skips
when absent, fails under CI=true)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from governed_memory import Scope
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryConfigurationError
from governed_memory.plugins import PluginManager
from governed_memory.tiers import InMemoryWorkingStateStore, WorkingStateStore
from tier_support import REDIS_URL, delete_prefix, require_redis, unique_prefix

RUN = Scope("acme", user_id="alice", session_id="s1", run_id="r1")
OTHER = RUN.replace(run_id="r2")


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[WorkingStateStore]:
    if request.param == "memory":
        yield InMemoryWorkingStateStore()
        return
    require_redis()
    prefix = unique_prefix()
    built = PluginManager.load().working_state_stores.get("redis").factory(
        {"url": REDIS_URL, "key_prefix": prefix}, ManualClock())
    await built.start()
    try:
        yield built
    finally:
        await built.close()
        delete_prefix(prefix)


async def test_update_merges_replace_swaps_clear_drops(store: WorkingStateStore) -> None:
    first = await store.update(RUN, {"step": "plan", "n": 1}, ttl_s=60, replace=False,
                               now=100.0)
    second = await store.update(RUN, {"n": 2, "nested": {"a": [1, 2]}}, ttl_s=60,
                                replace=False, now=110.0)
    assert (first.revision, second.revision) == (1, 2)
    assert dict(second.state) == {"step": "plan", "n": 2, "nested": {"a": [1, 2]}}
    assert second.expires_at == 170.0
    read = await store.read(RUN, 120.0)
    assert read is not None and read.state == second.state
    assert await store.read(OTHER, 120.0) is None
    replaced = await store.update(RUN, {"only": 1}, ttl_s=60, replace=True, now=130.0)
    assert dict(replaced.state) == {"only": 1}
    assert await store.clear(RUN) is True and await store.clear(RUN) is False
    assert await store.read(RUN, 130.0) is None


async def test_state_expires_at_its_ttl(store: WorkingStateStore) -> None:
    await store.update(RUN, {"a": 1}, ttl_s=30, replace=False, now=100.0)
    assert await store.read(RUN, 129.9) is not None
    assert await store.read(RUN, 130.0) is None
    # An expired state is not merged into the next one.
    fresh = await store.update(RUN, {"b": 2}, ttl_s=30, replace=False, now=131.0)
    assert dict(fresh.state) == {"b": 2} and fresh.revision == 1


async def test_concurrent_merges_lose_no_key(store: WorkingStateStore) -> None:
    await asyncio.gather(*(store.update(RUN, {f"k{i}": i}, ttl_s=60, replace=False,
                                        now=100.0) for i in range(30)))
    state = await store.read(RUN, 101.0)
    assert state is not None and dict(state.state) == {f"k{i}": i for i in range(30)}
    assert state.revision == 30


async def test_redis_expires_the_key_itself() -> None:
    require_redis()
    import redis.asyncio as redis_asyncio

    prefix = unique_prefix()
    store = PluginManager.load().working_state_stores.get("redis").factory(
        {"url": REDIS_URL, "key_prefix": prefix}, ManualClock())
    await store.start()
    client = redis_asyncio.Redis.from_url(REDIS_URL)
    try:
        await store.update(RUN, {"a": 1}, ttl_s=0.2, replace=False, now=100.0)
        assert await client.exists(prefix + RUN.scope_hash) == 1
        await asyncio.sleep(0.4)
        assert await client.exists(prefix + RUN.scope_hash) == 0
    finally:
        await client.aclose()
        await store.close()
        delete_prefix(prefix)


def test_bad_redis_config_is_refused() -> None:
    factory = PluginManager.load().working_state_stores.get("redis").factory
    with pytest.raises(MemoryConfigurationError, match="bogus"):
        factory({"bogus": 1}, ManualClock())
    with pytest.raises(MemoryConfigurationError, match="socket_timeout_s"):
        factory({"socket_timeout_s": 0}, ManualClock())
