"""Hybrid retrieval: hard filters before ranking, lexical and vector candidates, weighted
reciprocal-rank fusion with recency and importance, a stable tie-break, explanations."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import attrs
import pytest
from governed_memory import MemoryType, RecordStatus
from governed_memory.clock import ManualClock
from governed_memory.indexing import IndexingSettings, RankingConfig
from governed_memory.records import MemoryRecord
from governed_memory.requests import DeleteRequest, SearchRequest, UpdateRequest
from governed_memory.scope import Scope
from governed_memory_native import NativeMemoryProvider, build_native_provider
from governed_memory_native.retrieval import fusion as retrieval
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from indexing_support import ControlledEmbedder, settings
from native_support import OTHER_USER, USER_SCOPE, config_for, make_ctx, note

HYBRID_BACKENDS = ("memory", "sqlite", "postgres")


@pytest.fixture(params=HYBRID_BACKENDS)
async def hybrid(request: pytest.FixtureRequest, tmp_path: Path,
                 clock: ManualClock) -> AsyncIterator[NativeMemoryProvider]:
    provider = build_native_provider(config_for(str(request.param), tmp_path), clock)
    provider.configure_indexing(settings(ControlledEmbedder(), "sync"))
    await provider.start()
    try:
        yield provider
    finally:
        await provider.close()


def _search(query: str, *scopes: Scope, limit: int = 10, **filters: object) -> SearchRequest:
    return SearchRequest(scopes=scopes or (USER_SCOPE,), query=query, limit=limit, **filters)  # type: ignore[arg-type]


async def test_vector_candidates_find_what_words_miss(hybrid: NativeMemoryProvider,
                                                      clock: ManualClock) -> None:
    teas = await hybrid.add(note("morning routine: jasmine teapots"), make_ctx(clock))
    await hybrid.add(note("evening: espresso shots"), make_ctx(clock))
    result = await hybrid.search(_search("tea"), make_ctx(clock))
    assert result.hits and result.hits[0].record.id == teas.id
    names = [signal.name for signal in result.hits[0].explanation.signals]
    assert names == ["vector_cosine"]  # "tea" is not the word "teapot" (nor its stem)
    assert result.snapshot_id is not None


async def test_both_signals_are_explained(hybrid: NativeMemoryProvider,
                                          clock: ManualClock) -> None:
    both = await hybrid.add(note("green tea with lemon"), make_ctx(clock))
    await hybrid.add(note("green smoothie"), make_ctx(clock))
    result = await hybrid.search(_search("green tea"), make_ctx(clock))
    top = result.hits[0]
    assert top.record.id == both.id
    signals = {signal.name: signal for signal in top.explanation.signals}
    assert set(signals) == {"lexical_bm25", "vector_cosine"}
    assert signals["lexical_bm25"].rank == 1 and signals["vector_cosine"].rank == 1
    assert 0 < signals["vector_cosine"].value <= 1
    assert top.score == pytest.approx(2 / (5 + 1))  # both weights 1, rank 1 each (rrf_k 5)
    assert top.explanation.tie_break == "score desc, id asc"
    assert [hit.rank for hit in result.hits] == list(range(1, len(result.hits) + 1))


async def test_hard_filters_run_before_vector_ranking(hybrid: NativeMemoryProvider,
                                                      clock: ManualClock) -> None:
    """Records a vector would love, each excluded by one hard filter, never surface."""
    now = clock.now()
    wanted = await hybrid.add(note("green tea", memory_type=MemoryType.FACT,
                                   metadata={"topic": "drinks"}), make_ctx(clock))
    excluded = [
        await hybrid.add(note("green tea", scope=OTHER_USER), make_ctx(clock)),
        await hybrid.add(note("green tea", expires_at=now + 5), make_ctx(clock)),
        await hybrid.add(note("green tea", status=RecordStatus.PENDING_REVIEW),
                         make_ctx(clock)),
        await hybrid.add(note("green tea", invalid_at=now + 5), make_ctx(clock)),
        await hybrid.add(note("green tea", valid_from=now + 1000), make_ctx(clock)),
        await hybrid.add(note("green tea", memory_type=MemoryType.NOTE,
                              metadata={"topic": "drinks"}), make_ctx(clock)),
        await hybrid.add(note("green tea", memory_type=MemoryType.FACT,
                              metadata={"topic": "food"}), make_ctx(clock)),
    ]
    deleted = await hybrid.add(note("green tea"), make_ctx(clock))
    await hybrid.delete(DeleteRequest(scope=USER_SCOPE, record_id=deleted.id), make_ctx(clock))
    clock.advance(10)
    result = await hybrid.search(_search("green tea", memory_types=(MemoryType.FACT,),
                                         metadata_filter={"topic": "drinks"}),
                                 make_ctx(clock))
    assert [hit.record.id for hit in result.hits] == [wanted.id]
    unfiltered = await hybrid.search(_search("green tea"), make_ctx(clock))
    ids = {hit.record.id for hit in unfiltered.hits}
    assert ids.isdisjoint({record.id for record in excluded[:5]} | {deleted.id})


async def test_identical_records_break_ties_by_id(hybrid: NativeMemoryProvider,
                                                  clock: ManualClock) -> None:
    added = [await hybrid.add(note("same words"), make_ctx(clock)) for _ in range(5)]
    result = await hybrid.search(_search("same words"), make_ctx(clock))
    assert [hit.record.id for hit in result.hits] == sorted(record.id for record in added)
    assert len({hit.score for hit in result.hits}) == 5  # ranks differ, so scores do


async def test_a_query_embedding_failure_degrades_to_lexical(tmp_path: Path,
                                                             clock: ManualClock) -> None:
    embedder = ControlledEmbedder()
    provider = build_native_provider(config_for("memory", tmp_path), clock)
    provider.configure_indexing(settings(embedder, "sync"))
    await provider.start()
    try:
        record = await provider.add(note("green tea"), make_ctx(clock))
        embedder.failing = True
        result = await provider.search(_search("green tea"), make_ctx(clock))
        assert [hit.record.id for hit in result.hits] == [record.id]
        assert [s.name for s in result.hits[0].explanation.signals] == ["lexical_bm25"]
        await provider.flush_snapshots()
        async with provider.backend.reading() as tx:
            body = await tx.snapshots.get(result.snapshot_id or "")
        assert body is not None and body["degraded"] == ["vector"]
    finally:
        await provider.close()


async def test_vectors_of_another_embedder_never_rank(tmp_path: Path,
                                                      clock: ManualClock) -> None:
    provider = build_native_provider(config_for("sqlite", tmp_path), clock)
    provider.configure_indexing(settings(ControlledEmbedder(), "sync"))
    await provider.start()
    try:
        await provider.add(note("jasmine teapots"), make_ctx(clock))
        provider.configure_indexing(settings(ControlledEmbedder(revision_suffix="-2"), "sync"))
        result = await provider.search(_search("tea"), make_ctx(clock))
        assert result.hits == ()  # no lexical match, and the old vectors do not count
    finally:
        await provider.close()


async def test_recency_and_importance_reweigh(tmp_path: Path, clock: ManualClock) -> None:
    provider = build_native_provider(config_for("memory", tmp_path), clock)
    ranking = RankingConfig(modes=("lexical",), weights={"recency": 4.0, "importance": 1.0},
                            recency_half_life_s=100.0)
    provider.configure_indexing(IndexingSettings(ranking=ranking))  # lexical only
    await provider.start()
    try:
        old = await provider.add(note("green tea green tea"), make_ctx(clock))
        clock.advance(1000)  # ten half-lives
        new = await provider.add(note("green tea and more words here"), make_ctx(clock))
        result = await provider.search(_search("green tea"), make_ctx(clock))
        assert [hit.record.id for hit in result.hits] == [new.id, old.id]
        signals = {s.name: s for s in result.hits[0].explanation.signals}
        assert signals["recency"].value == pytest.approx(1.0)
        assert signals["importance"].value == pytest.approx(0.5)
        await provider.update(UpdateRequest(scope=USER_SCOPE, record_id=old.id, importance=1.0),
                              make_ctx(clock))
        result = await provider.search(_search("green tea"), make_ctx(clock))
        # An update is a write, not an event: the old record is as old as before.
        assert result.hits[0].record.id == new.id
        await provider.update(UpdateRequest(scope=USER_SCOPE, record_id=old.id,
                                            occurred_at=clock.now()), make_ctx(clock))
        result = await provider.search(_search("green tea"), make_ctx(clock))
        assert result.hits[0].record.id == old.id  # it happened just now, and is important
    finally:
        await provider.close()


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_recency_counts_from_the_event_time_and_as_of(tmp_path: Path, clock: ManualClock,
                                                            backend: str) -> None:
    """A conversation imported today is as old as it happened: recency reads
    ``occurred_at``, and an as-of search measures it from its own moment."""
    provider = build_native_provider(config_for(backend, tmp_path), clock)
    ranking = RankingConfig(modes=("lexical",), weights={"recency": 4.0},
                            recency_half_life_s=86_400.0)
    provider.configure_indexing(IndexingSettings(ranking=ranking))
    await provider.start()
    try:
        now = clock.now()
        early = await provider.add(attrs.evolve(note("green tea in spring"),
                                                occurred_at=now - 100 * 86_400),
                                   make_ctx(clock))
        late = await provider.add(attrs.evolve(note("green tea in autumn"),
                                               occurred_at=now - 2 * 86_400), make_ctx(clock))
        result = await provider.search(_search("green tea"), make_ctx(clock))
        assert [hit.record.id for hit in result.hits] == [late.id, early.id]
        recency = {h.record.id: next(s.value for s in h.explanation.signals
                                     if s.name == "recency") for h in result.hits}
        assert recency[late.id] == pytest.approx(0.25)  # two half-lives, not zero
        then = await provider.search(_search("green tea", as_of=now - 99 * 86_400),
                                     make_ctx(clock))
        assert [hit.record.id for hit in then.hits] == [early.id]
        (signal,) = [s for s in then.hits[0].explanation.signals if s.name == "recency"]
        assert signal.value == pytest.approx(0.5)  # one day old as of then
    finally:
        await provider.close()


def _record(record_id: str, importance: float = 0.5, updated_at: float = 0.0) -> MemoryRecord:
    return MemoryRecord(id=record_id, scope=USER_SCOPE, scope_hash=USER_SCOPE.scope_hash,
                        content="x", memory_type=MemoryType.NOTE, version=1, revision="r",
                        content_hash="h", status=RecordStatus.ACTIVE, created_at=0.0,
                        updated_at=updated_at, importance=importance)


def test_fusion_weights_decide_between_signals() -> None:
    records = {"A": _record("A"), "B": _record("B")}
    lexical, vector = [("A", 9.0), ("B", 1.0)], [("B", 0.9), ("A", 0.1)]
    lexical_heavy = RankingConfig(modes=("lexical", "vector"),
                                  weights={"lexical": 3.0, "vector": 1.0})
    vector_heavy = RankingConfig(modes=("lexical", "vector"),
                                 weights={"lexical": 1.0, "vector": 3.0})
    first = retrieval.fuse(lexical_heavy, lexical=lexical, vector=vector, records=records,
                           now=0.0, limit=2)
    second = retrieval.fuse(vector_heavy, lexical=lexical, vector=vector, records=records,
                            now=0.0, limit=2)
    assert [item.record_id for item in first] == ["A", "B"]
    assert [item.record_id for item in second] == ["B", "A"]
    assert first[0].score == pytest.approx(3 / 6 + 1 / 7)  # rrf_k 5: ranks 1 and 2


@hsettings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("ABCDEFGH"), st.floats(-1, 1)), max_size=8,
                unique_by=lambda item: item[0]),
       st.lists(st.tuples(st.sampled_from("ABCDEFGH"), st.floats(0, 50)), max_size=8,
                unique_by=lambda item: item[0]),
       st.integers(1, 10))
def test_fusion_is_a_total_stable_order(vector: list[tuple[str, float]],
                                        lexical: list[tuple[str, float]], limit: int) -> None:
    records = {name: _record(name, importance=(ord(name) % 3) / 2, updated_at=ord(name))
               for name in "ABCDEFGH"}
    ranking = RankingConfig(modes=("lexical", "vector"),
                            weights={"recency": 1.0, "importance": 0.5},
                            recency_half_life_s=10.0)
    hits = retrieval.fuse(ranking, lexical=lexical, vector=vector, records=records,
                          now=100.0, limit=limit)
    again = retrieval.fuse(ranking, lexical=list(lexical), vector=list(vector),
                           records=dict(reversed(records.items())), now=100.0, limit=limit)
    assert hits == again
    keys = [(-hit.score, hit.record_id) for hit in hits]
    assert keys == sorted(keys)
    assert len(hits) == min(limit, len({*dict(lexical), *dict(vector)}))
    for hit in hits:
        names = {signal.name for signal in hit.signals}
        assert names >= {"recency", "importance"}
        assert names & {"lexical_bm25", "vector_cosine"}
