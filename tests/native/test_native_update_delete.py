"""update, delete and history: compare-and-set, tombstones, hard erasure."""

from __future__ import annotations

import pytest
from governed_memory import (
    MemoryConflictError,
    MemoryNotFoundError,
    MemoryType,
    MemoryValidationError,
    RecordStatus,
    Visibility,
)
from governed_memory.clock import ManualClock
from governed_memory.records import IndexState, VersionOperation, content_hash
from governed_memory.requests import (
    AddRequest,
    DeleteRequest,
    GetRequest,
    HistoryRequest,
    UpdateRequest,
)
from governed_memory_native import NativeMemoryProvider
from native_support import OTHER_USER, USER_SCOPE, make_ctx, note, through_port

MISSING_ID = "01ARZ3NDEKTSV4RRFFQ69G5FAV"


async def test_update_changes_given_fields_only(provider: NativeMemoryProvider,
                                                clock: ManualClock) -> None:
    original = await provider.add(note("old text", key="k", metadata={"a": 1},
                                       importance=0.2, entity_ids=("e",)), make_ctx(clock))
    clock.advance(60)
    ctx = make_ctx(clock)
    updated = await provider.update(UpdateRequest(
        scope=USER_SCOPE, record_id=original.id, expected_revision=original.revision,
        content="new text", memory_type=MemoryType.FACT, visibility=Visibility.SHARED,
    ), ctx)
    assert updated.version == 2
    assert updated.revision != original.revision
    assert updated.content == "new text" and updated.content_hash == content_hash("new text")
    assert updated.memory_type is MemoryType.FACT and updated.visibility is Visibility.SHARED
    assert updated.metadata == {"a": 1} and updated.importance == 0.2
    assert updated.entity_ids == ("e",) and updated.key == "k"
    assert updated.created_at == original.created_at and updated.updated_at == ctx.now
    assert updated.index_state is IndexState.INDEXED
    assert await provider.get(GetRequest(scope=USER_SCOPE, record_id=original.id), ctx) == updated


async def test_update_sets_and_clears_expiry(provider: NativeMemoryProvider,
                                             clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    record = await provider.add(note(), ctx)
    later = clock.now() + 100
    with_expiry = await provider.update(UpdateRequest(scope=USER_SCOPE, record_id=record.id,
                                                      expires_at=later), ctx)
    assert with_expiry.expires_at == later
    cleared = await provider.update(UpdateRequest(scope=USER_SCOPE, record_id=record.id,
                                                  clear_expires_at=True), ctx)
    assert cleared.expires_at is None and cleared.version == 3
    with pytest.raises(MemoryValidationError):
        await through_port(provider, UpdateRequest(scope=USER_SCOPE, record_id=record.id,
                                                   expires_at=later,
                                                   clear_expires_at=True), ctx)


async def test_update_with_stale_revision_conflicts(provider: NativeMemoryProvider,
                                                    clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    record = await provider.add(note(), ctx)
    await provider.update(UpdateRequest(scope=USER_SCOPE, record_id=record.id,
                                        expected_revision=record.revision, content="v2"), ctx)
    with pytest.raises(MemoryConflictError):
        await provider.update(UpdateRequest(scope=USER_SCOPE, record_id=record.id,
                                            expected_revision=record.revision, content="v3"), ctx)
    current = await provider.get(GetRequest(scope=USER_SCOPE, record_id=record.id), ctx)
    assert current.content == "v2" and current.version == 2


async def test_update_missing_record(provider: NativeMemoryProvider, clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    with pytest.raises(MemoryNotFoundError):
        await provider.update(UpdateRequest(scope=USER_SCOPE, record_id=MISSING_ID,
                                            content="x"), ctx)
    with pytest.raises(MemoryConflictError):
        await provider.update(UpdateRequest(scope=USER_SCOPE, record_id=MISSING_ID,
                                            expected_revision="r1", content="x"), ctx)


async def test_update_of_deleted_record(provider: NativeMemoryProvider,
                                        clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    record = await provider.add(note(), ctx)
    await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=record.id), ctx)
    with pytest.raises(MemoryConflictError):
        await provider.update(UpdateRequest(scope=USER_SCOPE, record_id=record.id,
                                            expected_revision=record.revision, content="x"), ctx)
    with pytest.raises(MemoryNotFoundError):
        await provider.update(UpdateRequest(scope=USER_SCOPE, record_id=record.id,
                                            content="x"), ctx)


async def test_update_of_expired_or_foreign_record_is_not_found(
        provider: NativeMemoryProvider, clock: ManualClock) -> None:
    record = await provider.add(note(expires_at=clock.now() + 1), make_ctx(clock))
    with pytest.raises(MemoryNotFoundError):
        await provider.update(UpdateRequest(scope=OTHER_USER, record_id=record.id,
                                            content="x"), make_ctx(clock))
    clock.advance(2)
    with pytest.raises(MemoryNotFoundError):
        await provider.update(UpdateRequest(scope=USER_SCOPE, record_id=record.id,
                                            content="x"), make_ctx(clock))


async def test_an_expired_record_is_gone_for_history_and_soft_delete(
        provider: NativeMemoryProvider, clock: ManualClock) -> None:
    record = await provider.add(note(expires_at=clock.now() + 1), make_ctx(clock))
    history = await provider.history(HistoryRequest(scope=USER_SCOPE, record_id=record.id),
                                     make_ctx(clock))
    assert [v.record for v in history] == [record]
    clock.advance(1)
    ctx = make_ctx(clock)
    with pytest.raises(MemoryNotFoundError):
        await provider.history(HistoryRequest(scope=USER_SCOPE, record_id=record.id), ctx)
    with pytest.raises(MemoryNotFoundError):
        await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=record.id), ctx)
    with pytest.raises(MemoryConflictError):
        await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=record.id,
                                            expected_revision=record.revision), ctx)
    # erasure still reaches it
    result = await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=record.id,
                                                 hard=True), ctx)
    assert result.hard and result.record_id == record.id
    with pytest.raises(MemoryNotFoundError):
        await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=record.id, hard=True),
                              ctx)


async def test_an_expired_tombstone_has_no_history(provider: NativeMemoryProvider,
                                                   clock: ManualClock) -> None:
    record = await provider.add(note(expires_at=clock.now() + 10), make_ctx(clock))
    await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=record.id), make_ctx(clock))
    history = await provider.history(HistoryRequest(scope=USER_SCOPE, record_id=record.id),
                                     make_ctx(clock))
    assert [v.operation for v in history] == [VersionOperation.ADD, VersionOperation.DELETE]
    clock.advance(10)
    with pytest.raises(MemoryNotFoundError):
        await provider.history(HistoryRequest(scope=USER_SCOPE, record_id=record.id),
                               make_ctx(clock))


async def test_soft_delete_leaves_a_tombstone_in_history(provider: NativeMemoryProvider,
                                                         clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    record = await provider.add(note(key="k"), ctx)
    updated = await provider.update(UpdateRequest(scope=USER_SCOPE, record_id=record.id,
                                                  content="changed"), ctx)
    result = await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=record.id,
                                                 expected_revision=updated.revision), ctx)
    assert not result.hard and result.version == 3 and result.revision not in (
        record.revision, updated.revision)
    assert result.record_id == record.id and result.scope_hash == USER_SCOPE.scope_hash
    with pytest.raises(MemoryNotFoundError):
        await provider.get(GetRequest(scope=USER_SCOPE, record_id=record.id), ctx)
    history = await provider.history(HistoryRequest(scope=USER_SCOPE, record_id=record.id), ctx)
    assert [v.operation for v in history] == [VersionOperation.ADD, VersionOperation.UPDATE,
                                              VersionOperation.DELETE]
    assert [v.record.version for v in history] == [1, 2, 3]
    assert history[0].record == record and history[1].record == updated
    tombstone = history[2].record
    assert tombstone.status is RecordStatus.DELETED and tombstone.revision == result.revision
    assert all(v.operation_id == ctx.operation_id for v in history)
    assert all(v.recorded_at == ctx.now for v in history)
    # the key is free again
    fresh = await provider.add(note("again", key="k"), ctx)
    assert fresh.id != record.id


async def test_delete_cas_and_missing(provider: NativeMemoryProvider, clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    record = await provider.add(note(), ctx)
    with pytest.raises(MemoryConflictError):
        await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=record.id,
                                            expected_revision="stale"), ctx)
    await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=record.id,
                                        expected_revision=record.revision), ctx)
    with pytest.raises(MemoryConflictError):
        await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=record.id,
                                            expected_revision=record.revision), ctx)
    with pytest.raises(MemoryNotFoundError):
        await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=record.id), ctx)
    with pytest.raises(MemoryNotFoundError):
        await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=MISSING_ID), ctx)


async def test_delete_in_another_scope_is_not_found(provider: NativeMemoryProvider,
                                                    clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    record = await provider.add(note(), ctx)
    with pytest.raises(MemoryNotFoundError):
        await provider.delete(DeleteRequest(scope=OTHER_USER, record_id=record.id, hard=True),
                              ctx)
    assert await provider.get(GetRequest(scope=USER_SCOPE, record_id=record.id), ctx) == record


async def test_hard_delete_erases_record_and_history(provider: NativeMemoryProvider,
                                                     clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    record = await provider.add(note(key="k", idempotency_key="add-1"), ctx)
    result = await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=record.id,
                                                 hard=True), ctx)
    assert result.hard and result.version is None and result.revision is None
    with pytest.raises(MemoryNotFoundError):
        await provider.history(HistoryRequest(scope=USER_SCOPE, record_id=record.id), ctx)
    with pytest.raises(MemoryNotFoundError):
        await provider.get(GetRequest(scope=USER_SCOPE, key="k"), ctx)
    # its idempotency entry stays as a tombstone: the same add is refused, not re-applied
    with pytest.raises(MemoryConflictError, match="erased"):
        await provider.add(note(key="k", idempotency_key="add-1"), ctx)
    again = await provider.add(note(key="k"), ctx)  # the key itself is free again
    assert again.id != record.id


async def test_pending_review_record_can_be_deleted(provider: NativeMemoryProvider,
                                                    clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    record = await provider.add(note(status=RecordStatus.PENDING_REVIEW), ctx)
    result = await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=record.id), ctx)
    assert result.version == 2


async def test_history_is_scoped(provider: NativeMemoryProvider, clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    record = await provider.add(note(), ctx)
    with pytest.raises(MemoryNotFoundError):
        await provider.history(HistoryRequest(scope=OTHER_USER, record_id=record.id), ctx)
    with pytest.raises(MemoryNotFoundError):
        await provider.history(HistoryRequest(scope=USER_SCOPE, record_id=MISSING_ID), ctx)


async def test_history_shows_pending_records(provider: NativeMemoryProvider,
                                             clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    record = await provider.add(AddRequest(scope=USER_SCOPE, content="x",
                                           status=RecordStatus.PENDING_REVIEW), ctx)
    history = await provider.history(HistoryRequest(scope=USER_SCOPE, record_id=record.id), ctx)
    assert [v.record for v in history] == [record]
