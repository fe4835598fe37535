"""The event outbox: a write's committed event commits with the write, and only then.

Each write stores the event the activity port drafted (completed from the provider's
own result) in the write's transaction; a rejected or rolled-back write leaves none,
and ``pending_events`` / ``acknowledge_events`` hand them to a dispatcher.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from governed_memory import (
    MemoryConflictError,
    MemoryNotFoundError,
    MemoryValidationError,
    RecordStatus,
)
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryStorageError
from governed_memory.outbox import EventOutboxProvider
from governed_memory.requests import (
    ApproveRequest,
    DeleteAllRequest,
    DeleteRequest,
    DeleteUserRequest,
    ListRequest,
    PurgeExpiredRequest,
    RejectRequest,
    UpdateRequest,
)
from governed_memory_native import NativeMemoryProvider, build_native_provider
from killed_writer import kill_writers, records_and_event_ids
from native_support import USER_SCOPE, build, config_for, make_ctx, note, through_port
from outbox_support import outbox_ctx
from sqlite_support import cancel_on_statement, in_transaction


async def _all_events(provider: NativeMemoryProvider) -> list[object]:
    return list(await provider.pending_events(1000))


async def test_declares_the_outbox(provider: NativeMemoryProvider) -> None:
    assert provider.capabilities().event_outbox is True
    assert isinstance(provider, EventOutboxProvider)


async def test_every_write_stores_its_completed_event(provider: NativeMemoryProvider,
                                                      clock: ManualClock) -> None:
    ctx = outbox_ctx(clock)
    added = await provider.add(note("green tea"), ctx)
    ctx_update = outbox_ctx(clock, "update")
    updated = await provider.update(
        UpdateRequest(scope=USER_SCOPE, record_id=added.id, content="black tea"), ctx_update)
    ctx_soft = outbox_ctx(clock, "delete")
    soft = await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=added.id), ctx_soft)
    ctx_hard = outbox_ctx(clock, "delete")
    await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=added.id, hard=True), ctx_hard)
    held = await provider.add(note("pending", status=RecordStatus.PENDING_REVIEW),
                              make_ctx(clock))
    ctx_approve = outbox_ctx(clock, "approve")
    approved = await provider.approve(ApproveRequest(scope=USER_SCOPE, record_id=held.id),
                                      ctx_approve)
    held2 = await provider.add(note("pending 2", status=RecordStatus.PENDING_REVIEW),
                               make_ctx(clock))
    ctx_reject = outbox_ctx(clock, "reject")
    await provider.reject(RejectRequest(scope=USER_SCOPE, record_id=held2.id), ctx_reject)
    await provider.add(note("short lived", expires_at=clock.now() + 1), make_ctx(clock))
    clock.advance(2)
    ctx_purge = outbox_ctx(clock, "purge_expired")
    await provider.purge_expired(PurgeExpiredRequest(scope=USER_SCOPE), ctx_purge)
    ctx_all = outbox_ctx(clock, "delete_all")
    await provider.delete_all(DeleteAllRequest(scope=USER_SCOPE), ctx_all)
    await provider.add(note("again"), make_ctx(clock))
    ctx_user = outbox_ctx(clock, "delete_user")
    receipt = await provider.delete_user(DeleteUserRequest(tenant_id="acme", user_id="alice"),
                                         ctx_user)

    events = {event.operation_id: event for event in await provider.pending_events(100)}
    # Only the writes that carried a draft stored an event, in commit order.
    assert list(events) == [c.operation_id for c in (
        ctx, ctx_update, ctx_soft, ctx_hard, ctx_approve, ctx_reject, ctx_purge, ctx_all,
        ctx_user)]
    first = events[ctx.operation_id]
    assert (first.record_ids, first.versions, first.content_hashes, first.count) == (
        (added.id,), (1,), (added.content_hash,), 1)
    assert first.event_id == ctx.committed_event.event_id  # type: ignore[union-attr]
    assert first.type == "memory.write.committed" and first.outcome == "committed"
    assert events[ctx_update.operation_id].versions == (updated.version,)
    assert events[ctx_update.operation_id].content_hashes == (updated.content_hash,)
    assert events[ctx_soft.operation_id].versions == (soft.version,)
    assert (events[ctx_hard.operation_id].record_ids, events[ctx_hard.operation_id].versions
            ) == ((added.id,), ())
    assert events[ctx_approve.operation_id].versions == (approved.version,)
    assert events[ctx_reject.operation_id].record_ids == (held2.id,)
    assert events[ctx_purge.operation_id].count == 1
    assert events[ctx_all.operation_id].count == 1  # the approved record
    user_event = events[ctx_user.operation_id]
    assert user_event.count == receipt.total == 1
    assert user_event.reasons == (f"receipt {receipt.receipt_hash}",)
    assert user_event.scope_hashes == receipt.scope_hashes
    assert all("tea" not in event.to_json() for event in events.values())


async def test_writes_without_a_draft_store_nothing(provider: NativeMemoryProvider,
                                                    clock: ManualClock) -> None:
    record = await provider.add(note(), make_ctx(clock))
    await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=record.id), make_ctx(clock))
    assert await _all_events(provider) == []


async def test_rejected_writes_store_no_event(provider: NativeMemoryProvider,
                                              clock: ManualClock) -> None:
    record = await provider.add(note(key="k"), make_ctx(clock))
    refused = [
        (provider.add(note("other", key="k"), outbox_ctx(clock)), MemoryConflictError),
        (provider.update(UpdateRequest(scope=USER_SCOPE, record_id=record.id,
                                       expected_revision="stale",
                                       content="x"), outbox_ctx(clock, "update")),
         MemoryConflictError),
        (provider.delete(DeleteRequest(scope=USER_SCOPE, record_id="0" * 26), outbox_ctx(clock,
                                                                                         "delete")),
         MemoryNotFoundError),
        (provider.approve(ApproveRequest(scope=USER_SCOPE, record_id=record.id), outbox_ctx(clock,
                                                                                            "approve")),
         MemoryConflictError),
        (through_port(provider, note("x" * (64 * 1024 + 1)), outbox_ctx(clock)),
         MemoryValidationError),
    ]
    for call, error in refused:
        with pytest.raises(error):
            await call
    assert await _all_events(provider) == []


@contextlib.asynccontextmanager
async def _failing_commit(provider: NativeMemoryProvider) -> AsyncIterator[None]:
    """Every write unit fails after its body ran (the event already stored)."""
    backend = provider.backend
    real = backend.run_write

    async def run_write(body: Callable[[Any], Awaitable[Any]], **hints: Any) -> Any:
        async def failing(tx: Any) -> Any:
            await body(tx)
            raise MemoryStorageError("injected failure before commit")
        return await real(failing, **hints)

    backend.run_write = run_write  # type: ignore[method-assign]
    try:
        yield
    finally:
        backend.run_write = real  # type: ignore[method-assign]


async def test_a_rolled_back_write_leaves_neither_record_nor_event(
        provider: NativeMemoryProvider, clock: ManualClock) -> None:
    kept = await provider.add(note("kept"), outbox_ctx(clock))
    async with _failing_commit(provider):
        with pytest.raises(MemoryStorageError):
            await provider.add(note("lost"), outbox_ctx(clock))
        with pytest.raises(MemoryStorageError):
            await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=kept.id, hard=True),
                                  outbox_ctx(clock, "delete"))
        with pytest.raises(MemoryStorageError):
            await provider.delete_user(DeleteUserRequest(tenant_id="acme", user_id="alice"),
                                       outbox_ctx(clock, "delete_user"))
    page = await provider.list(ListRequest(scope=USER_SCOPE), make_ctx(clock))
    assert [r.id for r in page.items] == [kept.id]
    events = await provider.pending_events(10)
    assert [event.record_ids for event in events] == [(kept.id,)]


async def test_replays_store_one_event_per_operation(provider: NativeMemoryProvider,
                                                     clock: ManualClock) -> None:
    first_ctx = outbox_ctx(clock)
    first = await provider.add(note(idempotency_key="i"), first_ctx)
    # The same operation delivered twice (same event id): still one event.
    again = await provider.add(note(idempotency_key="i"), first_ctx)
    # A retry is a new operation: it gets its own event, naming the same record.
    retry_ctx = outbox_ctx(clock)
    retried = await provider.add(note(idempotency_key="i"), retry_ctx)
    assert first.id == again.id == retried.id
    events = await provider.pending_events(10)
    assert [e.operation_id for e in events] == [first_ctx.operation_id, retry_ctx.operation_id]
    assert {e.record_ids for e in events} == {(first.id,)}
    delete_ctx = outbox_ctx(clock, "delete")
    request = DeleteRequest(scope=USER_SCOPE, record_id=first.id, idempotency_key="d")
    await provider.delete(request, delete_ctx)
    await provider.delete(request, outbox_ctx(clock, "delete"))
    assert len(await provider.pending_events(10)) == 4


async def test_pending_oldest_first_and_acknowledge(provider: NativeMemoryProvider,
                                                    clock: ManualClock) -> None:
    ids = []
    for n in range(5):
        ctx = outbox_ctx(clock)
        await provider.add(note(f"note {n}"), ctx)
        assert ctx.committed_event is not None
        ids.append(ctx.committed_event.event_id)
    assert [e.event_id for e in await provider.pending_events(3)] == ids[:3]
    await provider.acknowledge_events([ids[0], ids[2], "evt_unknown"])
    await provider.acknowledge_events([ids[0]])  # at least once: a second ack is harmless
    assert [e.event_id for e in await provider.pending_events(10)] == [ids[1], *ids[3:]]
    await provider.acknowledge_events([])
    for bad in (0, 1001, True, "3"):
        with pytest.raises(MemoryValidationError):
            await provider.pending_events(bad)  # type: ignore[arg-type]
    with pytest.raises(MemoryValidationError):
        await provider.acknowledge_events("evt_1")


async def test_events_survive_a_restart(tmp_path: Path, clock: ManualClock) -> None:
    provider = build("sqlite", tmp_path, clock)
    await provider.start()
    ctx = outbox_ctx(clock)
    record = await provider.add(note(), ctx)
    await provider.close()
    reopened = build("sqlite", tmp_path, clock)
    await reopened.start()
    try:
        events = await reopened.pending_events(10)
        assert [e.record_ids for e in events] == [(record.id,)]
        assert events[0].event_id == ctx.committed_event.event_id  # type: ignore[union-attr]
    finally:
        await reopened.close()


async def test_a_killed_writer_leaves_every_committed_record_with_its_event(
        sql_backend: str, tmp_path: Path, clock: ManualClock) -> None:
    """SIGKILL a writer process at an arbitrary point of a stream of writes: after
    restart the records and the stored events name exactly the same ids, so no
    committed write lost its event and no event names a record that is not there."""
    config = config_for(sql_backend, tmp_path)
    await kill_writers(config)
    records, named = await records_and_event_ids(config, clock)
    assert len(records) >= 15
    assert sorted(named) == sorted(records)  # one event per record, none without one


@pytest.mark.parametrize("storm", [False, True], ids=["once", "storm"])
@pytest.mark.parametrize("operation", ["add", "hard delete", "delete_user"])
async def test_cancelled_writes_keep_record_and_event_together(
        tmp_path: Path, clock: ManualClock, operation: str, storm: bool) -> None:
    """Cancel a write while it awaits each of its statements in turn: whenever its effect
    is visible afterwards its event is stored, and whenever it is not, no event is."""
    provider = build_native_provider({"path": str(tmp_path / "memory.db")}, clock)
    await provider.start()
    try:
        for target in range(1, 100):
            victim = await provider.add(note(f"victim {target}"), make_ctx(clock))
            ctx = outbox_ctx(clock, operation)
            if operation == "add":
                call = provider.add(note(f"added {target}"), ctx)
            elif operation == "hard delete":
                call = provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=victim.id,
                                                     hard=True), ctx)
            else:
                call = provider.delete_user(DeleteUserRequest(tenant_id="acme", user_id="alice"),
                                            ctx)
            task = asyncio.create_task(call)
            with (cancel_on_statement(task, target, storm=storm),
                  contextlib.suppress(asyncio.CancelledError)):
                await task
            assert not in_transaction(provider)
            page = await provider.list(ListRequest(scope=USER_SCOPE, limit=100), make_ctx(clock))
            live = {record.id for record in page.items}
            applied = ({r.id for r in page.items if r.content == f"added {target}"} != set()
                       if operation == "add" else victim.id not in live)
            events = await provider.pending_events(1000)
            stored = [e for e in events if e.operation_id == ctx.operation_id]
            assert len(stored) == int(applied), (operation, target, applied)
            await provider.acknowledge_events([e.event_id for e in events])
            if not task.cancelled():
                break
        else:
            pytest.fail("the write never ran to completion")
        assert target >= 3
    finally:
        await provider.close()


async def test_an_interrupted_erasure_is_accounted_for_by_the_run_that_finishes(
        provider: NativeMemoryProvider, clock: ManualClock,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches an interrupted delete_user committed are not lost from the evidence: the
    run that completes the erasure reports them in its receipt and its event."""
    monkeypatch.setattr("governed_memory_native.erasing.ERASURE_BATCH", 3)
    for n in range(8):
        await provider.add(note(f"fact {n}", idempotency_key=f"i{n}"), make_ctx(clock))
    backend = provider.backend
    real = backend.run_write
    calls = 0

    async def second_batch_fails(body: Callable[[Any], Awaitable[Any]], **hints: Any) -> Any:
        nonlocal calls
        calls += 1

        async def unit(tx: Any) -> Any:
            result = await body(tx)
            if calls == 2:
                raise MemoryStorageError("the process died here")
            return result
        return await real(unit, **hints)

    first_ctx = outbox_ctx(clock, "delete_user")
    backend.run_write = second_batch_fails  # type: ignore[method-assign]
    try:
        with pytest.raises(MemoryStorageError):
            await provider.delete_user(DeleteUserRequest(tenant_id="acme", user_id="alice"),
                                       first_ctx)
    finally:
        backend.run_write = real  # type: ignore[method-assign]
    left = await provider.list(ListRequest(scope=USER_SCOPE, limit=100), make_ctx(clock))
    assert len(left.items) == 5  # the first batch committed
    assert await provider.pending_events(10) == ()
    clock.advance(30)
    ctx = outbox_ctx(clock, "delete_user")
    receipt = await provider.delete_user(DeleteUserRequest(tenant_id="acme", user_id="alice"), ctx)
    assert receipt.verify()
    assert (receipt.counts["records"], receipt.counts["versions"],
            receipt.counts["idempotency_entries"]) == (8, 8, 8)
    assert receipt.started_at == first_ctx.now  # the erasure began with the first run
    [event] = await provider.pending_events(10)
    assert (event.operation_id, event.count) == (ctx.operation_id, 8)
    again = await provider.delete_user(DeleteUserRequest(tenant_id="acme", user_id="alice"),
                                       make_ctx(clock))
    assert again.counts["records"] == 0 and again.started_at == clock.now()
