"""Erasure with the Redis store (issue 14, defect 2): ``delete_user`` removes the
tenant's cached search results from Redis at once, through the tenant's entry index,
and the receipt counts them as ``cached_searches``."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from cache_support import REDIS_URL, make_ctx, require_redis_package
from governed_memory import Scope
from governed_memory.cache import CachedMemoryProvider, tenant_tag
from governed_memory.clock import ManualClock
from governed_memory.requests import AddRequest, DeleteUserRequest, SearchRequest
from governed_memory_native import build_native_provider

require_redis_package()

from governed_memory_redis import RedisCacheStore, RedisStoreConfig  # noqa: E402

ALICE_HOME = Scope("acme", user_id="alice")
ALICE_PROJECT = Scope("acme", project_id="p", user_id="alice")
BOB = Scope("acme", user_id="bob")
ELSEWHERE = Scope("globex", user_id="alice")


@pytest.fixture
async def cached(redis_prefix: str, clock: ManualClock) -> AsyncIterator[CachedMemoryProvider]:
    store = RedisCacheStore(RedisStoreConfig(url=REDIS_URL, key_prefix=redis_prefix))
    provider = CachedMemoryProvider(build_native_provider({"backend": "memory"}, clock), store,
                                    clock=clock, quarantine_retry_s=None)
    await provider.start()
    try:
        yield provider
    finally:
        await provider.close()


async def entry_keys(provider: CachedMemoryProvider, tenant: str) -> list[bytes]:
    store = provider.store
    assert isinstance(store, RedisCacheStore)
    pattern = f"{store.config.key_prefix}{{{tenant_tag(tenant)}}}:e:*"
    return [key async for key in store.client.scan_iter(match=pattern)]


async def test_delete_user_erases_the_tenants_cached_searches_and_counts_them(
        cached: CachedMemoryProvider, clock: ManualClock) -> None:
    for scope in (ALICE_HOME, ALICE_PROJECT, BOB, ELSEWHERE):
        await cached.add(AddRequest(scope=scope, content=f"green tea for {scope.user_id}"),
                         make_ctx(clock))
        found = await cached.search(SearchRequest(scopes=(scope,), query="green tea"),
                                    make_ctx(clock))
        assert found.hits
    assert len(await entry_keys(cached, "acme")) == 3
    receipt = await cached.delete_user(DeleteUserRequest(tenant_id="acme", user_id="alice"),
                                       make_ctx(clock))
    assert receipt.verify()
    assert (receipt.counts["records"], receipt.counts["cached_searches"]) == (2, 3)
    assert await entry_keys(cached, "acme") == [], "erased answers stayed in Redis"
    assert len(await entry_keys(cached, "globex")) == 1, "another tenant lost its entries"
    # Bob's next search is answered by the provider and cached again.
    again = await cached.search(SearchRequest(scopes=(BOB,), query="green tea"), make_ctx(clock))
    assert [hit.record.content for hit in again.hits] == ["green tea for bob"]
    assert len(await entry_keys(cached, "acme")) == 1
