"""Fail-closed audit: when the trail cannot record an operation's ``requested`` event,
the operation is refused before any policy or the provider sees it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from actors import ADMIN, ALICE, ALICE_SCOPE
from governed_memory.audit import AuditSink, verify_trail
from governed_memory.clock import ManualClock
from governed_memory.events import AuditUnavailableError, InMemoryEventSink, MemoryEvent
from governed_memory.manager import GovernedMemoryManager
from governed_memory.plugins import PluginManager
from governed_memory.profiles import ProfileRegistry
from governed_memory_native import build_native_provider


class FlakySink:
    """Refuses events while ``broken`` (a full disk, an unmounted volume), or only
    events of the types in ``refuse``."""

    name = "flaky"

    def __init__(self) -> None:
        self.broken = False
        self.refuse: set[str] = set()
        self.events: list[MemoryEvent] = []

    async def emit(self, event: MemoryEvent) -> None:
        if self.broken or event.type in self.refuse:
            raise OSError(28, "No space left on device")
        self.events.append(event)

    async def close(self) -> None:
        return None


class Counting:
    """Counts provider calls by operation name."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if name in {"add", "get", "list", "search", "update", "delete", "delete_user"}:
            async def counted(*args: Any) -> Any:
                self.calls.append(name)
                return await attribute(*args)
            return counted
        return attribute


def strict_manager(clock: ManualClock, *sinks: Any) -> tuple[GovernedMemoryManager, Counting]:
    provider = Counting(build_native_provider({"backend": "memory"}, clock))
    return GovernedMemoryManager(provider, clock=clock, sinks=sinks,  # type: ignore[arg-type]
                                 fail_closed=True), provider


async def test_an_unrecordable_request_never_reaches_the_provider() -> None:
    clock, sink = ManualClock(), FlakySink()
    manager, provider = strict_manager(clock, sink)
    async with manager:
        record = await manager.add(ALICE, ALICE_SCOPE, "kept", idempotency_key="k0")
        sink.broken = True
        provider.calls.clear()
        for call in (lambda: manager.add(ALICE, ALICE_SCOPE, "lost?", idempotency_key="k1"),
                     lambda: manager.get(ALICE, ALICE_SCOPE, record.id),
                     lambda: manager.search(ALICE, ALICE_SCOPE, "kept"),
                     lambda: manager.delete_user(ADMIN, "acme", "alice")):
            with pytest.raises(AuditUnavailableError) as info:
                await call()
            assert info.value.code == "audit_unavailable"
        assert provider.calls == []
        sink.broken = False
        page = await manager.list(ADMIN, ALICE_SCOPE)
        assert [r.id for r in page.items] == [record.id]  # nothing else was written


async def test_a_strict_manager_without_any_sink_refuses_everything() -> None:
    manager, provider = strict_manager(ManualClock())
    async with manager:
        with pytest.raises(AuditUnavailableError):
            await manager.add(ALICE, ALICE_SCOPE, "x", idempotency_key="k")
    assert provider.calls == []


async def test_an_unrecorded_outcome_of_a_read_withholds_the_result() -> None:
    clock, sink = ManualClock(), FlakySink()
    manager, _ = strict_manager(clock, sink)
    async with manager:
        record = await manager.add(ALICE, ALICE_SCOPE, "private", idempotency_key="k")
        sink.refuse = {"memory.read.completed"}
        with pytest.raises(AuditUnavailableError):
            await manager.get(ALICE, ALICE_SCOPE, record.id)


async def test_an_unrecorded_commit_is_reported_and_an_idempotent_retry_recovers(
        tmp_path: Path) -> None:
    """Without an outbox the committed event is emitted after the provider committed:
    the caller learns the write happened but is unrecorded, and a retry with the same
    idempotency key returns the first result with a recorded trail."""
    clock, sink = ManualClock(), FlakySink()

    class NoOutbox(Counting):
        def capabilities(self) -> Any:
            import attrs
            return attrs.evolve(self._inner.capabilities(), event_outbox=False)

    provider = NoOutbox(build_native_provider({"backend": "memory"}, clock))
    async with GovernedMemoryManager(provider, clock=clock, sinks=[sink],  # type: ignore[arg-type]
                                     fail_closed=True) as manager:
        assert manager.activity.outbox is None
        sink.refuse = {"memory.write.committed"}
        with pytest.raises(AuditUnavailableError, match="was applied"):
            await manager.add(ALICE, ALICE_SCOPE, "once", idempotency_key="k1")
        sink.refuse = set()
        again = await manager.add(ALICE, ALICE_SCOPE, "once", idempotency_key="k1")
        assert sink.events[-1].type == "memory.write.committed"
        assert sink.events[-1].record_ids == (again.id,)
        assert (await manager.list(ADMIN, ALICE_SCOPE)).items == (again,)


async def test_with_an_outbox_an_undelivered_commit_waits_and_is_delivered_later() -> None:
    clock, sink = ManualClock(), FlakySink()
    manager, _ = strict_manager(clock, sink)
    async with manager:
        assert manager.activity.outbox is not None
        sink.refuse = {"memory.write.committed"}
        record = await manager.add(ALICE, ALICE_SCOPE, "durable", idempotency_key="k")
        assert [e.type for e in sink.events][-1] == "memory.write.requested"
        sink.refuse = set()
        assert await manager.deliver_events() == 1
        assert sink.events[-1].type == "memory.write.committed"
        assert sink.events[-1].record_ids == (record.id,)


async def test_a_lenient_manager_keeps_working_when_a_sink_fails() -> None:
    clock, sink, kept = ManualClock(), FlakySink(), InMemoryEventSink()
    provider = build_native_provider({"backend": "memory"}, clock)
    async with GovernedMemoryManager(provider, clock=clock, sinks=[sink, kept]) as manager:
        sink.broken = True
        await manager.add(ALICE, ALICE_SCOPE, "fine")
        assert kept.types()[:2] == ["memory.write.requested", "memory.write.committed"]


async def test_compliance_strict_turns_fail_closed_on_with_the_audit_sink(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plugins = PluginManager.load()
    spec = ProfileRegistry.from_plugins(plugins).get("compliance-strict@1.0.0")
    assert spec.audit.fail_closed
    trail = plugins.sinks.get("audit").factory({"directory": str(tmp_path / "trail")})
    assert isinstance(trail, AuditSink)
    manager = GovernedMemoryManager.from_profile(
        spec, plugins=plugins, clock=ManualClock(), sinks=[trail],
        provider_config_overrides={"backend": "memory"})
    assert manager.events.strict
    scope = ALICE_SCOPE
    async with manager:
        await manager.add(ALICE, scope, "prefers tea", idempotency_key="k1")

        def disk_full(fd: int, data: bytes) -> int:
            raise OSError(28, "No space left on device")

        with monkeypatch.context() as patch:
            patch.setattr(os, "write", disk_full)
            with pytest.raises(AuditUnavailableError):
                await manager.add(ALICE, scope, "prefers coffee", idempotency_key="k2")
        assert [r.content for r in (await manager.list(ADMIN, scope)).items] == [
            "prefers tea"]
    verification = verify_trail([tmp_path / "trail"])
    # requested + committed of k1, then the list's requested + completed.
    assert verification.ok and verification.entries == 4
