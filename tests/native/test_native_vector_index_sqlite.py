"""The vector change log on SQLite (schema v10) and PostgreSQL (schema v7, same tests
where they apply: ``log_backend``), and what it buys the in-process index: catch-up
across providers on one store, rebuild after reopening, refresh without a search,
cancellation, and the memory backend's log with a pruned tail. What only PostgreSQL
has (concurrent tenant writers, its pruned log, the migration's backfill) is in
``test_native_vector_index_postgres``."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from governed_memory.clock import ManualClock
from governed_memory.requests import DeleteRequest, SearchRequest, UpdateRequest
from governed_memory_native import NativeMemoryProvider
from governed_memory_native.memory import repositories as memory_repositories_module
from governed_memory_native.sqlite.schema import VECTOR_LOG_KEEP
from native_support import make_ctx, note
from postgres_support import POSTGRES_DSN
from vector_index_support import (
    ALICE,
    BOB,
    TableEmbedder,
    bulk_add,
    clustered,
    exact_ranking,
    provider_for,
    searched,
)

LOG_QUERIES = ("SELECT scope_hash, seq, vectors FROM vector_scopes ORDER BY scope_hash",
               "SELECT scope_hash, seq, record_id FROM vector_changes ORDER BY scope_hash, seq")


@pytest.fixture(params=["sqlite", "postgres"])
def log_backend(request: pytest.FixtureRequest) -> str:
    """The SQL backends, whose log is kept by triggers in storage."""
    return str(request.param)


def _log(provider: NativeMemoryProvider, directory: Path
         ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """``vector_scopes`` and ``vector_changes`` as storage holds them, read with a
    connection of its own."""
    schema = getattr(provider.backend, "schema", None)
    if schema is not None:
        import psycopg

        with psycopg.connect(POSTGRES_DSN, autocommit=True,
                             options=f"-c search_path={schema}") as pg:
            scopes, changes = (list(pg.execute(query).fetchall()) for query in LOG_QUERIES)
            return scopes, changes
    conn = sqlite3.connect(directory / "memory.db")
    try:
        scopes, changes = (conn.execute(query).fetchall() for query in LOG_QUERIES)
        return scopes, changes
    finally:
        conn.close()


async def test_every_vector_change_is_logged_in_its_transaction(log_backend: str,
                                                                tmp_path: Path,
                                                                clock: ManualClock) -> None:
    """Store, replace (update), remove (soft delete) and erase (hard delete): each bumps
    the scope's seq by one and logs the record id; a rolled-back write logs nothing."""
    embedder = TableEmbedder()
    provider = provider_for(log_backend, tmp_path, clock, embedder)
    await provider.start()
    try:
        vectors = clustered(np.random.default_rng(1), 4, 1)
        for i, vector in enumerate(vectors):
            embedder.table[f"m{i}"] = vector
        first = await provider.add(note("m0"), make_ctx(clock))
        second = await provider.add(note("m1", scope=BOB), make_ctx(clock))
        await provider.update(UpdateRequest(scope=ALICE, record_id=first.id, content="m2"),
                              make_ctx(clock))
        await provider.delete(DeleteRequest(scope=BOB, record_id=second.id),
                              make_ctx(clock))  # soft
        embedder.table["bad"] = np.zeros(16)  # the embedder fails the write: nothing stored
        with pytest.raises(Exception):  # noqa: B017 - any failure, nothing may be logged
            await provider.add(note("bad"), make_ctx(clock))
        third = await provider.add(note("m3"), make_ctx(clock))
        await provider.delete(DeleteRequest(scope=ALICE, record_id=third.id, hard=True),
                              make_ctx(clock))
        scopes, changes = _log(provider, tmp_path)
        assert dict((scope, (seq, count)) for scope, seq, count in scopes) == {
            ALICE.scope_hash: (4, 1), BOB.scope_hash: (2, 0)}
        assert [(scope, seq, record_id) for scope, seq, record_id in changes] == sorted([
            (ALICE.scope_hash, 1, first.id), (ALICE.scope_hash, 2, first.id),
            (ALICE.scope_hash, 3, third.id), (ALICE.scope_hash, 4, third.id),
            (BOB.scope_hash, 1, second.id), (BOB.scope_hash, 2, second.id)])
    finally:
        await provider.close()


async def test_the_log_keeps_a_bounded_tail(tmp_path: Path, clock: ManualClock) -> None:
    embedder = TableEmbedder()
    provider = provider_for("sqlite", tmp_path, clock, embedder)
    await provider.start()
    await provider.close()
    path = tmp_path / "memory.db"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA foreign_keys = OFF")  # vectors alone, no records needed here
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO memory_vectors (record_id, identity, embedder_id, model_revision,"
            " dimension, scope_hash, version, content_hash, vector, created_at)"
            " VALUES (?, 'table@t1/16', 'table', 't1', 16, 's', 1, 'h', x'00', 0)"
            " ON CONFLICT (record_id, identity) DO UPDATE SET version = version + 1",
            [(f"r{i % 7}",) for i in range(VECTOR_LOG_KEEP + 50)])
        conn.execute("COMMIT")
        seq, count = conn.execute("SELECT seq, vectors FROM vector_scopes").fetchone()
        kept = conn.execute("SELECT min(seq), max(seq), count(*) FROM vector_changes"
                            ).fetchone()
    finally:
        conn.close()
    assert (seq, count) == (VECTOR_LOG_KEEP + 50, 7)
    assert kept == (51, VECTOR_LOG_KEEP + 50, VECTOR_LOG_KEEP)


async def test_another_provider_on_the_store_catches_up(log_backend: str, tmp_path: Path,
                                                        clock: ManualClock) -> None:
    """One provider writes, another (its own connections, as another process would
    have) searches: each search reflects every committed write, by catching up from the
    log; the index is built once."""
    embedder = TableEmbedder()
    writer = provider_for(log_backend, tmp_path, clock, embedder)
    reader = provider_for(log_backend, tmp_path, clock, embedder)
    await writer.start()
    await reader.start()
    try:
        rng = np.random.default_rng(9)
        vectors = clustered(rng, 400, 4)
        records = await bulk_add(writer, embedder,
                                 [(ALICE, f"m{i}", v) for i, v in enumerate(vectors[:300])],
                                 clock)
        embedder.table["q"] = vectors[0]
        request = SearchRequest(scopes=(ALICE,), query="q", limit=10)
        assert await searched(reader, request, clock) == await exact_ranking(
            reader, embedder, request, clock.now())
        top = (await searched(reader, request, clock))[0][0]
        for i in range(300, 320):  # new records right next to the query
            embedder.table[f"m{i}"] = vectors[0] + 0.01 * vectors[i]
            await writer.add(note(f"m{i}"), make_ctx(clock))
        victim = next(record for record in records if record.id == top)
        await writer.delete(DeleteRequest(scope=ALICE, record_id=victim.id, hard=True),
                            make_ctx(clock))
        got = await searched(reader, request, clock)
        assert got == await exact_ranking(reader, embedder, request, clock.now())
        assert victim.id not in {record_id for record_id, _ in got}
        stats = reader.vector_indexes.stats
        assert stats.builds == 1 and stats.catch_ups >= 1
        assert writer.vector_indexes.stats.builds == 0  # the writer never searched
    finally:
        await reader.close()
        await writer.close()


async def test_reopening_rebuilds_from_stored_vectors(log_backend: str, tmp_path: Path,
                                                      clock: ManualClock) -> None:
    embedder = TableEmbedder()
    vectors = clustered(np.random.default_rng(4), 200, 3)
    embedder.table["q"] = vectors[7]
    request = SearchRequest(scopes=(ALICE,), query="q", limit=10)
    first = provider_for(log_backend, tmp_path, clock, embedder)
    await first.start()
    try:
        await bulk_add(first, embedder, [(ALICE, f"m{i}", v) for i, v in enumerate(vectors)],
                       clock)
        before = await searched(first, request, clock)
    finally:
        await first.close()
    assert first.vector_indexes.held() == {}
    second = provider_for(log_backend, tmp_path, clock, embedder)
    await second.start()
    try:
        assert await searched(second, request, clock) == before
        assert second.vector_indexes.stats.builds == 1
    finally:
        await second.close()


async def test_refresh_drops_erased_vectors_without_a_search(log_backend: str,
                                                             tmp_path: Path,
                                                             clock: ManualClock) -> None:
    """The refresh the provider runs every second: another provider erases records of a
    scope this one indexed; without any further search here, a refresh removes them
    from this process's index (and drops the index of a scope that emptied)."""
    embedder = TableEmbedder()
    owner = provider_for(log_backend, tmp_path, clock, embedder)
    other = provider_for(log_backend, tmp_path, clock, embedder)
    await owner.start()
    await other.start()
    try:
        vectors = clustered(np.random.default_rng(6), 60, 2)
        mine = await bulk_add(owner, embedder,
                              [(ALICE, f"m{i}", v) for i, v in enumerate(vectors[:40])], clock)
        bobs = await bulk_add(owner, embedder,
                              [(BOB, f"b{i}", v) for i, v in enumerate(vectors[40:])], clock)
        embedder.table["q"] = vectors[0]
        for scope in (ALICE, BOB):
            await searched(owner, SearchRequest(scopes=(scope,), query="q", limit=5), clock)
        assert len(owner.vector_indexes.held()) == 2
        for record in (*mine[:5], *bobs):
            await other.delete(DeleteRequest(scope=record.scope, record_id=record.id, hard=True),
                               make_ctx(clock))
        dropped = await owner.backend.run_read(owner.vector_indexes.refresh)
        assert dropped == 1  # BOB's scope has no vector left
        (index,) = owner.vector_indexes.held().values()
        with index.lock:
            assert set(index.record_ids()) == {record.id for record in mine[5:]}
    finally:
        await other.close()
        await owner.close()


async def test_cancelled_searches_leave_a_consistent_index(log_backend: str,
                                                           tmp_path: Path,
                                                           clock: ManualClock) -> None:
    """Searches cancelled at many points (while the index is built, caught up or
    searched): every later search still equals exact search."""
    embedder = TableEmbedder()
    provider = provider_for(log_backend, tmp_path, clock, embedder)
    await provider.start()
    try:
        rng = np.random.default_rng(12)
        vectors = clustered(rng, 3000, 5)
        await bulk_add(provider, embedder,
                       [(ALICE, f"m{i}", v) for i, v in enumerate(vectors[:2500])], clock)
        embedder.table["q"] = vectors[3]
        request = SearchRequest(scopes=(ALICE,), query="q", limit=10)
        for attempt in range(12):
            task = asyncio.create_task(provider.search(request, make_ctx(clock)))
            for _ in range(attempt):
                await asyncio.sleep(0)
            await asyncio.sleep(0.0005 * attempt)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            embedder.table[f"m{2500 + attempt}"] = vectors[2500 + attempt]
            await provider.add(note(f"m{2500 + attempt}"), make_ctx(clock))
            assert await searched(provider, request, clock) == await exact_ranking(
                provider, embedder, request, clock.now())
    finally:
        await provider.close()


async def test_an_index_behind_a_pruned_log_is_rebuilt(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path,
                                                       clock: ManualClock) -> None:
    """Memory backend with a 5-change tail: 20 writes after the index was built leave a
    gap at the start of the log, so the next search rebuilds instead of catching up."""
    monkeypatch.setattr(memory_repositories_module, "VECTOR_LOG_KEEP", 5)
    embedder = TableEmbedder()
    provider: NativeMemoryProvider = provider_for("memory", tmp_path, clock, embedder)
    await provider.start()
    try:
        vectors = clustered(np.random.default_rng(8), 80, 2)
        await bulk_add(provider, embedder,
                       [(ALICE, f"m{i}", v) for i, v in enumerate(vectors[:50])], clock)
        embedder.table["q"] = vectors[1]
        request = SearchRequest(scopes=(ALICE,), query="q", limit=10)
        await searched(provider, request, clock)
        for i in range(50, 53):
            embedder.table[f"m{i}"] = vectors[i]
            await provider.add(note(f"m{i}"), make_ctx(clock))
        assert await searched(provider, request, clock) == await exact_ranking(
            provider, embedder, request, clock.now())
        assert provider.vector_indexes.stats.builds == 1  # 3 changes: caught up
        for i in range(53, 73):
            embedder.table[f"m{i}"] = vectors[i]
            await provider.add(note(f"m{i}"), make_ctx(clock))
        assert await searched(provider, request, clock) == await exact_ranking(
            provider, embedder, request, clock.now())
        assert provider.vector_indexes.stats.builds == 2  # 20 > 5 kept: rebuilt
    finally:
        await provider.close()
