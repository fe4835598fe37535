"""With nobody listening, the hot path builds nothing nobody would receive.

A manager without event sinks (and without a fail-closed trail) emits into a void, so it
skips building the ``requested`` and outcome events and does not store each write's
committed event in the provider's outbox only to acknowledge it. Spans are started only
when a tracer could record them. These tests pin what must still hold: events an
earlier run left in the outbox are kept for a manager that has sinks, a manager with
sinks still gets every event, and spans are recorded as soon as a real tracer is used.
"""

from __future__ import annotations

from pathlib import Path

from actors import ALICE, ALICE_SCOPE
from governed_memory.clock import ManualClock
from governed_memory.events import EventBus, InMemoryEventSink, MemoryEvent
from governed_memory.manager import GovernedMemoryManager
from governed_memory.telemetry import may_record
from governed_memory_native import build_native_provider
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def _manager(path: Path, clock: ManualClock, sinks: list[InMemoryEventSink] | None = None,
             **kwargs: object) -> GovernedMemoryManager:
    provider = build_native_provider({"backend": "sqlite", "path": str(path)}, clock)
    return GovernedMemoryManager(provider, clock=clock, sinks=sinks or [], **kwargs)  # type: ignore[arg-type]


def test_a_bus_listens_only_with_a_sink_or_when_strict() -> None:
    assert not EventBus().listening
    assert EventBus(strict=True).listening  # a fail-closed trail must refuse, not skip
    assert EventBus([InMemoryEventSink()]).listening


async def test_a_sinkless_manager_stores_no_committed_events(tmp_path: Path) -> None:
    clock = ManualClock()
    manager = _manager(tmp_path / "m.db", clock)
    assert manager.activity.outbox is None
    async with manager:
        record = await manager.add(ALICE, ALICE_SCOPE, "likes green tea")
        await manager.update(ALICE, ALICE_SCOPE, record.id, content="likes black tea")
        assert await manager._provider.pending_events(100) == ()  # type: ignore[attr-defined]


class _RefusingSink:
    """A sink that is down: every event it is handed stays in the provider's outbox."""

    name = "down"

    async def emit(self, event: MemoryEvent) -> None:
        raise OSError("the trail's disk is gone")

    async def close(self) -> None:
        return None


async def test_events_an_earlier_run_stored_wait_for_a_manager_with_sinks(
        tmp_path: Path) -> None:
    clock = ManualClock()
    path = tmp_path / "m.db"
    refused = _manager(path, clock, [_RefusingSink()])  # type: ignore[list-item]
    async with refused:
        await refused.add(ALICE, ALICE_SCOPE, "written while the trail was down")

    quiet = _manager(path, clock)
    async with quiet:
        await quiet.add(ALICE, ALICE_SCOPE, "written by a manager without sinks")

    sink = InMemoryEventSink()
    loud = _manager(path, clock, [sink])
    async with loud:  # start drains what earlier runs left
        await loud.add(ALICE, ALICE_SCOPE, "written by a manager with a sink")
    committed = [event for event in sink.events if event.type == "memory.write.committed"]
    # the one the refusing run stored, and the loud run's own; the quiet run stored none
    assert len(committed) == 2
    assert len({event.operation_id for event in committed}) == 2
    assert all(event.record_ids for event in committed)


async def test_a_manager_with_a_sink_still_gets_every_event(tmp_path: Path) -> None:
    clock = ManualClock()
    sink = InMemoryEventSink()
    manager = _manager(tmp_path / "m.db", clock, [sink])
    async with manager:
        record = await manager.add(ALICE, ALICE_SCOPE, "likes green tea")
        await manager.get(ALICE, ALICE_SCOPE, record.id)
    assert sink.types() == ["memory.write.requested", "memory.write.committed",
                            "memory.read.requested", "memory.read.completed"]


def test_spans_are_skipped_only_when_nothing_could_record_them() -> None:
    assert not may_record(trace.NoOpTracer())
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        # no global provider installed in this test process: the proxy records nothing
        assert not may_record(trace.get_tracer("t"))
    assert may_record(TracerProvider().get_tracer("t"))


async def test_an_explicit_tracer_records_every_operation(tmp_path: Path) -> None:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    clock = ManualClock()
    manager = _manager(tmp_path / "m.db", clock, tracer_provider=provider)
    async with manager:
        await manager.add(ALICE, ALICE_SCOPE, "likes green tea")
    names = [span.name for span in spans.get_finished_spans()]
    assert "create_memory native" in names and "governed_memory.policy.decide" in names


async def test_from_profile_builds_the_trail_its_audit_section_names(tmp_path: Path) -> None:
    from governed_memory.audit import verify_trail
    from governed_memory.profiles import loads_profile

    spec = loads_profile("""
        spec_version = 1
        id = "trail-test"
        version = "1.0.0"
        [provider]
        name = "native"
        config = { backend = "memory" }
        [audit]
        path = "trail"
    """)
    manager = GovernedMemoryManager.from_profile(spec, sinks_base_dir=tmp_path)
    assert manager.events.listening
    async with manager:
        await manager.add(ALICE, ALICE_SCOPE, "recorded")
    report = verify_trail([tmp_path / "trail"])
    assert report.ok and report.entries == 2
    quiet = GovernedMemoryManager.from_profile(spec, sinks=())  # the caller's choice wins
    assert not quiet.events.listening
