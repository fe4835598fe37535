"""list: exact scope, ascending ids, bounded pages, cursors that survive inserts."""

from __future__ import annotations

import pytest
from governed_memory import MemoryType, MemoryValidationError, RecordStatus
from governed_memory.clock import ManualClock
from governed_memory.cursor import encode_cursor
from governed_memory.requests import DeleteRequest, ListRequest
from governed_memory_native import NativeMemoryProvider
from native_support import OTHER_USER, TENANT_SCOPE, USER_SCOPE, make_ctx, note, through_port


async def _all_ids(provider: NativeMemoryProvider, clock: ManualClock, limit: int) -> list[str]:
    ids: list[str] = []
    cursor = None
    while True:
        page = await provider.list(ListRequest(scope=USER_SCOPE, limit=limit, cursor=cursor),
                                   make_ctx(clock))
        ids.extend(record.id for record in page.items)
        if page.next_cursor is None:
            return ids
        cursor = page.next_cursor


async def test_list_pages_ascending_by_id(provider: NativeMemoryProvider,
                                          clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    added = [(await provider.add(note(f"memory {i}"), ctx)).id for i in range(7)]
    await provider.add(note("someone else", scope=OTHER_USER), ctx)
    await provider.add(note("tenant level", scope=TENANT_SCOPE), ctx)
    assert await _all_ids(provider, clock, limit=3) == sorted(added)
    assert await _all_ids(provider, clock, limit=7) == sorted(added)
    assert await _all_ids(provider, clock, limit=100) == sorted(added)


async def test_full_page_sets_cursor_then_empty_page_ends(provider: NativeMemoryProvider,
                                                          clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    for i in range(2):
        await provider.add(note(f"memory {i}"), ctx)
    page = await provider.list(ListRequest(scope=USER_SCOPE, limit=2), ctx)
    assert len(page.items) == 2 and page.next_cursor is not None
    last = await provider.list(ListRequest(scope=USER_SCOPE, limit=2, cursor=page.next_cursor),
                               ctx)
    assert last.items == () and last.next_cursor is None


async def test_list_hides_deleted_expired_and_pending(provider: NativeMemoryProvider,
                                                      clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    keep = await provider.add(note("keep"), ctx)
    gone = await provider.add(note("gone"), ctx)
    await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=gone.id), ctx)
    await provider.add(note("pending", status=RecordStatus.PENDING_REVIEW), ctx)
    await provider.add(note("short", expires_at=clock.now() + 1), ctx)
    clock.advance(1)
    page = await provider.list(ListRequest(scope=USER_SCOPE), make_ctx(clock))
    assert [record.id for record in page.items] == [keep.id]


async def test_list_filters_memory_types(provider: NativeMemoryProvider,
                                         clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    fact = await provider.add(note("a fact", memory_type=MemoryType.FACT), ctx)
    await provider.add(note("a note"), ctx)
    pref = await provider.add(note("a pref", memory_type=MemoryType.PREFERENCE), ctx)
    page = await provider.list(ListRequest(
        scope=USER_SCOPE, memory_types=(MemoryType.FACT, MemoryType.PREFERENCE)), ctx)
    assert [record.id for record in page.items] == [fact.id, pref.id]


async def test_cursor_survives_concurrent_inserts(provider: NativeMemoryProvider,
                                                  clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    before = [(await provider.add(note(f"before {i}"), ctx)).id for i in range(4)]
    seen: list[str] = []
    page = await provider.list(ListRequest(scope=USER_SCOPE, limit=2), ctx)
    seen.extend(record.id for record in page.items)
    after = [(await provider.add(note(f"during {i}"), ctx)).id for i in range(3)]
    cursor = page.next_cursor
    while cursor is not None:
        page = await provider.list(ListRequest(scope=USER_SCOPE, limit=2, cursor=cursor), ctx)
        seen.extend(record.id for record in page.items)
        cursor = page.next_cursor
    assert seen == sorted(before + after)
    assert len(set(seen)) == len(seen)


@pytest.mark.parametrize("cursor", [
    "garbage",
    "c1.!!!",
    encode_cursor("purge", USER_SCOPE.scope_hash, "01ARZ3NDEKTSV4RRFFQ69G5FAV"),
    encode_cursor("list", OTHER_USER.scope_hash, "01ARZ3NDEKTSV4RRFFQ69G5FAV"),
])
async def test_bad_or_foreign_cursor_is_a_validation_error(
        provider: NativeMemoryProvider, clock: ManualClock, cursor: str) -> None:
    with pytest.raises(MemoryValidationError):
        await provider.list(ListRequest(scope=USER_SCOPE, cursor=cursor), make_ctx(clock))


@pytest.mark.parametrize("limit", [0, 101, -1])
async def test_page_size_is_bounded(provider: NativeMemoryProvider, clock: ManualClock,
                                    limit: int) -> None:
    with pytest.raises(MemoryValidationError):
        await through_port(provider, ListRequest(scope=USER_SCOPE, limit=limit),
                           make_ctx(clock))
