"""Starting and stopping a manager leaves nothing open behind it, whatever fails."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import pytest
from governed_memory.capabilities import Capabilities
from governed_memory.clock import ManualClock
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
