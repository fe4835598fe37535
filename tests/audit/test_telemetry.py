"""Spans (OpenTelemetry SDK in-memory exporter) and metrics (in-memory reader): one
span per operation named by the GenAI memory conventions, a child span for the policy
decision, and counters for operations, denials and cache hits, with a latency
histogram."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from actors import ALICE, ALICE_SCOPE, BOB_SCOPE
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryPolicyDeniedError, MemoryScopeError
from governed_memory.events import InMemoryEventSink
from governed_memory.manager import GovernedMemoryManager
from governed_memory.plugins import PluginManager
from governed_memory.telemetry import DECISION_SPAN
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@pytest.fixture
def spans() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def reader() -> InMemoryMetricReader:
    return InMemoryMetricReader()


def build(profile: str, spans: InMemorySpanExporter,
          reader: InMemoryMetricReader) -> GovernedMemoryManager:
    tracer = TracerProvider()
    tracer.add_span_processor(SimpleSpanProcessor(spans))
    return GovernedMemoryManager.from_profile(
        profile, plugins=PluginManager.load(), clock=ManualClock(),
        sinks=[InMemoryEventSink()], tracer_provider=tracer,
        meter_provider=MeterProvider(metric_readers=[reader]),
        provider_config_overrides={"backend": "memory"})


@pytest.fixture
def manager(spans: InMemorySpanExporter, reader: InMemoryMetricReader) -> GovernedMemoryManager:
    return build("chat-assistant@1.0.0", spans, reader)


def points(reader: InMemoryMetricReader, name: str) -> list[Any]:
    data = reader.get_metrics_data()
    assert data is not None
    return [point for resource in data.resource_metrics for scope in resource.scope_metrics
            for metric in scope.metrics if metric.name == name
            for point in metric.data.data_points]


def total(reader: InMemoryMetricReader, name: str, **labels: str) -> int:
    return sum(int(p.value) for p in points(reader, name)
               if all(p.attributes.get(k) == v for k, v in labels.items()))


async def test_one_span_per_operation_with_the_governance_attributes(
        manager: GovernedMemoryManager, spans: InMemorySpanExporter) -> None:
    spec = manager.profile_spec
    assert spec is not None
    async with manager:
        record = await manager.add(ALICE, ALICE_SCOPE, "likes green tea")
        await manager.search(ALICE, ALICE_SCOPE, "tea")
        await manager.update(ALICE, ALICE_SCOPE, record.id, content="likes black tea")
        await manager.delete(ALICE, ALICE_SCOPE, record.id)
    operations = [s for s in spans.get_finished_spans() if s.name != DECISION_SPAN]
    decisions = [s for s in spans.get_finished_spans() if s.name == DECISION_SPAN]
    assert [s.name for s in operations] == ["create_memory native", "search_memory native",
                                            "update_memory native", "delete_memory native"]
    for span, decision in zip(operations, decisions, strict=True):
        attributes = span.attributes or {}
        assert attributes["governed_memory.scope.hash"] == ALICE_SCOPE.scope_hash
        assert attributes["governed_memory.profile.id"] == "chat-assistant"
        assert attributes["governed_memory.profile.version"] == "1.0.0"
        assert attributes["governed_memory.profile.revision"] == spec.revision
        assert attributes["governed_memory.decision.outcome"] == "allow"
        assert attributes["governed_memory.outcome"] == "ok"
        # The decision is a child of the operation's span and names the same decision.
        assert decision.parent is not None
        assert decision.parent.span_id == span.context.span_id
        assert decision.context.trace_id == span.context.trace_id
        assert (decision.attributes or {})["governed_memory.decision.id"] == attributes[
            "governed_memory.decision.id"]
        assert str((decision.attributes or {})["governed_memory.policy.revision"]).startswith(
            "pr1:")
    assert (operations[0].attributes or {})["gen_ai.memory.record.id"] == record.id
    assert (operations[1].attributes or {})["gen_ai.memory.record.count"] == 1
    assert (operations[0].attributes or {})["gen_ai.operation.name"] == "create_memory"


async def test_a_denial_is_in_the_decision_span_and_the_denials_counter(
        spans: InMemorySpanExporter, reader: InMemoryMetricReader) -> None:
    async with build("compliance-strict@1.0.0", spans, reader) as manager:
        with pytest.raises(MemoryScopeError):
            await manager.add(ALICE, BOB_SCOPE, "not mine", idempotency_key="k1")
        with pytest.raises(MemoryPolicyDeniedError):
            await manager.add(ALICE, ALICE_SCOPE, "no idempotency key")
    decisions = [s for s in spans.get_finished_spans() if s.name == DECISION_SPAN]
    assert [(d.attributes or {})["governed_memory.decision.outcome"] for d in decisions] == [
        "deny", "deny"]
    assert (decisions[0].attributes or {})["governed_memory.policy"] == "scope-authorization"
    assert (decisions[1].attributes or {})["governed_memory.policy"] == "write-rules"
    assert total(reader, "governed_memory.policy.denials",
                 **{"governed_memory.policy": "scope-authorization"}) == 1
    assert total(reader, "governed_memory.policy.denials",
                 **{"governed_memory.policy": "write-rules"}) == 1
    assert total(reader, "governed_memory.operations",
                 **{"governed_memory.outcome": "denied"}) == 2


async def test_operations_by_type_and_outcome_latency_and_cache_hits(
        manager: GovernedMemoryManager, reader: InMemoryMetricReader) -> None:
    async with manager:
        record = await manager.add(ALICE, ALICE_SCOPE, "likes green tea")
        for _ in range(3):
            await manager.search(ALICE, ALICE_SCOPE, "tea")
        await manager.get(ALICE, ALICE_SCOPE, record.id)
        with pytest.raises(Exception):  # noqa: B017 - any refusal
            await manager.get(ALICE, ALICE_SCOPE, "01" + "0" * 24)
    counted = Counter({(p.attributes["governed_memory.operation"],
                        p.attributes["governed_memory.outcome"]): int(p.value)
                       for p in points(reader, "governed_memory.operations")})
    assert counted == Counter({("add", "ok"): 1, ("search", "ok"): 3, ("get", "ok"): 1,
                               ("get", "rejected"): 1})
    histogram = points(reader, "governed_memory.operation.duration")
    assert sum(p.count for p in histogram) == 6
    assert all(p.sum >= 0 for p in histogram)
    assert total(reader, "governed_memory.cache.hits") == 2
