"""What only the Redis store has: key layout, prefix, TTL, config parsing, the
connection pool and error mapping."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from cache_support import REDIS_URL, require_redis, require_redis_package
from governed_memory.cache import CacheStoreUnavailable, tenant_tag
from governed_memory.errors import MemoryConfigurationError

require_redis_package()

from governed_memory_redis import (  # noqa: E402
    RedisCacheStore,
    RedisStoreConfig,
    build_redis_store,
    parse_redis_config,
)


@pytest.fixture
async def store(redis_prefix: str) -> AsyncIterator[RedisCacheStore]:
    built = RedisCacheStore(RedisStoreConfig(url=REDIS_URL, key_prefix=redis_prefix,
                                             max_ttl_s=30))
    try:
        yield built
    finally:
        await built.close()


async def keys_of(store: RedisCacheStore) -> list[str]:
    # SCAN may return a key more than once (while the keyspace is rehashed): a set.
    found = {key.decode() async for key in store.client.scan_iter(
        match=store.config.key_prefix + "*")}
    return sorted(found)


async def test_keys_carry_the_prefix_the_tenant_hash_tag_and_no_query(
        store: RedisCacheStore) -> None:
    tag = tenant_tag("acme")
    await store.bump(tag, ["sh1:abc"], (5000.0,), 100.0)
    found = await store.lookup(tag, ["sh1:abc", "epoch"], "f" * 64, 100.0)
    await store.fill(tag, ["sh1:abc", "epoch"], found.revisions, "f" * 64, b"v", 10)
    keys = await keys_of(store)
    prefix = store.config.key_prefix + "{" + tag + "}:"
    assert keys == sorted([prefix + "r:sh1:abc", prefix + "x:sh1:abc",
                           prefix + "e:" + "f" * 64 + ":1.0", prefix + "i"])


async def test_entries_get_the_ttl_capped_by_max_ttl(store: RedisCacheStore) -> None:
    found = await store.lookup("t", ["a"], "d", 0.0)
    await store.fill("t", ["a"], found.revisions, "d", b"v", 10)
    await store.fill("t", ["a"], found.revisions, "d2", b"v", 10_000)
    short = await store.client.pttl(store.entry_key("t", "d", found.revisions))
    capped = await store.client.pttl(store.entry_key("t", "d2", found.revisions))
    assert 9_000 < short <= 10_000
    assert 29_000 < capped <= 30_000


async def test_revision_counters_do_not_expire_but_marks_do(store: RedisCacheStore) -> None:
    await store.bump("t", ["a"], (160.0,), 100.0)
    assert await store.client.pttl(store.revision_key("t", "a")) == -1
    ttl = await store.client.pttl(store.marks_key("t", "a"))
    assert 0 < ttl <= (60 + 3600) * 1000


async def test_prefixes_isolate_deployments(store: RedisCacheStore, redis_prefix: str) -> None:
    other = RedisCacheStore(RedisStoreConfig(url=REDIS_URL, key_prefix=redis_prefix + "other:"))
    try:
        before = await other.lookup("t", ["a"], "d", 0.0)
        await store.bump("t", ["a"], (), 0.0)
        assert (await other.lookup("t", ["a"], "d", 0.0)).revisions == before.revisions
    finally:
        await other.close()


async def test_an_unreachable_server_is_a_store_error_not_a_hang() -> None:
    require_redis()
    dead = RedisCacheStore(RedisStoreConfig(url="redis://127.0.0.1:1/0", connect_timeout_s=0.2,
                                            retries=0))
    try:
        with pytest.raises(CacheStoreUnavailable):
            await dead.lookup("t", ["a"], "d", 0.0)
        assert not await dead.ping()
    finally:
        await dead.close()


async def test_a_shared_client_is_not_closed_by_the_store(store: RedisCacheStore,
                                                          redis_prefix: str) -> None:
    borrowing = RedisCacheStore(RedisStoreConfig(key_prefix=redis_prefix), client=store.client)
    await borrowing.close()
    assert await store.ping()


def test_config_defaults_from_the_environment() -> None:
    config = parse_redis_config({}, environ={"GOVERNED_MEMORY_REDIS_URL": "redis://h:1/2"})
    assert config.url == "redis://h:1/2" and config.key_prefix == "gm:cache:"
    assert parse_redis_config({}, environ={}).url == "redis://127.0.0.1:6379/0"


def test_config_is_strict_and_names_the_key() -> None:
    with pytest.raises(MemoryConfigurationError, match="timeout"):
        parse_redis_config({"timeout": 1})
    with pytest.raises(MemoryConfigurationError, match="max_value_bytes"):
        parse_redis_config({"max_value_bytes": "big"})
    with pytest.raises(MemoryConfigurationError, match="socket_timeout_s"):
        parse_redis_config({"socket_timeout_s": float("nan")})
    with pytest.raises(MemoryConfigurationError, match="key_prefix"):
        parse_redis_config({"key_prefix": "a{b}"})
    with pytest.raises(MemoryConfigurationError, match="retries"):
        parse_redis_config({"retries": True})


def test_build_redis_store_does_no_io() -> None:
    built = build_redis_store({"url": "redis://127.0.0.1:1/0", "key_prefix": "x:",
                               "max_connections": 4, "socket_timeout_s": 0.5})
    assert built.config.max_connections == 4 and built.config.socket_timeout_s == 0.5
    assert built.name == "redis"


async def fill_entries(store: RedisCacheStore, tenant: str, count: int,
                       ttl_s: float = 10) -> None:
    for n in range(count):
        found = await store.lookup(tenant, ["a", "epoch"], f"d{n}", 0.0)
        assert await store.fill(tenant, ["a", "epoch"], found.revisions, f"d{n}", b"v", ttl_s)


async def test_erase_tenant_removes_and_counts_exactly_that_tenants_entries(
        store: RedisCacheStore) -> None:
    await fill_entries(store, "doomed", 600)  # more than one erasure batch
    await fill_entries(store, "kept", 3)
    assert await store.erase_tenant("doomed") == 600
    left = await keys_of(store)
    assert not [key for key in left if "{doomed}:e:" in key or key.endswith("{doomed}:i")]
    assert len([key for key in left if "{kept}:e:" in key]) == 3
    assert await store.erase_tenant("doomed") == 0
    assert await store.erase_tenant("never-filled") == 0


async def test_the_index_forgets_expired_entries_and_expires_itself(
        store: RedisCacheStore) -> None:
    await fill_entries(store, "t", 5, ttl_s=0.05)
    await asyncio.sleep(0.1)
    await fill_entries(store, "t", 1, ttl_s=10)  # a fill trims what has expired
    assert await store.client.zcard(store.index_key("t")) == 1
    index_ttl = await store.client.pttl(store.index_key("t"))
    assert 9_000 < index_ttl <= 10_000, "the index lives as long as its longest entry"
    assert await store.erase_tenant("t") == 1  # expired entries are not counted
