"""Read-time filters: visibility, provenance source and sensitivity are applied before
the top-k, within the searched scopes only.

A provider that filtered the best ``limit`` candidates afterwards would answer a
filtered search with fewer hits than asked for (often none) while matching records
were left unread; one that ignored a filter would hand a prompt what the caller asked
to keep out. So each store below holds records that outrank the one a filter wants,
and asks for ``limit=1``. A record's sensitivity label is the string
``metadata["sensitivity"]`` (``governed_memory.read_filters``), so these tests run for a
provider that declares ``metadata_filters`` and searches at all.
"""

from __future__ import annotations

from typing import Any

from governed_memory.records import MemoryRecord, Provenance, Visibility

from governed_memory_conformance.base import ConformanceBase, scenario
from governed_memory_conformance.capabilities import requires
from governed_memory_conformance.harness import Harness
from governed_memory_conformance.scopes import CHILD, ELSEWHERE, HOME, PARENT, SIBLING
from governed_memory_conformance.suite.search import require_search

NOISE = 6
TARGET = "a walrus dozing by the pier in the morning fog with gulls"
WANTED: dict[str, Any] = {"visibility": Visibility.SHARED, "source_types": ("tool",),
                          "sensitivity": ("public",)}
"""The attributes of the target: each filter alone selects it."""


async def _outranked(h: Harness) -> tuple[MemoryRecord, MemoryRecord]:
    """Noise that outranks everything and passes no filter, the target that passes
    every one, and a record whose ``sensitivity`` is not a string (so: unlabelled)."""
    for _ in range(NOISE):
        await h.add("walrus walrus walrus walrus", visibility=Visibility.PRIVATE,
                    provenance=Provenance(source_type="conversation"),
                    metadata={"sensitivity": "restricted"})
    target = await h.add(TARGET, visibility=Visibility.SHARED,
                         provenance=Provenance(source_type="tool"),
                         metadata={"sensitivity": "public"})
    unlabelled = await h.add("a walrus census from a boat far out in the bay",
                             metadata={"sensitivity": 7})
    return target, unlabelled


async def _ids(h: Harness, limit: int, scopes: tuple[Any, ...] = (HOME,),
               **filters: Any) -> list[str]:
    return [hit.record.id for hit in (await h.search("walrus", scopes, limit,
                                                     **filters)).hits]


class ReadFilterTests(ConformanceBase):
    @requires("metadata_filters")
    @scenario
    async def test_read_filters_apply_before_the_limit(self, h: Harness) -> None:
        require_search(h)
        target, unlabelled = await _outranked(h)
        for name, value in WANTED.items():
            found = await _ids(h, 1, **{name: value})
            assert found == [target.id], (
                f"{name}={value!r} with limit=1 returned {found}: the filter must be applied "
                "before the top-k, not to it")
        assert await _ids(h, 1, exclude_sensitivity=("restricted",)) in (
            [target.id], [unlabelled.id]), "exclude_sensitivity applied after the top-k"
        assert set(await _ids(h, 100, exclude_sensitivity=("restricted",))) == {
            target.id, unlabelled.id}, "exclusion keeps unlabelled records and other labels"
        assert await _ids(h, 100, sensitivity=("public", "internal")) == [target.id]
        assert await _ids(h, 100, sensitivity=("Public",)) == [], "labels compare exactly"
        assert await _ids(h, 100, **WANTED, exclude_sensitivity=("restricted",)) == [
            target.id], "filters combine (all must hold)"
        assert await _ids(h, 100, visibility=Visibility.SHARED,
                          source_types=("conversation",)) == [], (
            "a combination nothing passes returns nothing, not the best of the rest")

    @requires("metadata_filters")
    @scenario
    async def test_read_filters_stay_within_the_searched_scopes(self, h: Harness) -> None:
        require_search(h)
        target, _ = await _outranked(h)
        twins = {scope: await h.add(TARGET, scope=scope, visibility=Visibility.SHARED,
                                    provenance=Provenance(source_type="tool"),
                                    metadata={"sensitivity": "public"})
                 for scope in (PARENT, SIBLING, CHILD, ELSEWHERE)}
        assert await _ids(h, 10, **WANTED) == [target.id], (
            "a filtered search returned another scope's matching record")
        both = set(await _ids(h, 10, (HOME, CHILD), **WANTED))
        assert both == {target.id, twins[CHILD].id}
        assert await _ids(h, 10, (SIBLING,), exclude_sensitivity=("restricted",)) == [
            twins[SIBLING].id]
