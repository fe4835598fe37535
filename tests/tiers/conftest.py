"""Fixtures for the tier tests: a governed manager on the native in-memory backend, an
event sink, spans, and the tiers facade over in-memory turn and working stores."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from governed_memory import GovernedMemoryManager, InMemoryEventSink, ManualClock
from governed_memory.tiers import InMemoryTurnStore, InMemoryWorkingStateStore, MemoryTiers
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def sink() -> InMemoryEventSink:
    return InMemoryEventSink()


@pytest.fixture
def spans() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
async def manager(clock: ManualClock, sink: InMemoryEventSink,
                  spans: InMemorySpanExporter) -> AsyncIterator[GovernedMemoryManager]:
    from governed_memory_native import build_native_provider

    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    provider = build_native_provider({"backend": "memory"}, clock)
    async with GovernedMemoryManager(provider, clock=clock, sinks=[sink],
                                     tracer_provider=tracer_provider) as m:
        yield m


@pytest.fixture
async def tiers(manager: GovernedMemoryManager) -> AsyncIterator[MemoryTiers]:
    memory = MemoryTiers(long_term=manager, turns=InMemoryTurnStore(),
                         working=InMemoryWorkingStateStore())
    await memory.start()
    yield memory
