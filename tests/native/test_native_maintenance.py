"""delete_all, delete_user and purge_expired: physical erasure that never overreaches."""

from __future__ import annotations

import pytest
from governed_memory import MemoryNotFoundError, MemoryValidationError, RecordStatus, Scope
from governed_memory.clock import ManualClock
from governed_memory.cursor import encode_cursor
from governed_memory.requests import (
    DeleteAllRequest,
    DeleteRequest,
    DeleteUserRequest,
    GetRequest,
    HistoryRequest,
    ListRequest,
    PurgeExpiredRequest,
    UpdateRequest,
)
from governed_memory_native import NativeMemoryProvider
from native_support import OTHER_TENANT, OTHER_USER, TENANT_SCOPE, USER_SCOPE, make_ctx, note

SESSION = Scope(tenant_id="acme", user_id="alice", session_id="s1")
PROJECT = Scope(tenant_id="acme", project_id="p", user_id="alice")


async def _count(provider: NativeMemoryProvider, scope: Scope, clock: ManualClock) -> int:
    page = await provider.list(ListRequest(scope=scope, limit=100), make_ctx(clock))
    return len(page.items)


async def test_delete_all_erases_exactly_one_scope(provider: NativeMemoryProvider,
                                                   clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    live = await provider.add(note("live", idempotency_key="i"), ctx)
    soft = await provider.add(note("soft"), ctx)
    await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=soft.id), ctx)
    await provider.add(note("pending", status=RecordStatus.PENDING_REVIEW), ctx)
    await provider.add(note("expiring", expires_at=clock.now() + 1), ctx)
    for scope in (OTHER_USER, TENANT_SCOPE, SESSION, OTHER_TENANT):
        await provider.add(note("bystander", scope=scope), ctx)
    clock.advance(2)
    removed = await provider.delete_all(DeleteAllRequest(scope=USER_SCOPE), make_ctx(clock))
    assert removed == 4
    assert await _count(provider, USER_SCOPE, clock) == 0
    with pytest.raises(MemoryNotFoundError):
        await provider.history(HistoryRequest(scope=USER_SCOPE, record_id=live.id), ctx)
    for scope in (OTHER_USER, TENANT_SCOPE, SESSION, OTHER_TENANT):
        assert await _count(provider, scope, clock) == 1
    # the idempotency entry is gone, so the same add creates a new record
    again = await provider.add(note("live", idempotency_key="i"), make_ctx(clock))
    assert again.id != live.id
    assert await provider.delete_all(DeleteAllRequest(scope=USER_SCOPE), make_ctx(clock)) == 1


async def test_delete_user_erases_every_scope_of_that_user_only(
        provider: NativeMemoryProvider, clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    mine = [await provider.add(note("alice user", idempotency_key="a"), ctx),
            await provider.add(note("alice session", scope=SESSION), ctx),
            await provider.add(note("alice project", scope=PROJECT), ctx)]
    await provider.update(UpdateRequest(scope=USER_SCOPE, record_id=mine[0].id,
                                        content="changed"), ctx)
    soft = await provider.add(note("alice soft"), ctx)
    await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=soft.id), ctx)
    hard = await provider.add(note("alice hard"), ctx)
    await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=hard.id, hard=True,
                                        idempotency_key="h"), ctx)
    bystanders = [await provider.add(note("bob", scope=OTHER_USER), ctx),
                  await provider.add(note("tenant", scope=TENANT_SCOPE), ctx),
                  await provider.add(note("alice elsewhere", scope=OTHER_TENANT), ctx)]

    receipt = await provider.delete_user(DeleteUserRequest(tenant_id="acme", user_id="alice"),
                                         ctx)
    assert receipt.verify()
    assert receipt.request_id == ctx.operation_id
    assert (receipt.tenant_id, receipt.user_id) == ("acme", "alice")
    assert dict(receipt.counts) == {"records": 4, "versions": 6, "index_entries": 3,
                                    "idempotency_entries": 2, "retrieval_snapshots": 0}
    assert set(receipt.scope_hashes) == {USER_SCOPE.scope_hash, SESSION.scope_hash,
                                         PROJECT.scope_hash}
    assert receipt.started_at <= receipt.completed_at
    for record in mine:
        with pytest.raises(MemoryNotFoundError):
            await provider.get(GetRequest(scope=record.scope, record_id=record.id), ctx)
    for record in bystanders:
        assert await provider.get(GetRequest(scope=record.scope, record_id=record.id),
                                  ctx) == record

    second = await provider.delete_user(DeleteUserRequest(tenant_id="acme", user_id="alice"),
                                        make_ctx(clock))
    assert second.verify()
    assert dict(second.counts) == {"records": 0, "versions": 0, "index_entries": 0,
                                   "idempotency_entries": 0, "retrieval_snapshots": 0}
    assert second.scope_hashes == ()


async def test_delete_user_handles_more_than_one_batch(provider: NativeMemoryProvider,
                                                       clock: ManualClock,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("governed_memory_native.erasing.ERASURE_BATCH", 3)
    ctx = make_ctx(clock)
    for i in range(8):
        await provider.add(note(f"m{i}"), ctx)
    receipt = await provider.delete_user(DeleteUserRequest(tenant_id="acme", user_id="alice"),
                                         ctx)
    assert receipt.counts["records"] == 8
    assert await _count(provider, USER_SCOPE, clock) == 0


async def test_purge_expired_pages_through_a_scope(provider: NativeMemoryProvider,
                                                   clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    expiring = []
    for i in range(7):
        record = await provider.add(note(f"m{i}", expires_at=clock.now() + 10,
                                         idempotency_key=f"k{i}")
                                    if i % 2 == 0 else note(f"m{i}"), ctx)
        if i % 2 == 0:
            expiring.append(record)
    other = await provider.add(note("other", scope=OTHER_USER, expires_at=clock.now() + 10), ctx)
    clock.advance(10)
    ctx = make_ctx(clock)
    deleted = 0
    pages = 0
    after = None
    while True:
        page = await provider.purge_expired(PurgeExpiredRequest(scope=USER_SCOPE, limit=3,
                                                                after=after), ctx)
        pages += 1
        deleted += page.deleted
        if page.next_cursor is None:
            break
        after = page.next_cursor
    assert deleted == 4
    assert pages == 3  # 3 + 3 inspected with cursors, then 1 without
    for record in expiring:
        with pytest.raises(MemoryNotFoundError):
            await provider.history(HistoryRequest(scope=USER_SCOPE, record_id=record.id), ctx)
    assert await _count(provider, USER_SCOPE, clock) == 3
    # another scope's expired record is untouched until its own purge (history no longer
    # shows an expired record, so its own purge is what proves it was still stored)
    theirs = await provider.purge_expired(PurgeExpiredRequest(scope=OTHER_USER), ctx)
    assert theirs.deleted == 1
    with pytest.raises(MemoryNotFoundError):
        await provider.history(HistoryRequest(scope=OTHER_USER, record_id=other.id), ctx)


async def test_purge_leaves_unexpired_records(provider: NativeMemoryProvider,
                                              clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    await provider.add(note("later", expires_at=clock.now() + 100), ctx)
    page = await provider.purge_expired(PurgeExpiredRequest(scope=USER_SCOPE, limit=10), ctx)
    assert page.deleted == 0 and page.next_cursor is None
    assert await _count(provider, USER_SCOPE, clock) == 1


async def test_purge_rejects_foreign_cursor(provider: NativeMemoryProvider,
                                            clock: ManualClock) -> None:
    foreign = encode_cursor("list", USER_SCOPE.scope_hash, "x")
    with pytest.raises(MemoryValidationError):
        await provider.purge_expired(PurgeExpiredRequest(scope=USER_SCOPE, after=foreign),
                                     make_ctx(clock))
