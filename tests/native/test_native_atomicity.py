"""A rejected or failed write leaves storage exactly as it was."""

from __future__ import annotations

from typing import Any

import pytest
from governed_memory import (
    GovernedMemoryError,
    MemoryConflictError,
    MemoryRecord,
    MemoryValidationError,
    MemoryVersion,
)
from governed_memory.clock import ManualClock
from governed_memory.requests import (
    DeleteRequest,
    GetRequest,
    HistoryRequest,
    ListRequest,
    SearchRequest,
    UpdateRequest,
)
from governed_memory_native import NativeMemoryProvider
from governed_memory_native.memory.repositories import MemoryIdempotency, MemoryVersions
from governed_memory_native.sql.idempotency import SqlIdempotency
from governed_memory_native.sql.versions import SqlVersions
from native_support import USER_SCOPE, make_ctx, note, through_port


async def _snapshot(provider: NativeMemoryProvider,
                    clock: ManualClock) -> tuple[tuple[MemoryRecord, ...], list[Any], list[str]]:
    ctx = make_ctx(clock)
    page = await provider.list(ListRequest(scope=USER_SCOPE, limit=100), ctx)
    histories = [await provider.history(HistoryRequest(scope=USER_SCOPE, record_id=r.id), ctx)
                 for r in page.items]
    hits = await provider.search(SearchRequest(scopes=(USER_SCOPE,), query="tea coffee"), ctx)
    return page.items, histories, [hit.record.id for hit in hits.hits]


async def test_rejected_writes_change_nothing(provider: NativeMemoryProvider,
                                              clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    record = await provider.add(note("green tea", key="k", idempotency_key="i"), ctx)
    before = await _snapshot(provider, clock)
    rejected = [
        through_port(provider, note("x" * (64 * 1024 + 1)), ctx),
        provider.add(note("coffee", key="k"), ctx),
        provider.add(note("coffee", idempotency_key="i"), ctx),
        provider.update(UpdateRequest(scope=USER_SCOPE, record_id=record.id,
                                      expected_revision="stale", content="coffee"), ctx),
        through_port(provider, UpdateRequest(scope=USER_SCOPE, record_id=record.id,
                                             importance=2.0), ctx),
        provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=record.id,
                                      expected_revision="stale"), ctx),
    ]
    for attempt in rejected:
        with pytest.raises((MemoryConflictError, MemoryValidationError)):
            await attempt
    assert await _snapshot(provider, clock) == before


def _repository_class(backend: str, memory: type[Any], sql: type[Any]) -> type[Any]:
    """Where a write of the backend under test lives: both SQL dialects share theirs."""
    return memory if backend == "memory" else sql


async def test_failure_mid_add_rolls_back(provider: NativeMemoryProvider, clock: ManualClock,
                                          backend: str,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(self: object, version: MemoryVersion) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(_repository_class(backend, MemoryVersions, SqlVersions), "append", broken)
    with pytest.raises(RuntimeError):
        await provider.add(note("green tea", key="k"), make_ctx(clock))
    monkeypatch.undo()
    assert await _snapshot(provider, clock) == ((), [], [])
    # the key was never taken
    await provider.add(note("green tea", key="k"), make_ctx(clock))


async def test_failure_mid_update_rolls_back(provider: NativeMemoryProvider,
                                             clock: ManualClock, backend: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    record = await provider.add(note("green tea"), make_ctx(clock))
    before = await _snapshot(provider, clock)

    async def broken(self: object, entry: object) -> None:
        raise GovernedMemoryError("idempotency store failed")

    monkeypatch.setattr(_repository_class(backend, MemoryIdempotency, SqlIdempotency), "put",
                        broken)
    with pytest.raises(GovernedMemoryError):
        await provider.update(UpdateRequest(scope=USER_SCOPE, record_id=record.id,
                                            content="black coffee", idempotency_key="u"),
                              make_ctx(clock))
    with pytest.raises(GovernedMemoryError):
        await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=record.id,
                                            hard=True, idempotency_key="d"), make_ctx(clock))
    monkeypatch.undo()
    assert await _snapshot(provider, clock) == before
    current = await provider.get(GetRequest(scope=USER_SCOPE, record_id=record.id),
                                 make_ctx(clock))
    assert current == record
