"""Idempotency keys: a retried write returns its first result; a different one conflicts."""

from __future__ import annotations

import attrs
import pytest
from governed_memory import MemoryConflictError
from governed_memory.clock import ManualClock
from governed_memory.operation_context import OperationContext
from governed_memory.requests import (
    AddRequest,
    DeleteAllRequest,
    DeleteRequest,
    DeleteUserRequest,
    HistoryRequest,
    ListRequest,
    PurgeExpiredRequest,
    UpdateRequest,
)
from governed_memory_native import NativeMemoryProvider
from native_support import OTHER_USER, TENANT_SCOPE, USER_SCOPE, make_ctx, note


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


def _as_sent(ctx: OperationContext,
             request: AddRequest | UpdateRequest | DeleteRequest) -> OperationContext:
    """What the governed manager hands on: the fingerprint of the request before policies."""
    return attrs.evolve(ctx, request_fingerprint=request.fingerprint())


async def test_replay_matches_the_request_as_sent_not_as_transformed(
        provider: NativeMemoryProvider, clock: ManualClock) -> None:
    # A TTL policy stamps expires_at from the clock, so each attempt reaches the provider
    # with a different request; the caller sent the same one both times.
    sent = note(idempotency_key="i-1")
    first = await provider.add(attrs.evolve(sent, expires_at=clock.now() + 3600),
                               _as_sent(make_ctx(clock), sent))
    clock.advance(5)
    retried = attrs.evolve(sent, expires_at=clock.now() + 3600)
    assert retried.fingerprint() != attrs.evolve(
        sent, expires_at=first.expires_at).fingerprint()
    assert await provider.add(retried, _as_sent(make_ctx(clock), sent)) == first
    page = await provider.list(ListRequest(scope=USER_SCOPE), make_ctx(clock))
    assert [record.id for record in page.items] == [first.id]

    update_sent = UpdateRequest(scope=USER_SCOPE, record_id=first.id, content="v2",
                                idempotency_key="u-1")
    updated = await provider.update(attrs.evolve(update_sent, expires_at=clock.now() + 60),
                                    _as_sent(make_ctx(clock), update_sent))
    clock.advance(5)
    again = await provider.update(attrs.evolve(update_sent, expires_at=clock.now() + 60),
                                  _as_sent(make_ctx(clock), update_sent))
    assert again == updated and again.version == 2

    # a different request as sent is still a different request
    with pytest.raises(MemoryConflictError):
        await provider.add(attrs.evolve(sent, expires_at=clock.now() + 3600),
                           _as_sent(make_ctx(clock), note("other", idempotency_key="i-1")))
    delete_sent = DeleteRequest(scope=USER_SCOPE, record_id=first.id, idempotency_key="d-1")
    deleted = await provider.delete(delete_sent, _as_sent(make_ctx(clock), delete_sent))
    other = DeleteRequest(scope=USER_SCOPE, record_id=first.id, hard=True,
                          idempotency_key="d-1")
    with pytest.raises(MemoryConflictError):
        await provider.delete(delete_sent, _as_sent(make_ctx(clock), other))
    assert await provider.delete(delete_sent, _as_sent(make_ctx(clock), delete_sent)) == deleted


async def test_replaying_writes_of_a_hard_deleted_record_is_refused(
        provider: NativeMemoryProvider, clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    add = note("the door code is 4711", idempotency_key="a-1")
    record = await provider.add(add, ctx)
    update = UpdateRequest(scope=USER_SCOPE, record_id=record.id, content="now 0815",
                           idempotency_key="u-1")
    await provider.update(update, ctx)
    soft = DeleteRequest(scope=USER_SCOPE, record_id=record.id, idempotency_key="d-1")
    soft_result = await provider.delete(soft, ctx)
    hard = DeleteRequest(scope=USER_SCOPE, record_id=record.id, hard=True,
                         idempotency_key="d-2")
    hard_result = await provider.delete(hard, ctx)

    clock.advance(5)
    ctx = make_ctx(clock)
    with pytest.raises(MemoryConflictError, match="created with this idempotency key was erased"):
        await provider.add(add, ctx)
    with pytest.raises(MemoryConflictError, match="updated with this idempotency key was erased"):
        await provider.update(update, ctx)
    with pytest.raises(MemoryConflictError, match="different request"):
        await provider.add(note("something else", idempotency_key="a-1"), ctx)
    # the deletes' own results hold no content and stay replayable
    assert await provider.delete(soft, ctx) == soft_result
    assert await provider.delete(hard, ctx) == hard_result
    assert (await provider.list(ListRequest(scope=USER_SCOPE), ctx)).items == ()


async def test_erasing_a_user_or_scope_removes_idempotency_tombstones(
        provider: NativeMemoryProvider, clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    for scope in (USER_SCOPE, TENANT_SCOPE):
        record = await provider.add(note("erased", scope=scope, idempotency_key="a-1"), ctx)
        await provider.delete(DeleteRequest(scope=scope, record_id=record.id, hard=True), ctx)
        with pytest.raises(MemoryConflictError, match="erased"):
            await provider.add(note("erased", scope=scope, idempotency_key="a-1"), ctx)

    receipt = await provider.delete_user(DeleteUserRequest(tenant_id="acme", user_id="alice"),
                                         ctx)
    assert receipt.counts["idempotency_entries"] == 1 and receipt.counts["records"] == 0
    assert await provider.delete_all(DeleteAllRequest(scope=TENANT_SCOPE), ctx) == 0
    # nothing of either is kept any more, so the key starts afresh
    for scope in (USER_SCOPE, TENANT_SCOPE):
        fresh = await provider.add(note("erased", scope=scope, idempotency_key="a-1"), ctx)
        assert fresh.version == 1


async def test_purging_an_expired_record_drops_its_idempotency_entries(
        provider: NativeMemoryProvider, clock: ManualClock) -> None:
    """A deliberate difference from hard delete: expiry is by design, not a request to
    forget, so a retry after the purge is a new write (and purge bounds the table)."""
    ctx = make_ctx(clock)
    add = note("short-lived", expires_at=clock.now() + 10, idempotency_key="a-1")
    first = await provider.add(add, ctx)
    clock.advance(10)
    purged = await provider.purge_expired(PurgeExpiredRequest(scope=USER_SCOPE),
                                          make_ctx(clock))
    assert purged.deleted == 1
    again = await provider.add(add, make_ctx(clock))
    assert again.id != first.id
