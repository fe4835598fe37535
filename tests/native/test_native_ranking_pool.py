"""Lexical searches ranked in worker processes (``ranking_pool``, issue 29 item 3) answer
exactly what the provider's own process answers, on SQLite and PostgreSQL, lexical and
hybrid; a hybrid search whose worker read another snapshot ranks in-process; a lost
worker is replaced while searches rank in-process; closing stops every worker; small
stores never start one. Deadlines below are hang guards, never measurements."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from governed_memory import MemoryType, Visibility
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryConfigurationError
from governed_memory.ids import new_id, new_revision
from governed_memory.indexing import IndexingSettings, RankingConfig
from governed_memory.records import IndexState, MemoryRecord, RecordStatus, content_hash
from governed_memory.requests import SearchRequest
from governed_memory_native import NativeMemoryProvider, build_native_provider
from governed_memory_native.config import parse_indexing_config
from governed_memory_native.retrieval.ranking.pool import RankingPool, RemotePage
from governed_memory_native.retrieval.ranking.wire import query_fields, query_from_fields
from governed_memory_native.storage.port import SearchQuery
from indexing_support import ControlledEmbedder
from native_support import USER_SCOPE, config_for, make_ctx, note

DEADLINE_S = 60.0
WORDS = ("tea", "green", "coffee", "morning", "linux", "laptop", "dark", "mode", "jasmine",
         "the", "of", "what", "did")
HYBRID = RankingConfig(modes=("lexical", "vector"), weights={"lexical": 2.0, "vector": 1.0})
QUERIES = ("green tea", "what did the morning", "the of", "dark mode laptop jasmine",
           "coffee what", "zebra", "linux the tea of did")


def _content(number: int) -> str:
    picks = [WORDS[(number * step) % len(WORDS)] for step in (1, 3, 7, 11)][: 1 + number % 4]
    return " ".join(["the", *picks] + ["of"] * (number % 3))


async def _seed(provider: NativeMemoryProvider, count: int, clock: ManualClock) -> None:
    """Records written through the port, as a governed add writes them (fast)."""
    async with provider.backend.writing() as tx:
        for number in range(count):
            content = _content(number)
            await tx.records.insert(MemoryRecord(
                id=new_id(), scope=USER_SCOPE, scope_hash=USER_SCOPE.scope_hash,
                content=content, memory_type=(MemoryType.FACT, MemoryType.NOTE)[number % 2],
                version=1, revision=new_revision(), content_hash=content_hash(content),
                status=RecordStatus.ACTIVE, created_at=clock.now(), updated_at=clock.now(),
                visibility=(Visibility.PRIVATE, Visibility.SHARED)[number % 3 == 0],
                index_state=IndexState.INDEXED))


async def _provider(config: dict[str, Any], clock: ManualClock, processes: int,
                    hybrid: bool) -> NativeMemoryProvider:
    provider = build_native_provider({**config, "ranking_processes": processes}, clock)
    if hybrid:
        provider.configure_indexing(IndexingSettings(embedder=ControlledEmbedder(),
                                                     ranking=HYBRID))
    await provider.start()
    return provider


async def _awake(pool: RankingPool, workers: int) -> None:
    pool.wake()
    async with asyncio.timeout(DEADLINE_S):
        assert await pool.started()
    assert pool.stats.started == workers


def _answer(result: Any) -> list[tuple[Any, ...]]:
    return [(hit.record, hit.score, hit.rank, hit.explanation) for hit in result.hits] + [
        ("candidates", result.candidates)]


def _requests() -> list[SearchRequest]:
    plain = [SearchRequest(scopes=(USER_SCOPE,), query=query, limit=5) for query in QUERIES]
    return [*plain,
            SearchRequest(scopes=(USER_SCOPE,), query="the tea of", limit=7,
                          memory_types=(MemoryType.FACT,)),
            SearchRequest(scopes=(USER_SCOPE,), query="green what", limit=3)]


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    return config_for(request.param, tmp_path)


@pytest.fixture
async def pair(store: dict[str, Any], clock: ManualClock
               ) -> AsyncIterator[tuple[NativeMemoryProvider, NativeMemoryProvider]]:
    """A provider that ranks in its own process and one whose worker ranks, one store."""
    here = await _provider(store, clock, 0, hybrid=False)
    await _seed(here, 400, clock)
    there = await _provider(store, clock, 1, hybrid=False)
    try:
        yield here, there
    finally:
        await there.close()
        await here.close()


async def test_a_worker_ranks_exactly_as_the_provider(
        pair: tuple[NativeMemoryProvider, NativeMemoryProvider], clock: ManualClock) -> None:
    here, there = pair
    assert here.ranking_pool is None
    pool = there.ranking_pool
    assert pool is not None
    await _awake(pool, 1)
    for request in _requests():
        assert _answer(await there.search(request, make_ctx(clock))) == _answer(
            await here.search(request, make_ctx(clock))), request.query
    assert pool.stats.searches == len(_requests())
    assert (pool.stats.retries, pool.stats.stale, pool.stats.lost) == (0, 0, 0)


async def test_hybrid_searches_agree_and_a_stale_worker_answer_ranks_in_process(
        store: dict[str, Any], clock: ManualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    here = await _provider(store, clock, 0, hybrid=True)
    there = await _provider(store, clock, 1, hybrid=True)
    try:
        for number in range(60):  # governed adds: each stores its vector
            await here.add(note(_content(number)), make_ctx(clock))
        pool = there.ranking_pool
        assert pool is not None
        await _awake(pool, 1)
        for request in _requests():
            assert _answer(await there.search(request, make_ctx(clock))) == _answer(
                await here.search(request, make_ctx(clock))), request.query
        assert pool.stats.searches == len(_requests()) and pool.stats.stale == 0

        # A write lands after the worker's snapshot and before the provider's unit: the
        # revisions differ, so the unit ranks in its own snapshot, which has the write.
        ranked = pool.search

        async def then_a_write(query: SearchQuery, tenant_id: str, *,
                               revisions: bool) -> RemotePage | None:
            found = await ranked(query, tenant_id, revisions=revisions)
            await here.add(note("zebra zebra green tea"), make_ctx(clock))
            return found

        monkeypatch.setattr(pool, "search", then_a_write)
        request = SearchRequest(scopes=(USER_SCOPE,), query="zebra green", limit=5)
        result = await there.search(request, make_ctx(clock))
        assert pool.stats.stale == 1
        assert result.hits[0].record.content == "zebra zebra green tea"
        monkeypatch.undo()
        assert _answer(result) == _answer(await here.search(request, make_ctx(clock)))
    finally:
        await there.close()
        await here.close()


async def test_a_lost_worker_is_replaced_and_its_searches_rank_in_process(
        pair: tuple[NativeMemoryProvider, NativeMemoryProvider], clock: ManualClock) -> None:
    here, there = pair
    pool = there.ranking_pool
    assert pool is not None
    await _awake(pool, 1)
    process = pool._workers[0].process
    process.kill()
    await process.wait()
    for request in _requests():  # ranked in-process meanwhile, the same answers
        assert _answer(await there.search(request, make_ctx(clock))) == _answer(
            await here.search(request, make_ctx(clock)))
    async with asyncio.timeout(DEADLINE_S):  # the loss started a replacement
        assert await pool.started()
    assert (pool.stats.lost, pool.stats.started) == (1, 2)
    request = _requests()[0]
    assert _answer(await there.search(request, make_ctx(clock))) == _answer(
        await here.search(request, make_ctx(clock)))


async def test_closing_stops_every_worker(store: dict[str, Any], clock: ManualClock) -> None:
    provider = await _provider(store, clock, 2, hybrid=False)
    pool = provider.ranking_pool
    assert pool is not None
    await _awake(pool, 2)
    processes = [worker.process for worker in pool._workers]
    assert len(processes) == 2
    await provider.close()
    assert provider.ranking_pool is None
    assert all(process.returncode is not None for process in processes)
    assert pool.stats.lost == 0


async def test_searches_of_a_small_store_never_start_a_worker(
        store: dict[str, Any], clock: ManualClock) -> None:
    provider = await _provider(store, clock, 2, hybrid=False)
    try:
        await _seed(provider, 50, clock)
        for request in _requests():
            await provider.search(request, make_ctx(clock))
        pool = provider.ranking_pool
        assert pool is not None and pool.stats.started == 0 and not pool.ready
    finally:
        await provider.close()


async def test_a_search_examining_many_records_starts_the_workers(
        store: dict[str, Any], clock: ManualClock) -> None:
    provider = await _provider(store, clock, 1, hybrid=False)
    try:
        await _seed(provider, 1200, clock)
        request = SearchRequest(scopes=(USER_SCOPE,), query="the", limit=5)
        first = await provider.search(request, make_ctx(clock))
        assert first.candidates == 1200  # every record examined: worth a worker...
        pool = provider.ranking_pool
        assert pool is not None
        # ...but one search at a time (a one-shot command) never starts the pool:
        assert pool.stats.started == 0 and not pool.ready
        # searches that overlap do.
        overlapping = await asyncio.gather(*(provider.search(request, make_ctx(clock))
                                             for _ in range(3)))
        assert all(_answer(result) == _answer(first) for result in overlapping)
        async with asyncio.timeout(DEADLINE_S):
            assert await pool.started()
        assert _answer(await provider.search(request, make_ctx(clock))) == _answer(first)
        assert pool.stats.searches == 1
    finally:
        await provider.close()


def test_the_memory_backend_has_no_workers(clock: ManualClock) -> None:
    provider = build_native_provider({"backend": "memory", "ranking_processes": 2}, clock)
    asyncio.run(provider.start())
    try:
        assert provider.ranking_pool is None
    finally:
        asyncio.run(provider.close())


@pytest.mark.parametrize("value", [-1, 65, True, 1.5, "many", None])
def test_ranking_processes_must_be_auto_or_a_small_count(value: object) -> None:
    with pytest.raises(MemoryConfigurationError, match="ranking_processes"):
        parse_indexing_config({"ranking_processes": value})


def test_auto_leaves_the_cores_to_several_service_workers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from governed_memory_native.retrieval.ranking.pool import SERVICE_WORKERS_ENV, default_processes

    monkeypatch.setattr("os.cpu_count", lambda: 2)
    monkeypatch.delenv(SERVICE_WORKERS_ENV, raising=False)
    assert default_processes() == 2
    monkeypatch.setenv(SERVICE_WORKERS_ENV, "1")
    assert default_processes() == 2
    monkeypatch.setenv(SERVICE_WORKERS_ENV, "2")
    assert default_processes() == 0
    monkeypatch.setattr("os.cpu_count", lambda: 1)
    monkeypatch.delenv(SERVICE_WORKERS_ENV)
    assert default_processes() == 0


def test_ranking_processes_auto_and_counts() -> None:
    assert parse_indexing_config({}).ranking_processes is None
    assert parse_indexing_config({"ranking_processes": "auto"}).ranking_processes is None
    assert parse_indexing_config({"ranking_processes": 0}).ranking_processes == 0
    assert parse_indexing_config({"ranking_processes": 3}).ranking_processes == 3


def test_a_query_crosses_to_a_worker_unchanged(clock: ManualClock) -> None:
    ids = itertools.count()
    query = SearchQuery(
        scope_hashes=(USER_SCOPE.scope_hash, f"sh1:{next(ids)}"), tokens=("tea", "green"),
        now=clock.now(), limit=7, memory_types=(MemoryType.FACT, MemoryType.NOTE),
        entity_ids=("e1",), metadata_filter={"a": 1, "b": "x", "c": True, "d": None,
                                             "e": 0.1},
        valid_at=12.5, visibilities=(Visibility.SHARED,), occurred_since=1.0,
        occurred_before=2.0)
    assert query_from_fields(query_fields(query)) == query
