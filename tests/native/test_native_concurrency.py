"""Concurrent writers: compare-and-set never loses an update."""

from __future__ import annotations

import asyncio

from governed_memory import MemoryConflictError
from governed_memory.clock import ManualClock
from governed_memory.requests import GetRequest, HistoryRequest, ListRequest, UpdateRequest
from governed_memory_native import NativeMemoryProvider
from native_support import USER_SCOPE, make_ctx, note

WRITERS = 20


async def test_cas_read_modify_write_loses_no_update(provider: NativeMemoryProvider,
                                                     clock: ManualClock) -> None:
    record = await provider.add(note("0"), make_ctx(clock))
    conflicts = 0

    async def increment() -> None:
        nonlocal conflicts
        while True:
            current = await provider.get(GetRequest(scope=USER_SCOPE, record_id=record.id),
                                         make_ctx(clock))
            await asyncio.sleep(0)  # let the others read the same revision
            try:
                await provider.update(UpdateRequest(
                    scope=USER_SCOPE, record_id=record.id, expected_revision=current.revision,
                    content=str(int(current.content) + 1),
                ), make_ctx(clock))
                return
            except MemoryConflictError:
                conflicts += 1

    await asyncio.gather(*(increment() for _ in range(WRITERS)))
    final = await provider.get(GetRequest(scope=USER_SCOPE, record_id=record.id),
                               make_ctx(clock))
    assert final.content == str(WRITERS)
    assert final.version == 1 + WRITERS
    history = await provider.history(HistoryRequest(scope=USER_SCOPE, record_id=record.id),
                                     make_ctx(clock))
    assert [v.record.version for v in history] == list(range(1, WRITERS + 2))
    assert conflicts > 0  # the test really exercised the race


async def test_concurrent_adds_and_paging(provider: NativeMemoryProvider,
                                          clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    initial = [(await provider.add(note(f"i{i}"), ctx)).id for i in range(10)]

    async def page_through() -> list[str]:
        seen: list[str] = []
        cursor = None
        while True:
            page = await provider.list(ListRequest(scope=USER_SCOPE, limit=3, cursor=cursor), ctx)
            seen.extend(record.id for record in page.items)
            await asyncio.sleep(0)
            if page.next_cursor is None:
                return seen
            cursor = page.next_cursor

    async def insert() -> list[str]:
        added = []
        for i in range(10):
            added.append((await provider.add(note(f"c{i}"), ctx)).id)
            await asyncio.sleep(0)
        return added

    seen, added = await asyncio.gather(page_through(), insert())
    assert seen == sorted(seen) and len(set(seen)) == len(seen)
    assert set(initial) <= set(seen) <= set(initial) | set(added)
