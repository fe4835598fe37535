"""The read-time filters (visibility, provenance source, sensitivity) are hard filters:
every backend applies them in storage, before the top-k, on the lexical, vector, hybrid
and vector-index paths, and within the searched scopes only.

Each store holds many records that outrank the one record a filter wants: if a filter
were applied after the top-k (or not at all), ``limit=1`` would hand back an outranking
record, or nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryValidationError
from governed_memory.records import MemoryRecord, Provenance, Visibility
from governed_memory.requests import SearchRequest, UpdateRequest
from governed_memory.scope import Scope
from governed_memory_native import NativeMemoryProvider, build_native_provider
from governed_memory_native.retrieval.ranking.wire import query_fields, query_from_fields
from governed_memory_native.storage.values import SearchQuery
from indexing_support import ControlledEmbedder, settings
from native_support import OTHER_USER, USER_SCOPE, config_for, make_ctx, note

PATHS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "lexical": (("lexical",), {}),
    "vector": (("vector",), {}),
    "hybrid": (("lexical", "vector"), {}),
    "vector-index": (("vector",), {"vector_index_min_vectors": 0}),
}
"""Retrieval modes and provider settings: each reaches candidates another way."""

NOISE = 8
LABEL = 'top "secret" ✓'
"""A label a JSON encoding escapes: storage must compare it as text, not as its bytes."""


@pytest.fixture(params=sorted(PATHS))
def path(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def store(backend: str, path: str, tmp_path: Path,
                clock: ManualClock) -> AsyncIterator[NativeMemoryProvider]:
    modes, extra = PATHS[path]
    provider = build_native_provider(config_for(backend, tmp_path, **extra), clock)
    if modes != ("lexical",):
        provider.configure_indexing(settings(ControlledEmbedder(), modes=modes))
    await provider.start()
    try:
        yield provider
    finally:
        await provider.close()


async def _add(provider: NativeMemoryProvider, clock: ManualClock, content: str,
               scope: Scope = USER_SCOPE, **fields: Any) -> MemoryRecord:
    return await provider.add(note(content, scope=scope, **fields), make_ctx(clock))


async def _filled(provider: NativeMemoryProvider, clock: ManualClock
                  ) -> tuple[MemoryRecord, MemoryRecord, MemoryRecord]:
    """Noise that outranks everything and matches no filter; the target, which matches
    every filter; an odd record whose ``sensitivity`` is a number (so: no label); and a
    twin of the target in another user's scope."""
    for _ in range(NOISE):
        await _add(provider, clock, "walrus walrus walrus walrus",
                   visibility=Visibility.PRIVATE, provenance=Provenance(source_type="user"),
                   metadata={"sensitivity": "restricted"})
    target = await _add(provider, clock,
                        "a walrus rested on the quiet harbour beach at dawn with gulls",
                        visibility=Visibility.SHARED, provenance=Provenance(source_type="tool"),
                        metadata={"sensitivity": LABEL})
    odd = await _add(provider, clock,
                     "the walrus colony counted by the survey team from a distant boat",
                     metadata={"sensitivity": 3})
    twin = await _add(provider, clock,
                      "a walrus rested on the quiet harbour beach at dawn with gulls",
                      scope=OTHER_USER, visibility=Visibility.SHARED,
                      provenance=Provenance(source_type="tool"),
                      metadata={"sensitivity": LABEL})
    return target, odd, twin


async def _found(provider: NativeMemoryProvider, clock: ManualClock, limit: int,
                 scopes: tuple[Scope, ...] = (USER_SCOPE,), **filters: Any) -> list[str]:
    request = SearchRequest(scopes=scopes, query="walrus", limit=limit, **filters)
    request.validate()
    result = await provider.search(request, make_ctx(clock))
    return [hit.record.id for hit in result.hits]


async def test_each_filter_is_applied_before_the_top_k(store: NativeMemoryProvider,
                                                       clock: ManualClock) -> None:
    target, odd, _ = await _filled(store, clock)
    assert len(await _found(store, clock, 100)) == NOISE + 2
    every: dict[str, dict[str, Any]] = {
        "visibility": {"visibility": Visibility.SHARED},
        "source": {"source_types": ("tool", "import")},
        "sensitivity": {"sensitivity": (LABEL, "public")},
        "all": {"visibility": Visibility.SHARED, "source_types": ("tool",),
                "sensitivity": (LABEL,), "exclude_sensitivity": ("restricted",)},
    }
    for name, filters in every.items():
        assert await _found(store, clock, 1, **filters) == [target.id], name
        assert await _found(store, clock, 100, **filters) == [target.id], name
    # Excluding a label keeps what has no label (a number is not one) and other labels.
    assert await _found(store, clock, 2, exclude_sensitivity=("restricted",)) in (
        [target.id, odd.id], [odd.id, target.id])
    assert set(await _found(store, clock, 100, exclude_sensitivity=("restricted", LABEL))
               ) == {odd.id}
    # A filter nothing passes answers nothing, rather than the best of the rest.
    assert await _found(store, clock, 5, visibility=Visibility.PRIVATE,
                        source_types=("tool",)) == []
    assert await _found(store, clock, 5, sensitivity=("Restricted",)) == []


async def test_filters_stay_within_the_searched_scopes(store: NativeMemoryProvider,
                                                       clock: ManualClock) -> None:
    target, _, twin = await _filled(store, clock)
    wanted = {"visibility": Visibility.SHARED, "source_types": ("tool",),
              "sensitivity": (LABEL,)}
    assert await _found(store, clock, 10, **wanted) == [target.id]
    assert await _found(store, clock, 10, (OTHER_USER,), **wanted) == [twin.id]
    both = await _found(store, clock, 10, (USER_SCOPE, OTHER_USER), **wanted)
    assert set(both) == {target.id, twin.id}


async def test_filters_follow_an_update(store: NativeMemoryProvider,
                                        clock: ManualClock) -> None:
    """The stored attributes are what is filtered, as they stand after a write (the
    lexical postings keep copies of the visibility)."""
    target, _, _ = await _filled(store, clock)
    ctx = make_ctx(clock)
    await store.update(UpdateRequest(scope=USER_SCOPE, record_id=target.id,
                                     expected_revision=target.revision,
                                     visibility=Visibility.PRIVATE,
                                     metadata={"sensitivity": "restricted"}), ctx)
    assert await _found(store, clock, 10, visibility=Visibility.SHARED) == []
    assert await _found(store, clock, 10, sensitivity=(LABEL,)) == []
    assert await _found(store, clock, 10, source_types=("tool",)) == [target.id]


def test_the_ranking_workers_receive_every_filter() -> None:
    """Lexical searches ranked in worker processes carry the filters over the wire."""
    query = SearchQuery(scope_hashes=("sh1:a",), tokens=("walrus",), now=5.0, limit=3,
                        visibilities=(Visibility.SHARED,), source_types=("tool",),
                        sensitivity=("public",), exclude_sensitivity=("restricted",))
    assert query_from_fields(query_fields(query)) == query


@pytest.mark.parametrize(("filters", "field"), [
    ({"visibility": "shared"}, "visibility"),
    ({"source_types": ["tool"]}, "source_types"),
    ({"source_types": ("",)}, "source_types[0]"),
    ({"sensitivity": ("a\x00b",)}, "sensitivity[0]"),
    ({"sensitivity": tuple(f"l{i}" for i in range(33))}, "sensitivity"),
    ({"sensitivity": ("x",), "exclude_sensitivity": ("x",)}, "exclude_sensitivity"),
])
def test_malformed_filters_are_refused_with_their_field(filters: dict[str, Any],
                                                        field: str) -> None:
    request = SearchRequest(scopes=(USER_SCOPE,), query="walrus", **filters)
    with pytest.raises(MemoryValidationError) as refused:
        request.validate()
    assert refused.value.field == field
