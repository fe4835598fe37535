"""The read-time filters are part of a search's cache identity: a page cached for one
filter never answers a search with another (a ``restricted`` memory kept out of a
prompt must not come back from the cache of an unfiltered search)."""

from __future__ import annotations

import attrs
import pytest
from cache_support import ALICE, ALICE_SCOPE, SHARED, make_ctx
from governed_memory.cache import search_digest
from governed_memory.records import Visibility
from governed_memory.requests import SearchRequest

BASE = SearchRequest(scopes=(ALICE_SCOPE, SHARED), query="launch plans", limit=10)
CHANGES: list[dict[str, object]] = [
    {"visibility": Visibility.PRIVATE},
    {"visibility": Visibility.SHARED},
    {"source_types": ("tool",)},
    {"source_types": ("user",)},
    {"sensitivity": ("public",)},
    {"exclude_sensitivity": ("public",)},
    {"exclude_sensitivity": ("restricted",)},
]


def digest(request: SearchRequest) -> str:
    return search_digest(request, make_ctx(0.0, ALICE), "native@1")


@pytest.mark.parametrize("change", CHANGES)
def test_each_read_filter_changes_the_digest(change: dict[str, object]) -> None:
    assert digest(attrs.evolve(BASE, **change)) != digest(BASE)


def test_the_filters_are_told_apart_from_one_another() -> None:
    """Keeping a label and excluding it are different searches, as are two labels."""
    digests = {digest(attrs.evolve(BASE, **change)) for change in CHANGES}
    assert len(digests) == len(CHANGES)
