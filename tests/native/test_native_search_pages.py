"""Paging a search past ``limit`` with ``next_cursor``, on every native backend: on a
quiet store the pages concatenated are the search's top results in order, without
repeats; a cursor is bound to the search that issued it."""

from __future__ import annotations

from pathlib import Path

import pytest
from governed_memory import GovernedMemoryManager, Principal, PrincipalKind, Scope
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryValidationError
from governed_memory_native import build_native_provider
from native_support import config_for

ALICE = Principal("user:alice", PrincipalKind.USER, "acme", "alice")
SCOPE = Scope("acme", user_id="alice")


async def test_pages_concatenate_to_the_top_results(backend: str, tmp_path: Path) -> None:
    clock = ManualClock()
    manager = GovernedMemoryManager(build_native_provider(config_for(backend, tmp_path),
                                                         clock), clock=clock)
    async with manager:
        for n in range(8):
            await manager.add(ALICE, SCOPE, f"green tea note {n} " + "tea " * (n % 3))
            clock.advance(1.0)
        await manager.add(ALICE, SCOPE, "coffee only")
        top = await manager.search(ALICE, SCOPE, "green tea", limit=9)
        assert len(top.hits) == 8 and top.next_cursor is None
        pages, cursor = [], None
        while True:
            page = await manager.search(ALICE, SCOPE, "green tea", limit=3, cursor=cursor)
            pages.append([hit.record.id for hit in page.hits])
            cursor = page.next_cursor
            if cursor is None:
                break
        assert [len(p) for p in pages] == [3, 3, 2]
        assert [i for p in pages for i in p] == [hit.record.id for hit in top.hits]

        first = await manager.search(ALICE, SCOPE, "green tea", limit=3)
        assert first.next_cursor is not None
        for other in ({"query": "coffee", "limit": 3}, {"query": "green tea", "limit": 4}):
            with pytest.raises(MemoryValidationError) as refused:
                await manager.search(ALICE, SCOPE, other["query"], limit=other["limit"],
                                     cursor=first.next_cursor)
            assert refused.value.field == "cursor"
        with pytest.raises(MemoryValidationError):
            await manager.search(ALICE, SCOPE, "green tea", limit=3, cursor="c1.garbage")
        with pytest.raises(MemoryValidationError):  # another scope's cursor
            await manager.search(ALICE, Scope("acme", user_id="alice", project_id="p"),
                                 "green tea", limit=3, cursor=first.next_cursor)
