"""add and get: what a new record looks like, key ownership, visibility rules."""

from __future__ import annotations

import pytest
from governed_memory import (
    MemoryConflictError,
    MemoryNotFoundError,
    MemoryType,
    MemoryValidationError,
    Provenance,
    RecordStatus,
    Visibility,
)
from governed_memory.clock import ManualClock
from governed_memory.ids import is_record_id
from governed_memory.limits import MAX_METADATA_PROVENANCE_BYTES
from governed_memory.records import IndexState, content_hash
from governed_memory.requests import GetRequest, ListRequest, UpdateRequest
from governed_memory_native import NativeMemoryProvider
from native_support import (
    OTHER_TENANT,
    OTHER_USER,
    TENANT_SCOPE,
    USER_SCOPE,
    make_ctx,
    note,
    through_port,
)


async def test_add_builds_a_complete_first_version(provider: NativeMemoryProvider,
                                                   clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    older = await provider.add(note("prefers aisle seats"), ctx)  # the one it supersedes
    record = await provider.add(note(
        "prefers window seats", key="seat", memory_type=MemoryType.PREFERENCE,
        metadata={"source": "chat", "n": 2, "nested": {"a": [1, 2]}},
        provenance=Provenance(source_type="chat", session_id="s1"),
        visibility=Visibility.SHARED, importance=0.9, entity_ids=("e1", "e2"),
        valid_from=1.0, invalid_at=2e9, supersedes=older.id,
        expires_at=clock.now() + 3600,
    ), ctx)
    assert record.supersedes == older.id
    assert is_record_id(record.id)
    assert record.version == 1
    assert record.revision
    assert record.content_hash == content_hash("prefers window seats")
    assert record.scope_hash == USER_SCOPE.scope_hash
    assert record.created_at == record.updated_at == ctx.now
    assert record.status is RecordStatus.ACTIVE
    assert record.index_state is IndexState.INDEXED
    assert record.provenance.operation_id == ctx.operation_id
    assert record.provenance.session_id == "s1"
    fetched = await provider.get(GetRequest(scope=USER_SCOPE, record_id=record.id), ctx)
    assert fetched == record
    by_key = await provider.get(GetRequest(scope=USER_SCOPE, key="seat"), ctx)
    assert by_key == record


async def test_explicit_operation_id_in_provenance_is_kept(provider: NativeMemoryProvider,
                                                           clock: ManualClock) -> None:
    record = await provider.add(note(provenance=Provenance(operation_id="upstream")),
                                make_ctx(clock))
    assert record.provenance.operation_id == "upstream"


async def test_reads_return_detached_copies(provider: NativeMemoryProvider,
                                            clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    metadata = {"tags": ["a"]}
    record = await provider.add(note(metadata=metadata), ctx)
    metadata["tags"].append("mutated-after-add")
    record.metadata["tags"].append("mutated-result")
    fetched = await provider.get(GetRequest(scope=USER_SCOPE, record_id=record.id), ctx)
    assert fetched.metadata["tags"] == ["a"]
    fetched.metadata["tags"].append("mutated-read")
    again = await provider.get(GetRequest(scope=USER_SCOPE, record_id=record.id), ctx)
    assert again.metadata["tags"] == ["a"]


@pytest.mark.parametrize("scope", [OTHER_USER, OTHER_TENANT, TENANT_SCOPE])
async def test_get_never_crosses_scopes(provider: NativeMemoryProvider, clock: ManualClock,
                                        scope: object) -> None:
    ctx = make_ctx(clock)
    record = await provider.add(note(key="k"), ctx)
    with pytest.raises(MemoryNotFoundError):
        await provider.get(GetRequest(scope=scope, record_id=record.id), ctx)  # type: ignore[arg-type]
    with pytest.raises(MemoryNotFoundError):
        await provider.get(GetRequest(scope=scope, key="k"), ctx)  # type: ignore[arg-type]


async def test_get_unknown_id_is_not_found(provider: NativeMemoryProvider,
                                           clock: ManualClock) -> None:
    with pytest.raises(MemoryNotFoundError):
        await provider.get(GetRequest(scope=USER_SCOPE, record_id="01ARZ3NDEKTSV4RRFFQ69G5FAV"),
                           make_ctx(clock))


async def test_pending_review_is_invisible_to_get(provider: NativeMemoryProvider,
                                                  clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    record = await provider.add(note(key="k", status=RecordStatus.PENDING_REVIEW), ctx)
    assert record.status is RecordStatus.PENDING_REVIEW
    with pytest.raises(MemoryNotFoundError):
        await provider.get(GetRequest(scope=USER_SCOPE, record_id=record.id), ctx)
    with pytest.raises(MemoryNotFoundError):
        await provider.get(GetRequest(scope=USER_SCOPE, key="k"), ctx)


async def test_expired_record_is_invisible(provider: NativeMemoryProvider,
                                           clock: ManualClock) -> None:
    record = await provider.add(note(expires_at=clock.now() + 10), make_ctx(clock))
    await provider.get(GetRequest(scope=USER_SCOPE, record_id=record.id), make_ctx(clock))
    clock.advance(10)  # expires_at <= now means expired
    with pytest.raises(MemoryNotFoundError):
        await provider.get(GetRequest(scope=USER_SCOPE, record_id=record.id), make_ctx(clock))


async def test_live_key_is_unique_per_scope(provider: NativeMemoryProvider,
                                            clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    first = await provider.add(note("one", key="k"), ctx)
    with pytest.raises(MemoryConflictError):
        await provider.add(note("two", key="k"), ctx)
    other = await provider.add(note("three", key="k", scope=OTHER_USER), ctx)
    assert other.id != first.id
    assert (await provider.get(GetRequest(scope=USER_SCOPE, key="k"), ctx)).content == "one"


async def test_pending_review_record_holds_its_key(provider: NativeMemoryProvider,
                                                   clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    await provider.add(note(key="k", status=RecordStatus.PENDING_REVIEW), ctx)
    with pytest.raises(MemoryConflictError):
        await provider.add(note(key="k"), ctx)


async def test_expired_record_frees_its_key(provider: NativeMemoryProvider,
                                            clock: ManualClock) -> None:
    old = await provider.add(note("old", key="k", expires_at=clock.now() + 5), make_ctx(clock))
    clock.advance(6)
    ctx = make_ctx(clock)
    new = await provider.add(note("new", key="k"), ctx)
    assert new.id != old.id
    assert (await provider.get(GetRequest(scope=USER_SCOPE, key="k"), ctx)).id == new.id


async def test_invalid_add_is_rejected_before_storage(provider: NativeMemoryProvider,
                                                      clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    with pytest.raises(MemoryValidationError):
        await through_port(provider, note("x" * (64 * 1024 + 1)), ctx)
    with pytest.raises(MemoryValidationError):
        await through_port(provider, note(status=RecordStatus.DELETED), ctx)
    with pytest.raises(MemoryValidationError):
        await through_port(provider, GetRequest(scope=USER_SCOPE), ctx)
    assert (await provider.list(ListRequest(scope=USER_SCOPE), ctx)).items == ()


async def test_non_finite_times_are_refused_without_writing(provider: NativeMemoryProvider,
                                                            clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    with pytest.raises(MemoryValidationError):
        await through_port(provider, note(expires_at=float("inf")), ctx)
    page = await provider.list(ListRequest(scope=USER_SCOPE), ctx)
    assert page.items == ()
    with pytest.raises(MemoryValidationError):
        await through_port(provider, note(expires_at=float("inf"), idempotency_key="i"), ctx)
    assert (await provider.list(ListRequest(scope=USER_SCOPE), ctx)).items == ()


def _padded_metadata(spare: int) -> dict[str, str]:
    """Metadata whose canonical JSON leaves exactly ``spare`` bytes of the shared budget."""
    return {"x": "a" * (MAX_METADATA_PROVENANCE_BYTES - len('{"x":""}') - spare)}


async def test_metadata_budget_counts_the_stamped_operation_id(
        provider: NativeMemoryProvider, clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    stamped = len(f'{{"operation_id":"{ctx.operation_id}"}}')
    too_big = note(metadata=_padded_metadata(stamped - 1))
    too_big.validate()  # the request alone fits: only the stored provenance does not
    with pytest.raises(MemoryValidationError) as raised:
        await provider.add(too_big, ctx)
    assert raised.value.field == "metadata"
    assert (await provider.list(ListRequest(scope=USER_SCOPE), ctx)).items == ()

    # what add accepts, update can rewrite: the budget is the same one on both paths
    record = await provider.add(note(metadata=_padded_metadata(stamped)), ctx)
    updated = await provider.update(UpdateRequest(scope=USER_SCOPE, record_id=record.id,
                                                  importance=0.9), make_ctx(clock))
    assert updated.version == 2 and updated.provenance == record.provenance
