"""Starting and stopping a manager leaves nothing open behind it, whatever fails; the
first operation starts a manager nobody started (once), and a closed one says what to
call instead of reaching a closed provider."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import attrs
import pytest
from actors import ALICE, ALICE_SCOPE
from governed_memory.capabilities import Capabilities
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryUnavailableError
from governed_memory.events import InMemoryEventSink, MemoryEvent
from governed_memory.manager import GovernedMemoryManager
from governed_memory_native import build_native_provider


class UnreadableOutbox:
    """A provider whose stored events cannot be read when the manager starts (a locked
    or damaged outbox table), counting how often it is started and closed."""

    name = "unreadable-outbox"

    def __init__(self, clock: ManualClock) -> None:
        self._inner = build_native_provider({"backend": "memory"}, clock)
        self.started = 0
        self.closed = 0

    def capabilities(self) -> Capabilities:
        return attrs.evolve(self._inner.capabilities(), event_outbox=True)

    async def start(self) -> None:
        self.started += 1
        await self._inner.start()

    async def close(self) -> None:
        self.closed += 1
        await self._inner.close()

    @property
    def outbox(self) -> UnreadableOutbox:
        return self

    async def pending_events(self, limit: int) -> Sequence[MemoryEvent]:
        raise RuntimeError("database disk image is malformed")

    async def acknowledge_events(self, event_ids: Sequence[str]) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


async def test_a_failed_start_closes_the_provider_it_started() -> None:
    clock = ManualClock()
    provider = UnreadableOutbox(clock)
    manager = GovernedMemoryManager(provider, clock=clock,  # type: ignore[arg-type]
                                    sinks=[InMemoryEventSink()])
    assert manager.activity.outbox is not None
    with pytest.raises(RuntimeError, match="malformed"):
        async with manager:
            pytest.fail("the body must not run when start failed")
    assert (provider.started, provider.closed) == (1, 1)
    with pytest.raises(RuntimeError):  # not half-started: a retry starts again
        await manager.start()
    assert (provider.started, provider.closed) == (2, 2)
    await manager.close()  # closing a manager that never started closes nothing twice
    assert provider.closed == 2


async def test_the_provider_is_not_a_public_way_around_governance() -> None:
    manager = GovernedMemoryManager.from_plugins("native", {"backend": "memory"})
    assert not hasattr(manager, "provider")
    assert not hasattr(manager.activity, "provider")
    assert manager.capabilities().durable is False  # what the provider declares, read-only
    async with manager:
        status = await manager.health()
        assert status.ok and status.provider == "native"


# -- starting on first use, and what a closed manager says (issue 28) ---------------------


class CountingStarts:
    """The in-memory native provider, counting how often it is started and closed."""

    name = "counting"

    def __init__(self, clock: ManualClock) -> None:
        self._inner = build_native_provider({"backend": "memory"}, clock)
        self.started = 0
        self.closed = 0

    async def start(self) -> None:
        self.started += 1
        await asyncio.sleep(0)  # a real start yields: let the other callers arrive
        await self._inner.start()

    async def close(self) -> None:
        self.closed += 1
        await self._inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def counting_manager() -> tuple[GovernedMemoryManager, CountingStarts, InMemoryEventSink]:
    clock, sink = ManualClock(), InMemoryEventSink()
    provider = CountingStarts(clock)
    return GovernedMemoryManager(provider, clock=clock,  # type: ignore[arg-type]
                                 sinks=[sink]), provider, sink


async def test_the_first_operation_starts_the_manager_once() -> None:
    manager, provider, sink = counting_manager()
    assert provider.started == 0  # building starts nothing
    records = await asyncio.gather(*(manager.add(ALICE, ALICE_SCOPE, f"note {i}")
                                     for i in range(8)))
    assert provider.started == 1  # eight first operations at once: one start
    assert len({r.id for r in records}) == 8
    assert (await manager.health()).ok
    await manager.close()
    assert provider.closed == 1
    assert sum(e.type == "memory.write.committed" for e in sink.events) == 8


async def test_health_and_outbox_delivery_start_it_too() -> None:
    for first in ("health", "deliver_events"):
        manager, provider, _ = counting_manager()
        await getattr(manager, first)()
        assert provider.started == 1, first
        await manager.close()


async def test_a_closed_manager_says_what_to_call() -> None:
    manager, provider, _ = counting_manager()
    async with manager:
        await manager.add(ALICE, ALICE_SCOPE, "kept")
    with pytest.raises(MemoryUnavailableError, match=r"closed .*await manager\.start\(\)"):
        await manager.add(ALICE, ALICE_SCOPE, "too late")
    with pytest.raises(MemoryUnavailableError, match="closed"):
        await manager.health()
    assert (provider.started, provider.closed) == (1, 1)  # nothing reopened behind it
    await manager.start()  # what the message says
    assert [r.content for r in (await manager.list(ALICE, ALICE_SCOPE)).items] == ["kept"]
    await manager.close()
    assert (provider.started, provider.closed) == (2, 2)


async def test_a_manager_closed_before_it_was_used_refuses_too() -> None:
    manager, provider, _ = counting_manager()
    await manager.close()
    with pytest.raises(MemoryUnavailableError, match="closed"):
        await manager.search(ALICE, ALICE_SCOPE, "anything")
    assert provider.started == 0
