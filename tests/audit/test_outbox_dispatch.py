"""The event-outbox dispatcher against a provider we control: the committed event a
write stored is delivered at least once, acknowledged only once every sink took it,
recovered on start and periodically, and deduplicated by the audit sink."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
from actors import ADMIN, ALICE, ALICE_SCOPE
from audit_support import event
from governed_memory.audit import AuditSink, verify_trail
from governed_memory.cache import CachedMemoryProvider, InMemoryCacheStore
from governed_memory.capabilities import Capabilities
from governed_memory.clock import ManualClock
from governed_memory.events import InMemoryEventSink, MemoryEvent
from governed_memory.manager import GovernedMemoryManager
from governed_memory.operation_context import OperationContext
from governed_memory.outbox import EventOutboxProvider, finish_committed_event
from governed_memory.provider_kit import NoOptionalFeatures
from governed_memory_native import build_native_provider

WRITES = {"add", "update", "delete", "delete_all", "delete_user", "purge_expired"}


class FakeOutbox(NoOptionalFeatures):
    """A provider whose writes store their committed event in a list, standing in for
    a transactional table; ``covers`` limits which operations do."""

    name = "fake-outbox"

    @property
    def outbox(self) -> FakeOutbox:
        return self

    def __init__(self, clock: ManualClock, covers: set[str] = WRITES) -> None:
        self._inner = build_native_provider({"backend": "memory"}, clock)
        self.covers = covers
        self.stored: list[MemoryEvent] = []
        self.acknowledged: list[str] = []
        self.fail_acknowledge = False
        self.fail_listing = False

    def capabilities(self) -> Capabilities:
        return attrs.evolve(self._inner.capabilities(), event_outbox=True)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if name not in WRITES:
            return attribute

        async def write(request: Any, ctx: OperationContext) -> Any:
            draft = ctx.committed_event
            result = await attribute(request, attrs.evolve(ctx, committed_event=None))
            if draft is not None and name in self.covers:
                self.stored.append(finish_committed_event(draft, result))
            return result

        return write

    async def pending_events(self, limit: int) -> Sequence[MemoryEvent]:
        if self.fail_listing:
            raise RuntimeError("database is locked")
        return tuple(self.stored[:limit])

    async def acknowledge_events(self, event_ids: Sequence[str]) -> None:
        if self.fail_acknowledge:
            raise RuntimeError("connection lost")
        self.acknowledged.extend(event_ids)
        self.stored = [e for e in self.stored if e.event_id not in set(event_ids)]


class Switch:
    name = "switch"

    def __init__(self) -> None:
        self.down = False
        self.events: list[MemoryEvent] = []

    async def emit(self, event: MemoryEvent) -> None:
        if self.down:
            raise OSError("sink down")
        self.events.append(event)

    async def close(self) -> None:
        return None


def committed(events: list[MemoryEvent]) -> list[MemoryEvent]:
    return [e for e in events if e.type == "memory.write.committed"]


async def test_the_committed_event_goes_through_the_outbox_once() -> None:
    clock, sink = ManualClock(), InMemoryEventSink()
    provider = FakeOutbox(clock)
    assert isinstance(provider, EventOutboxProvider)
    async with GovernedMemoryManager(provider, clock=clock, sinks=[sink]) as manager:  # type: ignore[arg-type]
        record = await manager.add(ALICE, ALICE_SCOPE, "tea")
        assert sink.types() == ["memory.write.requested", "memory.write.committed"]
        assert sink.events[-1].record_ids == (record.id,)
        assert provider.stored == [] and provider.acknowledged == [sink.events[-1].event_id]
        assert sink.events[-1].operation_id == sink.events[0].operation_id


async def test_a_failing_sink_leaves_events_stored_and_in_order() -> None:
    clock, switch = ManualClock(), Switch()
    provider = FakeOutbox(clock)
    async with GovernedMemoryManager(provider, clock=clock, sinks=[switch]) as manager:  # type: ignore[arg-type]
        switch.down = True
        first = await manager.add(ALICE, ALICE_SCOPE, "one")
        second = await manager.add(ALICE, ALICE_SCOPE, "two")
        assert len(provider.stored) == 2 and provider.acknowledged == []
        switch.down = False
        assert await manager.deliver_events() == 2
        assert [e.record_ids for e in committed(switch.events)] == [(first.id,), (second.id,)]
        assert provider.stored == []


async def test_delivery_is_at_least_once_and_the_audit_sink_keeps_one(tmp_path: Path) -> None:
    clock, counting = ManualClock(), InMemoryEventSink()
    provider = FakeOutbox(clock)
    trail = AuditSink(tmp_path)
    async with GovernedMemoryManager(provider, clock=clock,  # type: ignore[arg-type]
                                     sinks=[trail, counting]) as manager:
        provider.fail_acknowledge = True  # delivered, but the provider never hears so
        await manager.add(ALICE, ALICE_SCOPE, "tea")
        assert len(provider.stored) == 1
        provider.fail_acknowledge = False
        assert await manager.deliver_events() == 1
        assert len(committed(counting.events)) == 2  # a plain sink sees the redelivery
        assert trail.duplicates == 1
    verification = verify_trail([tmp_path])
    assert verification.ok and verification.entries == 2  # requested + one committed


async def test_start_recovers_events_a_crash_left_behind() -> None:
    clock, sink = ManualClock(), InMemoryEventSink()
    provider = FakeOutbox(clock)
    provider.stored = [event(1), event(2)]
    async with GovernedMemoryManager(provider, clock=clock, sinks=[sink]):  # type: ignore[arg-type]
        assert [e.event_id for e in sink.events] == [event(1).event_id, event(2).event_id]
    assert provider.stored == []


async def test_the_dispatcher_drains_periodically() -> None:
    clock, sink = ManualClock(), InMemoryEventSink()
    provider = FakeOutbox(clock)
    async with GovernedMemoryManager(provider, clock=clock, sinks=[sink],  # type: ignore[arg-type]
                                     outbox_interval_s=0.01):
        provider.stored.append(event(7))  # another process's write, say
        for _ in range(200):
            if sink.events:
                break
            await asyncio.sleep(0.01)
        assert [e.event_id for e in sink.events] == [event(7).event_id]


async def test_an_operation_the_outbox_does_not_cover_is_emitted_directly() -> None:
    clock, sink = ManualClock(), InMemoryEventSink()
    provider = FakeOutbox(clock, covers={"add"})
    async with GovernedMemoryManager(provider, clock=clock, sinks=[sink]) as manager:  # type: ignore[arg-type]
        record = await manager.add(ALICE, ALICE_SCOPE, "tea")
        await manager.delete(ALICE, ALICE_SCOPE, record.id)
        assert [e.operation for e in committed(sink.events)] == ["add", "delete"]


async def test_an_unreadable_outbox_does_not_fail_the_write() -> None:
    clock, sink = ManualClock(), InMemoryEventSink()
    provider = FakeOutbox(clock)
    async with GovernedMemoryManager(provider, clock=clock, sinks=[sink]) as manager:  # type: ignore[arg-type]
        provider.fail_listing = True
        record = await manager.add(ALICE, ALICE_SCOPE, "tea")
        assert committed(sink.events)[-1].record_ids == (record.id,)  # emitted directly
        provider.fail_listing = False
        await manager.deliver_events()  # the stored copy arrives too: at least once
        assert len(committed(sink.events)) == 2
        assert len({e.event_id for e in committed(sink.events)}) == 1


async def test_the_cache_wrapper_forwards_the_outbox() -> None:
    clock, sink = ManualClock(), InMemoryEventSink()
    provider = FakeOutbox(clock)
    cached = CachedMemoryProvider(provider, InMemoryCacheStore(), clock=clock,  # type: ignore[arg-type]
                                  quarantine_retry_s=None)
    assert cached.capabilities().event_outbox
    async with GovernedMemoryManager(cached, clock=clock, sinks=[sink]) as manager:
        assert manager.activity.outbox is not None
        await manager.add(ALICE, ALICE_SCOPE, "tea")
        assert provider.acknowledged == [committed(sink.events)[0].event_id]
    class NoOutbox(NoOptionalFeatures):
        name = "no-outbox"

        def capabilities(self) -> Capabilities:
            return Capabilities(durable=False, transactional=False)

    plain = CachedMemoryProvider(NoOutbox(), InMemoryCacheStore(),  # type: ignore[arg-type]
                                 quarantine_retry_s=None)
    assert not plain.capabilities().event_outbox and plain.outbox is None


async def test_minimal_event_detail_strips_stored_content_hashes() -> None:
    clock, sink = ManualClock(), InMemoryEventSink()
    provider = FakeOutbox(clock)
    manager = GovernedMemoryManager(provider, clock=clock, sinks=[sink])  # type: ignore[arg-type]
    assert manager.activity.outbox is not None
    manager.activity.outbox.content_hashes = False
    async with manager:
        await manager.add(ALICE, ALICE_SCOPE, "prefers decaf")
        assert committed(sink.events)[0].content_hashes == ()


async def test_the_native_provider_delivers_through_its_own_outbox(tmp_path: Path) -> None:
    clock, sink = ManualClock(), InMemoryEventSink()
    provider = build_native_provider({"backend": "sqlite", "path": str(tmp_path / "m.db")},
                                     clock)
    async with GovernedMemoryManager(provider, clock=clock, sinks=[sink]) as manager:
        assert manager.activity.outbox is not None
        record = await manager.add(ALICE, ALICE_SCOPE, "tea")
        await manager.delete_user(ADMIN, "acme", "alice")
        assert await provider.pending_events(10) == ()
    kinds = [(e.operation, e.type) for e in sink.events]
    assert kinds == [("add", "memory.write.requested"), ("add", "memory.write.committed"),
                     ("delete_user", "memory.write.requested"),
                     ("delete_user", "memory.write.committed")]
    assert sink.events[1].record_ids == (record.id,)
    assert sink.events[-1].erasure is not None and sink.events[-1].erasure.counts["records"] == 1
