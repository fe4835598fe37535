"""Erasing a tombstone, and the metadata budget an update shares with stored provenance."""

from __future__ import annotations

import pytest
from governed_memory import (
    MemoryNotFoundError,
    MemoryValidationError,
    Permission,
    Principal,
    PrincipalKind,
    Provenance,
    Scope,
)
from governed_memory.clock import ManualClock
from governed_memory.operation_context import OperationContext
from governed_memory.requests import (
    AddRequest,
    DeleteRequest,
    GetRequest,
    HistoryRequest,
    UpdateRequest,
)
from governed_memory_native import build_native_provider

SCOPE = Scope("t1", user_id="u1")
PRINCIPAL = Principal("svc", PrincipalKind.SERVICE, "t1", permissions=frozenset(Permission))


@pytest.fixture(params=["memory", "sqlite"])
async def provider(request: pytest.FixtureRequest, tmp_path):  # type: ignore[no-untyped-def]
    config = {"backend": request.param}
    if request.param == "sqlite":
        config["path"] = str(tmp_path / "m.db")
    clock = ManualClock()
    p = build_native_provider(config, clock)
    await p.start()
    yield p
    await p.close()


def ctx() -> OperationContext:
    return OperationContext(operation_id="op_test", principal=PRINCIPAL, now=1_800_000_000.0)


async def test_a_soft_deleted_record_can_still_be_erased_hard(provider) -> None:  # type: ignore[no-untyped-def]
    record = await provider.add(AddRequest(scope=SCOPE, content="to be forgotten"), ctx())
    await provider.delete(DeleteRequest(scope=SCOPE, record_id=record.id), ctx())
    assert len(await provider.history(HistoryRequest(scope=SCOPE, record_id=record.id), ctx())) == 2
    result = await provider.delete(DeleteRequest(scope=SCOPE, record_id=record.id, hard=True),
                                   ctx())
    assert result.hard
    with pytest.raises(MemoryNotFoundError):
        await provider.history(HistoryRequest(scope=SCOPE, record_id=record.id), ctx())
    with pytest.raises(MemoryNotFoundError):
        await provider.delete(DeleteRequest(scope=SCOPE, record_id=record.id), ctx())


async def test_a_second_soft_delete_is_not_found(provider) -> None:  # type: ignore[no-untyped-def]
    record = await provider.add(AddRequest(scope=SCOPE, content="once"), ctx())
    await provider.delete(DeleteRequest(scope=SCOPE, record_id=record.id), ctx())
    with pytest.raises(MemoryNotFoundError):
        await provider.delete(DeleteRequest(scope=SCOPE, record_id=record.id), ctx())


async def test_update_metadata_counts_against_the_stored_provenance(provider) -> None:  # type: ignore[no-untyped-def]
    provenance = Provenance(source_type="chat", source_id="m" * 1000)
    record = await provider.add(AddRequest(scope=SCOPE, content="c", provenance=provenance), ctx())
    big = {"notes": "x" * (16 * 1024 - 500)}
    UpdateRequest(scope=SCOPE, record_id=record.id, metadata=big).validate()  # alone it fits
    with pytest.raises(MemoryValidationError) as info:
        await provider.update(UpdateRequest(scope=SCOPE, record_id=record.id, metadata=big), ctx())
    assert info.value.field == "metadata"
    stored = await provider.get(GetRequest(scope=SCOPE, record_id=record.id), ctx())
    assert stored.version == 1 and dict(stored.metadata) == {}
