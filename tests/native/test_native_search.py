"""search: lexical BM25 with every filter applied in storage and a deterministic order."""

from __future__ import annotations

import pytest
from governed_memory import MemoryType, MemoryValidationError, RecordStatus, Scope
from governed_memory.clock import ManualClock
from governed_memory.requests import DeleteRequest, SearchRequest, UpdateRequest
from governed_memory_native import NativeMemoryProvider
from native_support import (
    OTHER_TENANT,
    OTHER_USER,
    TENANT_SCOPE,
    USER_SCOPE,
    make_ctx,
    note,
    through_port,
)


def search(query: str, *scopes: Scope, **options: object) -> SearchRequest:
    return SearchRequest(scopes=scopes or (USER_SCOPE,), query=query, **options)  # type: ignore[arg-type]


async def test_search_ranks_by_bm25_with_explanations(provider: NativeMemoryProvider,
                                                      clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    strong = await provider.add(note("green tea green tea every morning"), ctx)
    weak = await provider.add(note("tea sometimes, coffee mostly, water always, juice"), ctx)
    await provider.add(note("likes hiking in the mountains"), ctx)
    for i in range(3):
        await provider.add(note(f"unrelated filler number {i}"), ctx)
    result = await provider.search(search("green tea"), ctx)
    assert [hit.record.id for hit in result.hits] == [strong.id, weak.id]
    assert result.candidates == 2
    assert [hit.rank for hit in result.hits] == [1, 2]
    assert result.hits[0].score > result.hits[1].score > 0
    signal = result.hits[0].explanation.signals[0]
    assert signal.name == "lexical_bm25"
    assert signal.value == result.hits[0].score and signal.rank == 1
    assert result.hits[0].explanation.tie_break == "score desc, id asc"


async def test_ties_are_broken_by_id_ascending(provider: NativeMemoryProvider,
                                               clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    ids = [(await provider.add(note("identical text about tea"), ctx)).id for _ in range(5)]
    await provider.add(note("something else entirely"), ctx)
    result = await provider.search(search("tea"), ctx)
    assert [hit.record.id for hit in result.hits] == sorted(ids)
    assert len({hit.score for hit in result.hits}) == 1


async def test_limit_caps_hits_but_counts_candidates(provider: NativeMemoryProvider,
                                                     clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    for i in range(6):
        await provider.add(note(f"tea note {i}"), ctx)
    result = await provider.search(search("tea", limit=4), ctx)
    assert len(result.hits) == 4 and result.candidates == 6


@pytest.mark.parametrize("query", ["!!! ???", "   ...   ", "*", '"', "NEAR(", "-"])
async def test_queries_without_words_return_nothing(provider: NativeMemoryProvider,
                                                    clock: ManualClock, query: str) -> None:
    ctx = make_ctx(clock)
    await provider.add(note("tea"), ctx)
    result = await provider.search(search(query), ctx)
    assert result.hits == () and result.candidates == 0


@pytest.mark.parametrize("query", [
    'tea OR "', "tea AND NOT", "content:tea", "tea*", "NEAR(tea coffee)", "tea^2 -coffee",
    "(tea", "tea) OR (",
])
async def test_fts_syntax_in_queries_is_just_words(provider: NativeMemoryProvider,
                                                   clock: ManualClock, query: str) -> None:
    ctx = make_ctx(clock)
    record = await provider.add(note("green tea"), ctx)
    result = await provider.search(search(query), ctx)
    assert [hit.record.id for hit in result.hits] == [record.id]


async def test_case_and_diacritics_are_folded(provider: NativeMemoryProvider,
                                              clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    record = await provider.add(note("Meeting at the Café on Tuesday"), ctx)
    for query in ("cafe", "CAFÉ", "café tuesday"):
        result = await provider.search(search(query), ctx)
        assert [hit.record.id for hit in result.hits] == [record.id], query


async def test_search_spans_only_requested_scopes(provider: NativeMemoryProvider,
                                                  clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    mine = await provider.add(note("tea"), ctx)
    tenant = await provider.add(note("tea", scope=TENANT_SCOPE), ctx)
    await provider.add(note("tea", scope=OTHER_USER), ctx)
    await provider.add(note("tea", scope=OTHER_TENANT), ctx)
    only_mine = await provider.search(search("tea"), ctx)
    assert [hit.record.id for hit in only_mine.hits] == [mine.id]
    both = await provider.search(search("tea", USER_SCOPE, TENANT_SCOPE), ctx)
    assert sorted(hit.record.id for hit in both.hits) == sorted([mine.id, tenant.id])


async def test_search_hides_deleted_expired_and_pending(provider: NativeMemoryProvider,
                                                        clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    keep = await provider.add(note("tea keep"), ctx)
    soft = await provider.add(note("tea soft"), ctx)
    hard = await provider.add(note("tea hard"), ctx)
    await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=soft.id), ctx)
    await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=hard.id, hard=True), ctx)
    await provider.add(note("tea pending", status=RecordStatus.PENDING_REVIEW), ctx)
    await provider.add(note("tea expiring", expires_at=clock.now() + 1), ctx)
    clock.advance(1)
    result = await provider.search(search("tea"), make_ctx(clock))
    assert [hit.record.id for hit in result.hits] == [keep.id]
    assert result.candidates == 1


async def test_updated_content_is_reindexed(provider: NativeMemoryProvider,
                                            clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    record = await provider.add(note("green tea"), ctx)
    await provider.update(UpdateRequest(scope=USER_SCOPE, record_id=record.id,
                                        content="black coffee"), ctx)
    assert (await provider.search(search("tea"), ctx)).hits == ()
    hits = (await provider.search(search("coffee"), ctx)).hits
    assert [hit.record.version for hit in hits] == [2]


async def test_memory_type_and_entity_filters(provider: NativeMemoryProvider,
                                              clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    fact = await provider.add(note("tea fact", memory_type=MemoryType.FACT,
                                   entity_ids=("e1", "e2")), ctx)
    pref = await provider.add(note("tea pref", memory_type=MemoryType.PREFERENCE,
                                   entity_ids=("e3",)), ctx)
    await provider.add(note("tea plain"), ctx)
    typed = await provider.search(search("tea", memory_types=(MemoryType.FACT,
                                                               MemoryType.PREFERENCE)), ctx)
    assert sorted(hit.record.id for hit in typed.hits) == sorted([fact.id, pref.id])
    entities = await provider.search(search("tea", entity_ids=("e2", "e3", "zzz")), ctx)
    assert sorted(hit.record.id for hit in entities.hits) == sorted([fact.id, pref.id])
    one = await provider.search(search("tea", entity_ids=("e1",)), ctx)
    assert [hit.record.id for hit in one.hits] == [fact.id]
    assert (await provider.search(search("tea", entity_ids=("nobody",)), ctx)).hits == ()


@pytest.mark.parametrize(("stored", "wanted", "matches"), [
    (1, 1, True),
    (1, 1.0, True),
    (1.5, 1.5, True),
    (1, "1", False),
    ("1", 1, False),
    ("1", "1", True),
    (True, True, True),
    (True, 1, False),
    (1, True, False),
    (False, 0, False),
    (False, False, True),
    (None, None, True),
    ("x", None, False),
    ([1], 1, False),
    ({"a": 1}, 1, False),
    ("tea", "Tea", False),
])
async def test_metadata_filter_respects_json_types(
        provider: NativeMemoryProvider, clock: ManualClock,
        stored: object, wanted: object, matches: bool) -> None:
    ctx = make_ctx(clock)
    record = await provider.add(note("tea", metadata={"field": stored, "other": "x"}), ctx)
    result = await provider.search(search("tea", metadata_filter={"field": wanted}), ctx)
    assert [hit.record.id for hit in result.hits] == ([record.id] if matches else [])


async def test_metadata_filter_needs_every_key(provider: NativeMemoryProvider,
                                               clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    both = await provider.add(note("tea", metadata={"a": "x", "b.c": 2, 'q"uote': 1}), ctx)
    await provider.add(note("tea", metadata={"a": "x"}), ctx)
    result = await provider.search(
        search("tea", metadata_filter={"a": "x", "b.c": 2, 'q"uote': 1}), ctx)
    assert [hit.record.id for hit in result.hits] == [both.id]
    missing = await provider.search(search("tea", metadata_filter={"absent": None}), ctx)
    assert missing.hits == ()


async def test_search_validates_its_request(provider: NativeMemoryProvider,
                                            clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    with pytest.raises(MemoryValidationError):
        await through_port(provider, SearchRequest(scopes=(), query="tea"), ctx)
    with pytest.raises(MemoryValidationError):
        await through_port(provider, search("tea", USER_SCOPE, OTHER_TENANT), ctx)
    with pytest.raises(MemoryValidationError):
        await through_port(provider, search("tea", metadata_filter={"a": [1]}), ctx)
