"""Idempotency keys: a retried write returns its first result; a different one conflicts."""

from __future__ import annotations

import pytest
from governed_memory import (
    DeleteRequest,
    HistoryRequest,
    ListRequest,
    ManualClock,
    MemoryConflictError,
    UpdateRequest,
)
from governed_memory_native import NativeMemoryProvider
from native_support import OTHER_USER, USER_SCOPE, make_ctx, note


async def test_add_replay_returns_first_result_without_writing(
        provider: NativeMemoryProvider, clock: ManualClock) -> None:
    first = await provider.add(note(idempotency_key="i-1"), make_ctx(clock))
    clock.advance(5)
    again = await provider.add(note(idempotency_key="i-1"), make_ctx(clock))
    assert again == first
    page = await provider.list(ListRequest(scope=USER_SCOPE), make_ctx(clock))
    assert [record.id for record in page.items] == [first.id]


async def test_add_replay_after_update_returns_the_add_snapshot(
        provider: NativeMemoryProvider, clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    first = await provider.add(note(idempotency_key="i-1"), ctx)
    await provider.update(UpdateRequest(scope=USER_SCOPE, record_id=first.id, content="new"), ctx)
    assert await provider.add(note(idempotency_key="i-1"), ctx) == first


async def test_same_key_different_request_conflicts(provider: NativeMemoryProvider,
                                                    clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    await provider.add(note("one", idempotency_key="i-1"), ctx)
    with pytest.raises(MemoryConflictError):
        await provider.add(note("two", idempotency_key="i-1"), ctx)
    page = await provider.list(ListRequest(scope=USER_SCOPE), ctx)
    assert len(page.items) == 1


async def test_keys_are_per_scope(provider: NativeMemoryProvider, clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    mine = await provider.add(note(idempotency_key="i-1"), ctx)
    theirs = await provider.add(note(scope=OTHER_USER, idempotency_key="i-1"), ctx)
    assert mine.id != theirs.id


async def test_update_replay(provider: NativeMemoryProvider, clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    record = await provider.add(note(), ctx)
    request = UpdateRequest(scope=USER_SCOPE, record_id=record.id,
                            expected_revision=record.revision, content="v2",
                            idempotency_key="u-1")
    first = await provider.update(request, ctx)
    # a retry after success must not trip over its own (now stale) expected_revision
    assert await provider.update(request, ctx) == first
    history = await provider.history(HistoryRequest(scope=USER_SCOPE, record_id=record.id), ctx)
    assert len(history) == 2
    with pytest.raises(MemoryConflictError):
        await provider.update(UpdateRequest(scope=USER_SCOPE, record_id=record.id,
                                            content="v3", idempotency_key="u-1"), ctx)


@pytest.mark.parametrize("hard", [False, True])
async def test_delete_replay(provider: NativeMemoryProvider, clock: ManualClock,
                             hard: bool) -> None:
    ctx = make_ctx(clock)
    record = await provider.add(note(), ctx)
    request = DeleteRequest(scope=USER_SCOPE, record_id=record.id, hard=hard,
                            idempotency_key="d-1")
    first = await provider.delete(request, ctx)
    assert await provider.delete(request, ctx) == first
    other = await provider.add(note("other"), ctx)
    with pytest.raises(MemoryConflictError):
        await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=other.id, hard=hard,
                                            idempotency_key="d-1"), ctx)
