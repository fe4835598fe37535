"""The in-process vector index (``vector_index``) against exact search, on memory, SQLite
and PostgreSQL.

Exact search is :func:`search.cosine.cosine_ranking` over every vector that passes the hard
filters; the index path must give the very same ranking (ids, scores, order), since its
candidates are verified and rescored exactly and its approximate scores are bounded.
Data are clustered (deterministic seeds), with duplicate vectors for ties, and the
indexed path is forced with ``vector_index_min_vectors = 0``; the embedder, the bulk
writes and the exact reference are in ``vector_index_support``.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from governed_memory import MemoryType, RecordStatus
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryConfigurationError
from governed_memory.records import MemoryRecord
from governed_memory.requests import (
    DeleteAllRequest,
    DeleteRequest,
    DeleteUserRequest,
    PurgeExpiredRequest,
    RejectRequest,
    SearchRequest,
    UpdateRequest,
)
from governed_memory.scope import Scope
from governed_memory_native import NativeMemoryProvider
from governed_memory_native.config import parse_indexing_config
from governed_memory_native.retrieval import vector_index as vector_index_module
from governed_memory_native.retrieval.vector_engines import NumpyEngine, faiss_module
from hypothesis import given, settings
from hypothesis import strategies as st
from native_support import examples, make_ctx, note, require_backend
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

SESSION = Scope("acme", user_id="alice", session_id="s1")
CAROL = Scope("globex", user_id="alice")
SCOPES = (ALICE, BOB, SESSION)
INDEX_BACKENDS = ("memory", "sqlite", "postgres")


@pytest.fixture(params=INDEX_BACKENDS)
def index_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["faiss", "numpy"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both engines: faiss (fp16 scan) when installed, and the numpy fallback."""
    if request.param == "faiss" and faiss_module() is None:
        pytest.skip("faiss-cpu is not installed (the ann extra)")
    if request.param == "numpy":
        monkeypatch.setattr(vector_index_module, "new_engine", NumpyEngine)
    return str(request.param)


@pytest.fixture
async def indexed(index_backend: str, engine: str, tmp_path: Path,
                  clock: ManualClock) -> AsyncIterator[tuple[NativeMemoryProvider,
                                                              TableEmbedder]]:
    embedder = TableEmbedder()
    provider = provider_for(index_backend, tmp_path, clock, embedder)
    await provider.start()
    try:
        yield provider, embedder
    finally:
        await provider.close()


# -- the differential property ---------------------------------------------------------

scenarios = st.fixed_dictionaries({
    "seed": st.integers(0, 2**32 - 1),
    "count": st.integers(1, 220),
    "clusters": st.integers(1, 6),
    "duplicates": st.integers(0, 20),
    "limit": st.integers(1, 25),
    "searched": st.sets(st.sampled_from(range(len(SCOPES))), min_size=1).map(sorted),
    "facts_only": st.booleans(),
    "topic": st.sampled_from([None, "a", "b"]),
    "mutations": st.lists(st.tuples(st.sampled_from(["update", "soft", "hard", "add"]),
                                    st.integers(0, 10**6)), max_size=8),
})


async def _differential(backend: str, directory: Path, plan: dict[str, Any]) -> None:
    clock = ManualClock()
    embedder = TableEmbedder()
    provider = provider_for(backend, directory, clock, embedder)
    await provider.start()
    try:
        rng = np.random.default_rng(plan["seed"])
        vectors = clustered(rng, plan["count"] + 20, plan["clusters"],
                            duplicates=plan["duplicates"])
        picks = rng.integers(0, len(SCOPES), plan["count"])
        batch = [(SCOPES[int(picks[i])], f"m{i}", vectors[i]) for i in range(plan["count"])]
        kinds = rng.integers(0, 2, plan["count"])
        topics = rng.integers(0, 2, plan["count"])
        records: list[MemoryRecord | None] = []
        for kind in (0, 1):
            for topic in (0, 1):
                chosen = [row for i, row in enumerate(batch)
                          if kinds[i] == kind and topics[i] == topic]
                records += await bulk_add(
                    provider, embedder, chosen, clock,
                    memory_type=(MemoryType.FACT, MemoryType.NOTE)[kind],
                    metadata={"topic": "ab"[topic]})
        request = SearchRequest(
            scopes=tuple(SCOPES[i] for i in plan["searched"]), query="query", limit=plan["limit"],
            memory_types=(MemoryType.FACT,) if plan["facts_only"] else (),
            metadata_filter={} if plan["topic"] is None else {"topic": plan["topic"]})
        embedder.table["query"] = clustered(rng, 1, plan["clusters"])[0]
        # First search builds the indexes; writes after it are caught up on.
        assert await searched(provider, request, clock) == await exact_ranking(
            provider, embedder, request, clock.now())
        searched_hashes = {scope.scope_hash for scope in request.scopes}
        if any(scope.scope_hash in searched_hashes for scope, _, _ in batch):
            assert provider.vector_indexes.stats.builds > 0  # the index path ran
        spare = iter(range(plan["count"], plan["count"] + 20))
        for action, pick in plan["mutations"]:
            live = [record for record in records if record is not None]
            if action == "add" or not live:
                index = next(spare, None)
                if index is None:
                    continue
                text = f"m{index}"
                embedder.table[text] = vectors[index]
                added = await provider.add(note(text, scope=SCOPES[pick % len(SCOPES)]),
                                           make_ctx(clock))
                records.append(added)
                continue
            target = live[pick % len(live)]
            position = records.index(target)
            if action == "update":
                text = f"u{pick}"
                embedder.table[text] = vectors[pick % len(vectors)]
                records[position] = await provider.update(UpdateRequest(
                    scope=target.scope, record_id=target.id, content=text,
                    expected_revision=target.revision), make_ctx(clock))
            else:
                await provider.delete(DeleteRequest(scope=target.scope, record_id=target.id,
                                                    hard=action == "hard"), make_ctx(clock))
                records[position] = None
            assert await searched(provider, request, clock) == await exact_ranking(
                provider, embedder, request, clock.now())
    finally:
        await provider.close()


def test_index_ranks_exactly_like_exact_search(index_backend: str) -> None:
    """Random clustered stores, filters, multi-scope searches and writes after the
    indexes were built: the indexed search equals exact search, ids, scores and order.
    PostgreSQL runs fewer examples: each pays a schema and a server round trip per
    statement; the log's concurrency has its own property in
    ``test_native_vector_index_postgres``."""
    require_backend(index_backend)

    @examples(index_backend, memory=30, sqlite=30, postgres=8)
    @given(scenarios)
    def ranks_exactly(plan: dict[str, Any]) -> None:
        with tempfile.TemporaryDirectory() as directory:
            asyncio.run(_differential(index_backend, Path(directory), plan))

    ranks_exactly()


async def test_recall_at_10_on_a_large_clustered_scope(index_backend: str, engine: str,
                                                         tmp_path: Path,
                                                         clock: ManualClock) -> None:
    """2,500 clustered 64-d vectors in one scope, 12 queries: the indexed top 10 is the
    exact top 10 (recall 1.0, against a target of 0.95)."""
    embedder = TableEmbedder(64)
    provider = provider_for(index_backend, tmp_path, clock, embedder)
    await provider.start()
    try:
        await _recall(provider, embedder, clock)
    finally:
        await provider.close()


async def _recall(provider: NativeMemoryProvider, embedder: TableEmbedder,
                  clock: ManualClock) -> None:
    rng = np.random.default_rng(7)
    vectors = clustered(rng, 2500, 40, dimension=64, spread=0.5)
    await bulk_add(provider, embedder, [(ALICE, f"m{i}", v) for i, v in enumerate(vectors)],
                   clock)
    found = 0
    for q, vector in enumerate(clustered(rng, 12, 40, dimension=64, spread=0.5)):
        embedder.table[f"q{q}"] = vector
        request = SearchRequest(scopes=(ALICE,), query=f"q{q}", limit=10)
        expected = await exact_ranking(provider, embedder, request, clock.now())
        got = await searched(provider, request, clock)
        assert got == expected
        found += len({i for i, _ in got} & {i for i, _ in expected})
    assert found / 120 >= 0.95
    stats = provider.vector_indexes.stats
    assert stats.builds == 1 and stats.fallbacks == 0
    assert stats.verified < 12 * 2500 / 4  # a shortlist, not the scope, was verified


async def test_a_scope_never_sees_another_scopes_vectors(
        indexed: tuple[NativeMemoryProvider, TableEmbedder], clock: ManualClock) -> None:
    """The very same vectors in four scopes (two tenants, one user id in both, a session
    of the same user): each search returns records of the searched scopes only, and a
    multi-scope search merges them exactly."""
    provider, embedder = indexed
    vectors = clustered(np.random.default_rng(3), 60, 3)
    mine = {scope.scope_hash: {record.id for record in await bulk_add(
        provider, embedder, [(scope, f"{scope.scope_hash[-8:]}{i}", v)
                             for i, v in enumerate(vectors)],
        clock)} for scope in (*SCOPES, CAROL)}
    embedder.table["q"] = vectors[5]
    for picked in ((ALICE,), (BOB,), (SESSION,), (CAROL,), (ALICE, BOB), (ALICE, SESSION)):
        request = SearchRequest(scopes=picked, query="q", limit=50)
        got = await searched(provider, request, clock)
        allowed = set().union(*(mine[scope.scope_hash] for scope in picked))
        assert got and {record_id for record_id, _ in got} <= allowed
        assert got == await exact_ranking(provider, embedder, request, clock.now())
    held = provider.vector_indexes.held()
    for (_, scope_hash), index in held.items():
        with index.lock:
            assert set(index.record_ids()) == mine[scope_hash]


# -- erasure -----------------------------------------------------------------------------

def _erasures() -> list[str]:
    return ["hard_delete", "delete_all", "delete_user", "purge_expired", "reject"]


@pytest.mark.parametrize("how", _erasures())
async def test_erased_vectors_leave_the_index(indexed: tuple[NativeMemoryProvider,
                                                             TableEmbedder],
                                              clock: ManualClock, how: str) -> None:
    """Each way of erasing: after the next search, the index neither returns nor holds
    the erased record, and its vector's bytes are in no row of the index's buffer."""
    provider, embedder = indexed
    rng = np.random.default_rng(11)
    vectors = clustered(rng, 40, 2)
    await bulk_add(provider, embedder, [(ALICE, f"m{i}", v) for i, v in enumerate(vectors)],
                   clock)
    marked = clustered(rng, 1, 1)[0]
    embedder.table["marked"] = marked
    embedder.table["q"] = marked
    fields: dict[str, Any] = {}
    if how == "purge_expired":
        fields["expires_at"] = clock.now() + 5
    if how == "reject":
        fields["status"] = RecordStatus.PENDING_REVIEW
    scope = Scope("acme", user_id="dave") if how == "delete_user" else ALICE
    victim = await provider.add(note("marked", scope=scope, **fields), make_ctx(clock))
    request = SearchRequest(scopes=(scope, ALICE), query="q", limit=5)
    first = await searched(provider, request, clock)
    if how not in ("reject",):
        assert first[0][0] == victim.id  # indexed and found (a pending one is filtered)
    clock.advance(10)
    ctx = make_ctx(clock)
    if how == "hard_delete":
        await provider.delete(DeleteRequest(scope=scope, record_id=victim.id, hard=True), ctx)
    elif how == "delete_all":
        await provider.delete_all(DeleteAllRequest(scope=scope), ctx)
    elif how == "delete_user":
        await provider.delete_user(DeleteUserRequest(tenant_id="acme", user_id="dave"), ctx)
    elif how == "purge_expired":
        await provider.purge_expired(PurgeExpiredRequest(scope=scope, limit=100), ctx)
    else:
        await provider.reject(RejectRequest(scope=scope, record_id=victim.id), ctx)
    after = await searched(provider, request, clock)
    assert victim.id not in {record_id for record_id, _ in after}
    assert after == await exact_ranking(provider, embedder, request, clock.now())
    needle = np.asarray(marked, dtype=np.float32)
    for index in provider.vector_indexes.held().values():
        with index.lock:
            assert victim.id not in index.record_ids()
            rows = index.rows()
            assert not np.any(np.all(np.abs(rows - needle) < 2e-3, axis=1))
            engine = index._engine  # the raw buffer, spare capacity included (numpy)
            raw = engine.buffer().tobytes()  # type: ignore[attr-defined]
            for dtype in (np.float32, np.float16):
                assert needle.astype(dtype).tobytes() not in raw


erasure_plans = st.lists(st.tuples(st.sampled_from(["add", "erase", "search"]),
                                   st.integers(0, 10**6)), min_size=1, max_size=30)


@settings(max_examples=25, deadline=None)
@given(erasure_plans)
def test_nothing_erased_is_ever_returned_or_held(plan: list[tuple[str, int]]) -> None:
    """Adds, hard deletes and searches in any order (memory backend, both engines'
    code paths share it): a search never returns an erased record, and the index never
    holds one once it has caught up."""

    async def run() -> None:
        clock = ManualClock()
        embedder = TableEmbedder()
        vectors = clustered(np.random.default_rng(len(plan)), 64, 2, duplicates=8)
        provider = provider_for("memory", Path("."), clock, embedder)
        await provider.start()
        try:
            live: list[MemoryRecord] = []
            erased: set[str] = set()
            embedder.table["q"] = vectors[0]
            for step, (action, pick) in enumerate(plan):
                if action == "add":
                    text = f"m{step}"
                    embedder.table[text] = vectors[pick % len(vectors)]
                    live.append(await provider.add(note(text), make_ctx(clock)))
                elif action == "erase" and live:
                    victim = live.pop(pick % len(live))
                    await provider.delete(DeleteRequest(scope=victim.scope, record_id=victim.id,
                                                        hard=True),
                                          make_ctx(clock))
                    erased.add(victim.id)
                else:
                    request = SearchRequest(scopes=(ALICE,), query="q", limit=1 + pick % 12)
                    got = await searched(provider, request, clock)
                    assert not {record_id for record_id, _ in got} & erased
                    assert got == await exact_ranking(provider, embedder, request,
                                                      clock.now())
                    for index in provider.vector_indexes.held().values():
                        with index.lock:
                            assert not set(index.record_ids()) & erased
        finally:
            await provider.close()

    asyncio.run(run())


# -- filters, budget, configuration ---------------------------------------------------------

async def test_a_very_selective_filter_is_searched_exactly(
        indexed: tuple[NativeMemoryProvider, TableEmbedder], clock: ManualClock) -> None:
    """3 facts among 3,000 notes: the index would have to walk most of the scope to
    find them, so the scope is searched exactly instead (same result)."""
    provider, embedder = indexed
    rng = np.random.default_rng(5)
    vectors = clustered(rng, 3003, 2)
    await bulk_add(provider, embedder,
                   [(ALICE, f"m{i}", v) for i, v in enumerate(vectors[:3000])], clock)
    facts = await bulk_add(provider, embedder,
                           [(ALICE, f"f{i}", v) for i, v in enumerate(vectors[3000:])], clock,
                           memory_type=MemoryType.FACT)
    embedder.table["q"] = vectors[0]
    request = SearchRequest(scopes=(ALICE,), query="q", limit=2, memory_types=(MemoryType.FACT,))
    got = await searched(provider, request, clock)
    assert got == await exact_ranking(provider, embedder, request, clock.now())
    assert {record_id for record_id, _ in got} <= {fact.id for fact in facts}
    assert provider.vector_indexes.stats.fallbacks >= 1


async def test_indexes_beyond_the_budget_are_dropped_and_rebuilt(
        index_backend: str, tmp_path: Path, clock: ManualClock) -> None:
    embedder = TableEmbedder()
    provider = provider_for(index_backend, tmp_path, clock, embedder,
                            vector_index_max_vectors=150)
    await provider.start()
    try:
        vectors = clustered(np.random.default_rng(2), 100, 3)
        for scope in (ALICE, BOB):
            await bulk_add(provider, embedder,
                           [(scope, f"{scope.user_id}{i}", v) for i, v in enumerate(vectors)],
                           clock)
        embedder.table["q"] = vectors[1]
        for scope in (ALICE, BOB, ALICE):
            request = SearchRequest(scopes=(scope,), query="q", limit=10)
            assert await searched(provider, request, clock) == await exact_ranking(
                provider, embedder, request, clock.now())
            assert len(provider.vector_indexes.held()) == 1  # 2 x 100 > 150
        stats = provider.vector_indexes.stats
        assert stats.builds == 3 and stats.evictions == 2
    finally:
        await provider.close()
    assert provider.vector_indexes.held() == {}  # closing wipes every index


async def test_small_scopes_are_searched_exactly_without_an_index(
        index_backend: str, tmp_path: Path, clock: ManualClock) -> None:
    embedder = TableEmbedder()
    provider = provider_for(index_backend, tmp_path, clock, embedder,
                            vector_index_min_vectors=50)
    await provider.start()
    try:
        vectors = clustered(np.random.default_rng(4), 49, 2)
        await bulk_add(provider, embedder, [(ALICE, f"m{i}", v) for i, v in enumerate(vectors)],
                       clock)
        embedder.table["q"] = vectors[0]
        request = SearchRequest(scopes=(ALICE,), query="q", limit=10)
        assert await searched(provider, request, clock) == await exact_ranking(
            provider, embedder, request, clock.now())
        assert provider.vector_indexes.held() == {}
        await bulk_add(provider, embedder, [(ALICE, "m49", vectors[1])], clock)
        assert await searched(provider, request, clock) == await exact_ranking(
            provider, embedder, request, clock.now())
        assert len(provider.vector_indexes.held()) == 1  # 50 vectors: indexed now
    finally:
        await provider.close()


def test_index_settings_are_validated_at_load() -> None:
    config = parse_indexing_config({})
    assert config.vector_index_min_vectors == 500
    assert config.vector_index_max_vectors == 1_000_000
    parsed = parse_indexing_config({"vector_index_min_vectors": 0,
                                    "vector_index_max_vectors": 10})
    assert (parsed.vector_index_min_vectors, parsed.vector_index_max_vectors) == (0, 10)
    for key in ("vector_index_min_vectors", "vector_index_max_vectors"):
        for bad in (-1, 1.5, "10", True, None, 10**12):
            with pytest.raises(MemoryConfigurationError, match=key):
                parse_indexing_config({key: bad})


async def test_memory_backend_runs_search_units_off_the_event_loop(tmp_path: Path,
                                                                     clock: ManualClock
                                                                     ) -> None:
    import threading

    provider = provider_for("memory", tmp_path, clock, TableEmbedder())
    await provider.start()
    try:
        async def unit(tx: Any) -> int:
            return int(await tx.compute(threading.get_ident))

        assert await provider.backend.run_read(unit) != threading.get_ident()
        assert await provider.backend.run_read(unit, point=True) == threading.get_ident()
    finally:
        await provider.close()


async def test_health_says_which_engine_ranks_vectors(
        indexed: tuple[NativeMemoryProvider, TableEmbedder]) -> None:
    provider, _ = indexed
    status = await provider.health()
    assert status.ok and "vector index" in status.detail
    assert ("faiss-cpu not installed" in status.detail) == (faiss_module() is None)
