"""The store contract, held by the in-memory store and the Redis store alike."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from cache_support import REDIS_URL, delete_prefix, require_redis, unique_prefix
from governed_memory.cache import CacheStore, CacheValueTooLarge, InMemoryCacheStore

T = "tenanttag0"


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[CacheStore]:
    if request.param == "memory":
        yield InMemoryCacheStore(max_value_bytes=1000)
        return
    require_redis()
    from governed_memory_redis import RedisCacheStore, RedisStoreConfig

    prefix = unique_prefix("store")
    redis_store = RedisCacheStore(RedisStoreConfig(url=REDIS_URL, key_prefix=prefix,
                                                   max_value_bytes=1000))
    try:
        yield redis_store
    finally:
        await redis_store.close()
        delete_prefix(prefix)


async def test_absent_names_read_a_revision_and_no_value(store: CacheStore) -> None:
    found = await store.lookup(T, ["a", "epoch"], "d1", 100.0)
    assert len(found.revisions) == 2
    assert found.value is None and found.horizon is None


async def test_fill_then_lookup_returns_the_value(store: CacheStore) -> None:
    found = await store.lookup(T, ["a", "epoch"], "d1", 100.0)
    assert await store.fill(T, ["a", "epoch"], found.revisions, "d1", b"v1", 60)
    again = await store.lookup(T, ["a", "epoch"], "d1", 100.0)
    assert again.value == b"v1" and again.revisions == found.revisions
    other = await store.lookup(T, ["a", "epoch"], "d2", 100.0)
    assert other.value is None


async def test_bump_raises_every_name_and_hides_old_entries(store: CacheStore) -> None:
    before = await store.lookup(T, ["a", "b", "epoch"], "d1", 100.0)
    assert await store.fill(T, ["a", "b", "epoch"], before.revisions, "d1", b"v1", 60)
    await store.bump(T, ["b"], (), 100.0)
    after = await store.lookup(T, ["a", "b", "epoch"], "d1", 100.0)
    assert after.revisions[0] == before.revisions[0]
    assert after.revisions[1] > before.revisions[1]
    assert after.value is None


async def test_fill_refuses_when_any_revision_moved(store: CacheStore) -> None:
    before = await store.lookup(T, ["a", "b", "epoch"], "d1", 100.0)
    await store.bump(T, ["epoch"], (), 100.0)
    assert not await store.fill(T, ["a", "b", "epoch"], before.revisions, "d1", b"stale", 60)
    after = await store.lookup(T, ["a", "b", "epoch"], "d1", 100.0)
    assert after.value is None


async def test_revisions_are_monotonic_over_many_bumps(store: CacheStore) -> None:
    seen = []
    for _ in range(20):
        await store.bump(T, ["a"], (), 100.0)
        seen.append((await store.lookup(T, ["a"], "d", 100.0)).revisions[0])
    assert seen == sorted(seen) and len(set(seen)) == len(seen)


async def test_tenants_are_separate(store: CacheStore) -> None:
    before = await store.lookup("other", ["a"], "d1", 100.0)
    await store.bump(T, ["a"], (), 100.0)
    assert (await store.lookup("other", ["a"], "d1", 100.0)).revisions == before.revisions


async def test_expiry_marks_give_the_next_instant_after_now(store: CacheStore) -> None:
    await store.bump(T, ["a"], (150.0, 120.0), 100.0)
    await store.bump(T, ["b"], (130.0,), 100.0)
    assert (await store.lookup(T, ["a", "epoch"], "d", 100.0)).horizon == 120.0
    assert (await store.lookup(T, ["a", "b", "epoch"], "d", 100.0)).horizon == 120.0
    assert (await store.lookup(T, ["a", "b", "epoch"], "d", 120.0)).horizon == 130.0
    assert (await store.lookup(T, ["a", "b", "epoch"], "d", 140.0)).horizon == 150.0
    assert (await store.lookup(T, ["a", "b", "epoch"], "d", 150.0)).horizon is None


async def test_oversized_values_are_refused(store: CacheStore) -> None:
    found = await store.lookup(T, ["a"], "d1", 100.0)
    with pytest.raises(CacheValueTooLarge):
        await store.fill(T, ["a"], found.revisions, "d1", b"x" * 1001, 60)
    assert await store.fill(T, ["a"], found.revisions, "d1", b"x" * 1000, 60)


async def test_binary_values_round_trip(store: CacheStore) -> None:
    value = bytes(range(256)) + "é✓".encode()
    found = await store.lookup(T, ["a"], "d1", 100.0)
    assert await store.fill(T, ["a"], found.revisions, "d1", value, 60)
    assert (await store.lookup(T, ["a"], "d1", 100.0)).value == value
