"""A sink that offers ``emit_stored`` (``events.StoredEventSink``) gets there the events
a provider stored in its event outbox, and everything else through ``emit``; a sink
without it gets every event through ``emit``, as before. The dispatcher acknowledges an
event only once ``emit_stored`` returned."""

from __future__ import annotations

from pathlib import Path

import pytest
from actors import ALICE, ALICE_SCOPE
from governed_memory.clock import SystemClock
from governed_memory.events import (
    EventBus,
    InMemoryEventSink,
    MemoryEvent,
    StoredEventSink,
)
from governed_memory.manager import GovernedMemoryManager
from governed_memory_native import build_native_provider


class SplitSink:
    name = "split"

    def __init__(self) -> None:
        self.emitted: list[str] = []
        self.stored: list[str] = []
        self.refuse_stored = False

    async def emit(self, event: MemoryEvent) -> None:
        self.emitted.append(event.type)

    async def emit_stored(self, event: MemoryEvent) -> None:
        if self.refuse_stored:
            raise OSError("not now")
        self.stored.append(event.type)

    async def close(self) -> None:
        return None


async def test_outbox_events_reach_emit_stored_and_the_rest_emit(tmp_path: Path) -> None:
    split, plain = SplitSink(), InMemoryEventSink()
    assert isinstance(split, StoredEventSink) and not isinstance(plain, StoredEventSink)
    provider = build_native_provider({"backend": "sqlite", "path": str(tmp_path / "m.db")},
                                     SystemClock())
    async with GovernedMemoryManager(provider, sinks=[split, plain]) as manager:
        record = await manager.add(ALICE, ALICE_SCOPE, "stored with its write")
        await manager.get(ALICE, ALICE_SCOPE, record.id)
        split.refuse_stored = True
        await manager.add(ALICE, ALICE_SCOPE, "waits in the outbox")
        assert len(await provider.pending_events(10)) == 1  # not acknowledged
        split.refuse_stored = False
        await manager.add(ALICE, ALICE_SCOPE, "and delivers the one before")
    assert split.stored == ["memory.write.committed"] * 3
    assert split.emitted == ["memory.write.requested", "memory.read.requested",
                             "memory.read.completed", "memory.write.requested",
                             "memory.write.requested"]
    # every sink is offered an event until all took it: at least once
    assert plain.types().count("memory.write.committed") == 4


@pytest.mark.parametrize("stored", [True, False])
async def test_the_bus_hands_a_stored_event_to_emit_stored_only_when_told(
        stored: bool) -> None:
    split = SplitSink()
    event = MemoryEvent(event_id="evt_1.0", type="memory.write.committed", occurred_at=1.0,
                        operation_id="op_1", operation="add", principal_id="p", tenant_id="t")
    assert await EventBus([split]).deliver(event, stored=stored)
    assert (split.stored, split.emitted) == (([event.type], []) if stored
                                             else ([], [event.type]))
