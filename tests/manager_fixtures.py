"""Fixtures several test folders share: a manual clock, a captured event sink, an
in-memory span exporter behind a tracer provider, and a governed manager over the native
in-memory backend wired to all three. A folder's conftest imports the ones it needs (and
defines its own ``manager`` where it wants a different one)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from governed_memory.clock import ManualClock
from governed_memory.events import InMemoryEventSink
from governed_memory.manager import GovernedMemoryManager
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
def tracer_provider(spans: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    return provider


@pytest.fixture
async def manager(clock: ManualClock, sink: InMemoryEventSink,
                  tracer_provider: TracerProvider) -> AsyncIterator[GovernedMemoryManager]:
    from governed_memory_native import build_native_provider

    provider = build_native_provider({"backend": "memory"}, clock)
    async with GovernedMemoryManager(provider, clock=clock, sinks=[sink],
                                     tracer_provider=tracer_provider) as m:
        yield m
