"""Vectors and the indexing outbox: sync and async_outbox modes, the worker's leases,
retries, dead letters, removal of deleted records' vectors, and re-embedding when the
embedder changes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from governed_memory import MemoryUnavailableError
from governed_memory.clock import ManualClock
from governed_memory.indexing import IndexingProvider, JobAction, JobState, WorkerReport
from governed_memory.records import IndexState
from governed_memory.requests import (
    DeleteRequest,
    DeleteUserRequest,
    GetRequest,
    HistoryRequest,
    ListRequest,
    SearchRequest,
    UpdateRequest,
)
from governed_memory_native import NativeMemoryProvider, build_native_provider
from indexing_support import ControlledEmbedder, settings
from native_support import USER_SCOPE, config_for, make_ctx, note

INDEX_BACKENDS = ("memory", "sqlite", "postgres")
"""Backends implementing the vector and outbox port methods (PostgreSQL: add it here)."""


@pytest.fixture(params=INDEX_BACKENDS)
def index_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def embedder() -> ControlledEmbedder:
    return ControlledEmbedder()


async def _started(backend: str, tmp_path: Path, clock: ManualClock,
                   embedder: ControlledEmbedder, mode: str,
                   **config: object) -> NativeMemoryProvider:
    provider = build_native_provider(config_for(backend, tmp_path, **config), clock)
    provider.configure_indexing(settings(embedder, mode))
    await provider.start()
    return provider


@pytest.fixture
async def sync_provider(index_backend: str, tmp_path: Path, clock: ManualClock,
                        embedder: ControlledEmbedder) -> AsyncIterator[NativeMemoryProvider]:
    provider = await _started(index_backend, tmp_path, clock, embedder, "sync")
    try:
        yield provider
    finally:
        await provider.close()


@pytest.fixture
async def async_provider(index_backend: str, tmp_path: Path, clock: ManualClock,
                         embedder: ControlledEmbedder) -> AsyncIterator[NativeMemoryProvider]:
    provider = await _started(index_backend, tmp_path, clock, embedder, "async_outbox",
                              index_max_attempts=3, index_backoff_s=10)
    try:
        yield provider
    finally:
        await provider.close()


async def _vector(provider: NativeMemoryProvider, record_id: str,
                  embedder: ControlledEmbedder) -> object:
    async with provider.backend.reading() as tx:
        return await tx.vectors.of(record_id, embedder.identity)


async def _vector_counts(provider: NativeMemoryProvider) -> dict[str, int]:
    async with provider.backend.reading() as tx:
        return await tx.vectors.counts()


async def _work(provider: NativeMemoryProvider, worker: str = "w1") -> WorkerReport:
    return await provider.process_index_jobs(worker_id=worker, limit=100, lease_s=30)


# -- sync mode -----------------------------------------------------------------------


async def test_the_native_provider_is_an_indexing_provider(
        sync_provider: NativeMemoryProvider) -> None:
    assert isinstance(sync_provider, IndexingProvider)
    assert sync_provider.capabilities().vector_search is True


async def test_no_embedder_means_no_vector_search(tmp_path: Path, clock: ManualClock) -> None:
    provider = build_native_provider(config_for("memory", tmp_path), clock)
    assert provider.capabilities().vector_search is False


async def test_sync_stores_one_vector_per_content(sync_provider: NativeMemoryProvider,
                                                  clock: ManualClock,
                                                  embedder: ControlledEmbedder) -> None:
    record = await sync_provider.add(note("green tea in the morning"), make_ctx(clock))
    assert record.index_state is IndexState.INDEXED
    stored = await _vector(sync_provider, record.id, embedder)
    assert stored is not None
    assert (stored.identity, stored.version, stored.content_hash) == (  # type: ignore[attr-defined]
        embedder.identity, 1, record.content_hash)
    assert len(stored.vector) == 4 * embedder.identity.dimension  # type: ignore[attr-defined]
    # A metadata-only update keeps the content's vector: nothing is embedded again.
    calls = embedder.texts_embedded
    retagged = await sync_provider.update(
        UpdateRequest(scope=USER_SCOPE, record_id=record.id, metadata={"k": "v"}), make_ctx(clock))
    assert embedder.texts_embedded == calls
    assert retagged.index_state is IndexState.INDEXED
    # New content: a new vector replaces the old one.
    changed = await sync_provider.update(
        UpdateRequest(scope=USER_SCOPE, record_id=record.id,
                      content="black coffee"), make_ctx(clock))
    stored = await _vector(sync_provider, record.id, embedder)
    assert stored.content_hash == changed.content_hash  # type: ignore[attr-defined]
    assert await _vector_counts(sync_provider) == {str(embedder.identity): 1}
    # A soft delete removes it; nothing is left to rank.
    await sync_provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=record.id),
                               make_ctx(clock))
    assert await _vector(sync_provider, record.id, embedder) is None


async def test_sync_embeds_outside_the_write_lock(sync_provider: NativeMemoryProvider,
                                                  clock: ManualClock,
                                                  embedder: ControlledEmbedder) -> None:
    seed = await sync_provider.add(note("seed"), make_ctx(clock))
    embedder.gate = asyncio.Event()
    embedder.entered.clear()
    adding = asyncio.create_task(sync_provider.add(note("slow to embed"), make_ctx(clock)))
    await embedder.entered.wait()
    # While the model runs, storage is free: another write and a read go through.
    other = await sync_provider.update(UpdateRequest(scope=USER_SCOPE, record_id=seed.id,
                                                     importance=0.9),
                                       make_ctx(clock))
    assert other.version == 2
    page = await sync_provider.list(ListRequest(scope=USER_SCOPE), make_ctx(clock))
    assert [r.id for r in page.items] == [seed.id]
    embedder.gate.set()
    added = await adding
    assert await _vector(sync_provider, added.id, embedder) is not None


async def test_sync_embedder_failure_fails_the_write_cleanly(
        sync_provider: NativeMemoryProvider, clock: ManualClock,
        embedder: ControlledEmbedder) -> None:
    embedder.failing = True
    with pytest.raises(MemoryUnavailableError):
        await sync_provider.add(note("never stored"), make_ctx(clock))
    page = await sync_provider.list(ListRequest(scope=USER_SCOPE), make_ctx(clock))
    assert page.items == ()
    assert await _vector_counts(sync_provider) == {}


async def test_erasure_removes_vectors_and_counts_them(sync_provider: NativeMemoryProvider,
                                                       clock: ManualClock,
                                                       embedder: ControlledEmbedder) -> None:
    for n in range(3):
        await sync_provider.add(note(f"fact {n}"), make_ctx(clock))
    receipt = await sync_provider.delete_user(DeleteUserRequest(tenant_id="acme", user_id="alice"),
                                              make_ctx(clock))
    assert receipt.counts["index_entries"] == 6  # 3 lexical entries + 3 vectors
    assert await _vector_counts(sync_provider) == {}


# -- async_outbox mode ---------------------------------------------------------------


async def test_async_write_commits_a_job_and_the_worker_indexes_it(
        async_provider: NativeMemoryProvider, clock: ManualClock,
        embedder: ControlledEmbedder) -> None:
    record = await async_provider.add(note("green tea"), make_ctx(clock))
    assert record.index_state is IndexState.PENDING
    assert embedder.calls == []  # the write did not wait for the model
    # Lexical search is consistent at commit.
    hits = await async_provider.search(SearchRequest(scopes=(USER_SCOPE,), query="green tea"),
                                       make_ctx(clock))
    assert [h.record.id for h in hits.hits] == [record.id]
    status = await async_provider.outbox_status()
    assert (status.pending, status.leased, status.dead, status.missing_vectors) == (1, 0, 0, 1)
    report = await _work(async_provider)
    assert (report.leased, report.indexed) == (1, 1)
    assert await _vector(async_provider, record.id, embedder) is not None
    indexed = await async_provider.get(GetRequest(scope=USER_SCOPE, record_id=record.id),
                                       make_ctx(clock))
    assert indexed.index_state is IndexState.INDEXED
    assert indexed.revision == record.revision  # indexing is not a write of the memory
    status = await async_provider.outbox_status()
    assert (status.pending, status.missing_vectors) == (0, 0)
    assert status.vectors == {str(embedder.identity): 1}
    assert (await _work(async_provider)).leased == 0


async def test_only_the_newest_version_is_embedded(async_provider: NativeMemoryProvider,
                                                   clock: ManualClock,
                                                   embedder: ControlledEmbedder) -> None:
    record = await async_provider.add(note("v1 text"), make_ctx(clock))
    await async_provider.update(UpdateRequest(scope=USER_SCOPE, record_id=record.id,
                                              content="v2 text"),
                                make_ctx(clock))
    latest = await async_provider.update(
        UpdateRequest(scope=USER_SCOPE, record_id=record.id, content="v3 text"), make_ctx(clock))
    jobs = await async_provider.index_jobs(JobState.PENDING, 10)
    assert [(job.version, job.action) for job in jobs] == [(3, JobAction.EMBED)]
    await _work(async_provider)
    assert embedder.calls == [["v3 text"]]
    stored = await _vector(async_provider, record.id, embedder)
    assert stored.content_hash == latest.content_hash  # type: ignore[attr-defined]


async def test_a_record_rewritten_during_the_job_is_not_given_a_stale_vector(
        async_provider: NativeMemoryProvider, clock: ManualClock,
        embedder: ControlledEmbedder) -> None:
    record = await async_provider.add(note("first words"), make_ctx(clock))
    embedder.gate = asyncio.Event()
    working = asyncio.create_task(_work(async_provider))
    await embedder.entered.wait()
    rewritten = await async_provider.update(
        UpdateRequest(scope=USER_SCOPE, record_id=record.id,
                      content="second words"), make_ctx(clock))
    embedder.gate.set()
    assert (await working).skipped == 1
    assert await _vector(async_provider, record.id, embedder) is None
    assert (await _work(async_provider)).indexed == 1
    stored = await _vector(async_provider, record.id, embedder)
    assert stored.content_hash == rewritten.content_hash  # type: ignore[attr-defined]
    assert embedder.calls[-1] == ["second words"]  # the exact version the job named


async def test_failures_back_off_then_dead_letter_without_touching_the_record(
        async_provider: NativeMemoryProvider, clock: ManualClock,
        embedder: ControlledEmbedder) -> None:
    record = await async_provider.add(note("green tea"), make_ctx(clock))
    embedder.failing = True
    delays = []
    for attempt in (1, 2):
        report = await _work(async_provider)
        assert report.retried == 1, attempt
        [job] = await async_provider.index_jobs(JobState.PENDING, 10)
        assert (job.attempts, job.last_error_code) == (attempt, "unavailable")
        delays.append(job.next_attempt_at - clock.now())
        assert (await _work(async_provider)).leased == 0  # not due yet
        clock.advance(delays[-1])
    assert delays == [10, 20]
    report = await _work(async_provider)
    assert report.dead == 1
    [dead] = await async_provider.index_jobs(JobState.DEAD, 10)
    assert dead.attempts == 3
    clock.advance(1000)
    assert (await _work(async_provider)).leased == 0  # dead letters are not retried
    same = await async_provider.get(GetRequest(scope=USER_SCOPE, record_id=record.id),
                                    make_ctx(clock))
    assert (same.revision, same.version, same.content) == (record.revision, 1, "green tea")
    history = await async_provider.history(HistoryRequest(scope=USER_SCOPE, record_id=record.id),
                                           make_ctx(clock))
    assert len(history) == 1
    hits = await async_provider.search(SearchRequest(scopes=(USER_SCOPE,), query="green tea"),
                                       make_ctx(clock))
    assert [h.record.id for h in hits.hits] == [record.id]
    assert (await async_provider.outbox_status()).dead == 1
    # An operator requeues it once the model works again.
    embedder.failing = False
    assert await async_provider.retry_dead_jobs() == 1
    assert (await _work(async_provider)).indexed == 1
    assert (await async_provider.outbox_status()).dead == 0


async def test_one_bad_text_fails_only_its_own_job(async_provider: NativeMemoryProvider,
                                                   clock: ManualClock,
                                                   embedder: ControlledEmbedder) -> None:
    good = [await async_provider.add(note(f"fine {n}"), make_ctx(clock)) for n in range(2)]
    await async_provider.add(note("poison pill"), make_ctx(clock))
    embedder.fail_on = "poison"
    report = await _work(async_provider)
    assert (report.indexed, report.retried) == (2, 1)
    for record in good:
        assert await _vector(async_provider, record.id, embedder) is not None


async def test_an_expired_lease_is_taken_over_and_the_late_result_refused(
        async_provider: NativeMemoryProvider, clock: ManualClock,
        embedder: ControlledEmbedder) -> None:
    record = await async_provider.add(note("green tea"), make_ctx(clock))
    gate = embedder.gate = asyncio.Event()
    slow = asyncio.create_task(async_provider.process_index_jobs(worker_id="slow", limit=10,
                                                                 lease_s=5))
    await embedder.entered.wait()
    assert (await async_provider.outbox_status()).leased == 1
    assert (await async_provider.process_index_jobs(worker_id="fast", limit=10)).leased == 0
    clock.advance(6)  # the slow worker's lease runs out
    embedder.gate = None
    fast = await async_provider.process_index_jobs(worker_id="fast", limit=10)
    assert fast.indexed == 1
    # The slow worker finally finishes: its lease is gone, so its result is dropped.
    gate.set()
    late = await slow
    assert late.lost_leases == 1 and late.indexed == 0
    assert await _vector_counts(async_provider) == {str(embedder.identity): 1}
    assert (await async_provider.outbox_status()).pending == 0
    assert await _vector(async_provider, record.id, embedder) is not None


async def test_soft_delete_removes_vectors_through_the_outbox(
        async_provider: NativeMemoryProvider, clock: ManualClock,
        embedder: ControlledEmbedder) -> None:
    record = await async_provider.add(note("green tea"), make_ctx(clock))
    await _work(async_provider)
    await async_provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=record.id),
                                make_ctx(clock))
    jobs = await async_provider.index_jobs(JobState.PENDING, 10)
    assert [job.action for job in jobs] == [JobAction.REMOVE]
    assert await _vector(async_provider, record.id, embedder) is not None
    assert (await _work(async_provider)).removed == 1
    assert await _vector_counts(async_provider) == {}


async def test_a_changed_embedder_is_never_mixed_in_and_reindex_refills(
        index_backend: str, tmp_path: Path, clock: ManualClock) -> None:
    first = ControlledEmbedder()
    provider = await _started(index_backend, tmp_path, clock, first, "sync")
    try:
        records = [await provider.add(note(f"note {n}"), make_ctx(clock)) for n in range(5)]
        # The profile now names another model revision (a deploy with a new profile).
        second = ControlledEmbedder(revision_suffix="-next")
        provider.configure_indexing(settings(second, "sync"))
        status = await provider.outbox_status()
        assert status.embedder == str(second.identity)
        assert status.vectors == {str(first.identity): 5}
        assert status.missing_vectors == 5  # the old model's vectors do not count
        async with provider.backend.reading() as tx:
            from governed_memory_native.storage.port import SearchQuery, VectorQuery

            query = SearchQuery(scope_hashes=(USER_SCOPE.scope_hash,), tokens=(),
                                now=clock.now(), limit=10)
            assert await tx.vectors.candidates(VectorQuery(query, second.identity)) == []
        enqueued = []
        cursor = None
        while True:
            page = await provider.reindex(cursor=cursor, limit=2)
            enqueued.append(page.enqueued)
            assert page.total == 5
            cursor = page.cursor
            if cursor is None:
                break
        assert sum(enqueued) == 5
        assert (await provider.process_index_jobs(worker_id="w", limit=100)).indexed == 5
        status = await provider.outbox_status()
        assert (status.missing_vectors, status.vectors) == (0, {str(second.identity): 5})
        for record in records:
            stored = await _vector(provider, record.id, second)
            assert stored is not None
        assert (await provider.reindex()).enqueued == 0
    finally:
        await provider.close()


async def test_worker_needs_an_embedder(tmp_path: Path, clock: ManualClock) -> None:
    from governed_memory.errors import MemoryConfigurationError

    provider = build_native_provider(config_for("memory", tmp_path), clock)
    await provider.start()
    try:
        with pytest.raises(MemoryConfigurationError):
            await provider.process_index_jobs(worker_id="w")
    finally:
        await provider.close()


async def test_close_closes_the_embedder(tmp_path: Path, clock: ManualClock,
                                         embedder: ControlledEmbedder) -> None:
    provider = await _started("memory", tmp_path, clock, embedder, "sync")
    await provider.close()
    assert embedder.closed


async def test_an_in_process_worker_indexes_as_writes_arrive(
        async_provider: NativeMemoryProvider, clock: ManualClock,
        embedder: ControlledEmbedder) -> None:
    from governed_memory.indexing import run_worker

    stop = asyncio.Event()
    reports: list[WorkerReport] = []
    worker = asyncio.create_task(run_worker(async_provider, worker_id="in-process", stop=stop,
                                            idle_s=0.01, on_report=reports.append))
    record = await async_provider.add(note("green tea"), make_ctx(clock))
    for _ in range(500):
        if await _vector(async_provider, record.id, embedder) is not None:
            break
        await asyncio.sleep(0.01)
    stop.set()
    total = await asyncio.wait_for(worker, 5)
    assert total.indexed == 1 and sum(r.indexed for r in reports) == 1


async def test_a_worker_without_an_embedder_stops_at_once(tmp_path: Path,
                                                          clock: ManualClock) -> None:
    from governed_memory.errors import MemoryConfigurationError
    from governed_memory.indexing import run_worker

    provider = build_native_provider(config_for("memory", tmp_path), clock)
    await provider.start()
    try:
        with pytest.raises(MemoryConfigurationError):
            await asyncio.wait_for(run_worker(provider, worker_id="w", idle_s=0.01), 5)
    finally:
        await provider.close()
