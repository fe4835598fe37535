"""Pages checked against the provider's own scope revisions (issue 28, defect 1).

Two caches, each with a process-local in-memory store, over two native providers on one
store (a SQLite file, or one PostgreSQL schema) are two processes in everything that
matters here: neither store sees the other's writes. Every write or erasure through
either must make the other's cached pages unreachable at commit, and an erasure receipt
must never count what the erasing process cannot see.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from cache_support import REDIS_URL, CountingSink, make_ctx, require_redis_package
from governed_memory import Scope
from governed_memory.cache import CachedMemoryProvider, InMemoryCacheStore, tenant_tag
from governed_memory.clock import ManualClock
from governed_memory.events import EventBus
from governed_memory.requests import (
    AddRequest,
    DeleteAllRequest,
    DeleteRequest,
    DeleteUserRequest,
    PurgeExpiredRequest,
    SearchRequest,
    UpdateRequest,
)
from governed_memory_native import build_native_provider
from postgres_support import postgres_config

ALICE = Scope("acme", project_id="p", user_id="alice")
BOB = Scope("acme", project_id="p", user_id="bob")
SHARED = Scope("acme", project_id="p")


def sqlite_config(directory: Path) -> dict[str, Any]:
    return {"backend": "sqlite", "path": str(directory / "shared.db")}


BACKENDS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "sqlite": sqlite_config, "postgres": postgres_config}


class Node:
    """One "process": its own provider on the shared store, its own cache in memory."""

    def __init__(self, config: dict[str, Any], clock: ManualClock,
                 store: Any = None) -> None:
        self.sink = CountingSink(keep=True)
        self.store = store or InMemoryCacheStore()
        self.cache = CachedMemoryProvider(build_native_provider(config, clock), self.store,
                                          events=EventBus([self.sink]), clock=clock,
                                          quarantine_retry_s=None)

    async def search(self, clock: ManualClock, *scopes: Scope,
                     query: str = "tea") -> list[str]:
        result = await self.cache.search(SearchRequest(scopes=scopes or (ALICE,), query=query,
                                                       limit=20), make_ctx(clock))
        return sorted(hit.record.content for hit in result.hits)


@pytest.fixture(params=sorted(BACKENDS))
async def nodes(request: pytest.FixtureRequest, tmp_path: Path,
                clock: ManualClock) -> AsyncIterator[tuple[Node, Node]]:
    config = BACKENDS[request.param](tmp_path)
    first, second = Node(config, clock), Node(config, clock)
    await first.cache.start()
    await second.cache.start()
    try:
        yield first, second
    finally:
        await first.cache.close()
        await second.cache.close()


async def add(node: Node, clock: ManualClock, content: str, scope: Scope = ALICE,
              **fields: Any) -> Any:
    return await node.cache.add(AddRequest(scope=scope, content=content, **fields),
                                make_ctx(clock))


async def test_a_write_through_one_process_invalidates_the_others_pages(
        nodes: tuple[Node, Node], clock: ManualClock) -> None:
    a, b = nodes
    assert a.cache.checks_provider_revisions and b.cache.checks_provider_revisions
    record = await add(a, clock, "green tea")
    assert await b.search(clock) == ["green tea"]
    assert await b.search(clock) == ["green tea"]
    assert b.sink.count("hit") == 1
    writes: list[Any] = [
        lambda: add(a, clock, "black tea"),
        lambda: a.cache.update(UpdateRequest(scope=ALICE, record_id=record.id,
                                             content="jasmine tea"), make_ctx(clock)),
        lambda: a.cache.delete(DeleteRequest(scope=ALICE, record_id=record.id),
                               make_ctx(clock)),
        lambda: a.cache.delete_all(DeleteAllRequest(scope=ALICE), make_ctx(clock)),
    ]
    expected = [["black tea", "green tea"], ["black tea", "jasmine tea"], ["black tea"], []]
    for write, answer in zip(writes, expected, strict=True):
        await write()
        assert await b.search(clock) == answer, "b served a page from before a's write"
        assert await b.search(clock) == answer
    # Nothing on a's side had to reach b's store: there is no invalidation to send.
    assert a.sink.count("invalidate") == 0 and b.sink.count("quarantine") == 0


async def test_an_erasure_by_another_process_is_never_served_and_leaves_its_memory(
        nodes: tuple[Node, Node], clock: ManualClock) -> None:
    a, b = nodes
    await add(a, clock, "alice drinks green tea")
    await add(a, clock, "bob drinks black tea", scope=BOB)
    await add(a, clock, "the team drinks oolong tea", scope=SHARED)
    assert await b.search(clock) == ["alice drinks green tea"]
    assert await b.search(clock, BOB) == ["bob drinks black tea"]
    assert len(b.store) == 2
    receipt = await a.cache.delete_user(DeleteUserRequest(tenant_id="acme", user_id="alice"),
                                        make_ctx(clock))
    assert receipt.verify() and receipt.counts["records"] == 1
    # a's store is its own: it cannot know what b cached, so the receipt claims nothing.
    assert "cached_searches" not in receipt.counts
    assert await b.search(clock) == [], "b served the erased user's memory"
    # b saw the tenant's new epoch on that lookup and dropped every page of the tenant
    # it held (the erased content included), keeping only what it just computed.
    assert not any(b"alice drinks" in entry.value for entry in b.store._entries.values())
    assert await b.search(clock, BOB) == ["bob drinks black tea"]
    assert await b.search(clock, SHARED) == ["the team drinks oolong tea"]


async def test_a_page_ends_when_a_record_written_elsewhere_expires_or_becomes_valid(
        nodes: tuple[Node, Node], clock: ManualClock) -> None:
    """Time changes an answer without a write: the provider's horizon (the earliest
    expiry or validity instant in the scopes) ends the page, whoever wrote the record."""
    a, b = nodes
    now = clock.now()
    await add(a, clock, "green tea")
    await add(a, clock, "white tea", expires_at=now + 60)
    await add(a, clock, "oolong tea", valid_from=now + 120)
    assert await b.search(clock) == ["green tea", "white tea"]
    clock.advance(30)
    assert await b.search(clock) == ["green tea", "white tea"]
    assert b.sink.count("hit") == 1
    clock.advance(31)
    assert await b.search(clock) == ["green tea"]
    clock.advance(60)
    assert await b.search(clock) == ["green tea", "oolong tea"]
    await a.cache.purge_expired(PurgeExpiredRequest(scope=ALICE, limit=10), make_ctx(clock))
    assert await b.search(clock) == ["green tea", "oolong tea"]


async def test_revisions_that_cannot_be_read_bypass_and_the_provider_answers(
        nodes: tuple[Node, Node], clock: ManualClock) -> None:
    a, _ = nodes
    await add(a, clock, "green tea")

    class Failing:
        async def read(self, *args: Any) -> Any:
            raise OSError("storage went away")

    a.cache._scope_revisions = Failing()
    assert await a.search(clock) == ["green tea"]
    assert a.sink.count("bypassed", "revisions_unavailable") == 1


async def test_a_shared_store_counts_the_erased_pages_of_every_process(
        tmp_path: Path, clock: ManualClock, redis_prefix: str) -> None:
    require_redis_package()
    from governed_memory_redis import RedisCacheStore, RedisStoreConfig

    config = sqlite_config(tmp_path)
    a = Node(config, clock, RedisCacheStore(RedisStoreConfig(url=REDIS_URL,
                                                             key_prefix=redis_prefix)))
    b = Node(config, clock, RedisCacheStore(RedisStoreConfig(url=REDIS_URL,
                                                             key_prefix=redis_prefix)))
    await a.cache.start()
    await b.cache.start()
    try:
        await add(a, clock, "alice drinks green tea")
        await add(a, clock, "bob drinks black tea", scope=BOB)
        assert await b.search(clock) == ["alice drinks green tea"]
        assert await b.search(clock, BOB) == ["bob drinks black tea"]
        receipt = await a.cache.delete_user(
            DeleteUserRequest(tenant_id="acme", user_id="alice"), make_ctx(clock))
        # Both pages were b's, in the store every process shares: a removed them all.
        assert receipt.counts["cached_searches"] == 2
        assert await b.search(clock) == []
        pattern = f"{redis_prefix}{{{tenant_tag('acme')}}}:e:*"
        store = b.store
        assert isinstance(store, RedisCacheStore)
        assert len({key async for key in store.client.scan_iter(match=pattern)}) == 1
    finally:
        await a.cache.close()
        await b.cache.close()
