"""The store contract suites over every store we ship: turn stores (in memory, SQLite,
PostgreSQL), working-state stores (in memory, Redis), block stores (in memory, SQLite,
PostgreSQL) and search-cache stores (in memory, Redis). Server-backed stores get a
private namespace per test (a schema, a key prefix) and the cleanup hook removes it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from governed_memory.cache import CacheStore, InMemoryCacheStore
from governed_memory.clock import ManualClock
from governed_memory.plugins import PluginManager
from governed_memory.tiers import (
    InMemoryTurnStore,
    InMemoryWorkingStateStore,
    TurnStore,
    WorkingStateStore,
)
from governed_memory.tiers.blocks import BlockStore, InMemoryBlockStore
from governed_memory_conformance import (
    BlockStoreConformance,
    CacheStoreConformance,
    TurnStoreConformance,
    WorkingStateStoreConformance,
)
from postgres_support import POSTGRES_DSN, drop_schemas, require_postgres, schema_for
from redis_support import REDIS_URL, delete_prefix, require_redis, unique_prefix


def registered(kind: str, name: str) -> Any:
    return getattr(PluginManager.load(), kind).get(name).factory


@pytest.fixture(scope="module", autouse=True)
def _drop_postgres_schemas() -> Iterator[None]:
    yield
    drop_schemas()


# -- turn stores ----------------------------------------------------------------------------


class TestInMemoryTurnStore(TurnStoreConformance):
    store_name = "memory"

    async def make_store(self, clock: ManualClock) -> TurnStore:
        return InMemoryTurnStore()


class TestSqliteTurnStore(TurnStoreConformance):
    store_name = "sqlite"
    _path: Path | None = None

    async def make_store(self, clock: ManualClock) -> TurnStore:
        self._path = self.fresh_directory() / "turns.db"
        return await self.reopen_store(clock)

    async def reopen_store(self, clock: ManualClock) -> TurnStore:
        store: TurnStore = registered("turn_stores", "sqlite")({"path": str(self._path)}, clock)
        await store.start()
        return store


class TestPostgresTurnStore(TurnStoreConformance):
    store_name = "postgres"
    _schema: str | None = None

    async def make_store(self, clock: ManualClock) -> TurnStore:
        require_postgres()
        self._schema = schema_for(self.fresh_directory())
        return await self.reopen_store(clock)

    async def reopen_store(self, clock: ManualClock) -> TurnStore:
        store: TurnStore = registered("turn_stores", "postgres")(
            {"dsn": POSTGRES_DSN, "schema": self._schema}, clock)
        await store.start()
        return store


# -- working-state stores -----------------------------------------------------------------------


class TestInMemoryWorkingStateStore(WorkingStateStoreConformance):
    store_name = "memory"

    async def make_store(self, clock: ManualClock) -> WorkingStateStore:
        return InMemoryWorkingStateStore()


class TestRedisWorkingStateStore(WorkingStateStoreConformance):
    store_name = "redis"

    async def make_store(self, clock: ManualClock) -> WorkingStateStore:
        require_redis()
        store: WorkingStateStore = registered("working_state_stores", "redis")(
            {"url": REDIS_URL, "key_prefix": unique_prefix("ws-conformance")}, clock)
        await store.start()
        return store

    async def cleanup_store(self, store: WorkingStateStore) -> None:
        await delete_prefix(getattr(store, "key_prefix"))  # noqa: B009 - the Redis store's


# -- block stores ---------------------------------------------------------------------------------


class TestInMemoryBlockStore(BlockStoreConformance):
    store_name = "memory"

    async def make_store(self, clock: ManualClock) -> BlockStore:
        store: BlockStore = registered("block_stores", "memory")({}, clock)
        assert isinstance(store, InMemoryBlockStore)
        return store


class TestSqliteBlockStore(BlockStoreConformance):
    store_name = "sqlite"
    _path: Path | None = None

    async def make_store(self, clock: ManualClock) -> BlockStore:
        self._path = self.fresh_directory() / "blocks.db"
        return await self.reopen_store(clock)

    async def reopen_store(self, clock: ManualClock) -> BlockStore:
        store: BlockStore = registered("block_stores", "sqlite")({"path": str(self._path)},
                                                                 clock)
        await store.start()
        return store


class TestPostgresBlockStore(BlockStoreConformance):
    store_name = "postgres"
    _schema: str | None = None

    async def make_store(self, clock: ManualClock) -> BlockStore:
        require_postgres()
        self._schema = schema_for(self.fresh_directory())
        return await self.reopen_store(clock)

    async def reopen_store(self, clock: ManualClock) -> BlockStore:
        store: BlockStore = registered("block_stores", "postgres")(
            {"dsn": POSTGRES_DSN, "schema": self._schema}, clock)
        await store.start()
        return store


# -- search-cache stores --------------------------------------------------------------------------


class TestInMemoryCacheStore(CacheStoreConformance):
    store_name = "memory"

    async def make_store(self, clock: ManualClock) -> CacheStore:
        return InMemoryCacheStore()


class TestRedisCacheStore(CacheStoreConformance):
    store_name = "redis"

    async def make_store(self, clock: ManualClock) -> CacheStore:
        require_redis()
        store: CacheStore = registered("cache_stores", "redis")(
            {"url": REDIS_URL, "key_prefix": unique_prefix("cache-conformance")})
        return store

    async def cleanup_store(self, store: CacheStore) -> None:
        await delete_prefix(getattr(store, "config").key_prefix)  # noqa: B009
