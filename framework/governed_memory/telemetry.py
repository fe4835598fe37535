"""OpenTelemetry spans and metrics for memory operations, using only the API.

The host decides whether anything is recorded by installing (or injecting) a tracer
and a meter provider; without them these are no-ops. Attribute names follow the GenAI
memory conventions where they exist and ``governed_memory.*`` for the rest. Query text
and content are attributes only when a profile opts in
(``privacy.capture_content_in_traces``), and never metric labels: a label's values
must stay few and must never be data.
"""

from __future__ import annotations

from typing import Final

from opentelemetry import metrics, trace
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import Span, Tracer, TracerProvider

from governed_memory.operations import Operation

TRACER_NAME = "governed_memory"
METER_NAME: Final = "governed_memory"

ATTR_OPERATION_NAME = "gen_ai.operation.name"
ATTR_RECORD_ID = "gen_ai.memory.record.id"
ATTR_RECORD_COUNT = "gen_ai.memory.record.count"
ATTR_OPERATION = "governed_memory.operation"
ATTR_OPERATION_ID = "governed_memory.operation.id"
ATTR_SCOPE_HASH = "governed_memory.scope.hash"
ATTR_PROFILE = "governed_memory.profile"
ATTR_PROFILE_ID = "governed_memory.profile.id"
ATTR_PROFILE_VERSION = "governed_memory.profile.version"
ATTR_PROFILE_REVISION = "governed_memory.profile.revision"
ATTR_PROVIDER = "governed_memory.provider"
ATTR_DECISION_ID = "governed_memory.decision.id"
ATTR_DECISION_OUTCOME = "governed_memory.decision.outcome"
ATTR_POLICY_REVISION = "governed_memory.policy.revision"
ATTR_POLICY = "governed_memory.policy"
ATTR_OUTCOME = "governed_memory.outcome"
ATTR_ERROR_CODE = "governed_memory.error.code"
ATTR_QUERY_TEXT = "governed_memory.query.text"
"""Only with ``privacy.capture_content_in_traces``."""
ATTR_CONTENT = "governed_memory.content"
"""Only with ``privacy.capture_content_in_traces``."""

DECISION_SPAN: Final = "governed_memory.policy.decide"
"""The child span of an operation's span that covers its policy decision."""

OPERATIONS_COUNTER: Final = "governed_memory.operations"
DURATION_HISTOGRAM: Final = "governed_memory.operation.duration"
DENIALS_COUNTER: Final = "governed_memory.policy.denials"


def get_tracer(tracer_provider: TracerProvider | None = None) -> Tracer:
    from governed_memory.version import __version__

    return trace.get_tracer(TRACER_NAME, __version__, tracer_provider=tracer_provider)


def may_record(tracer: Tracer) -> bool:
    """Whether a span started on ``tracer`` now could be recorded anywhere.

    ``False`` for the API's no-op tracer and for the global proxy while no tracer
    provider is installed; such spans are ``INVALID_SPAN`` whatever one does, so the
    hot path need not pay for starting them (two context managers and an attribute
    map per operation). Asked per operation: a provider installed later is seen at
    once, as the proxy itself would see it.
    """
    if isinstance(tracer, trace.NoOpTracer):
        return False
    if isinstance(tracer, trace.ProxyTracer):
        return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    return True


def span_name(operation: Operation, provider: str) -> str:
    """``{gen_ai.operation.name} {provider}``, the GenAI span naming pattern."""
    return f"{operation.gen_ai_name} {provider}"


def span_ids(span: Span) -> tuple[str | None, str | None]:
    context = span.get_span_context()
    if not context.is_valid:
        return None, None
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


class OperationMetrics:
    """Operations by type and outcome, their latency, and denials by policy.

    Labels are the operation, its GenAI name, the provider name, the outcome (``ok``,
    ``denied``, ``rejected``, ``failed``, ``cancelled``) and the denying policy's
    registered name: all from small closed sets. Cache hits are counted by the search
    cache's own meter (``governed_memory.cache.hits``).
    """

    def __init__(self, meter_provider: MeterProvider | None = None) -> None:
        from governed_memory.version import __version__

        meter = metrics.get_meter(METER_NAME, __version__, meter_provider=meter_provider)
        self._operations = meter.create_counter(
            OPERATIONS_COUNTER, unit="{operation}",
            description="memory operations by type and outcome")
        self._duration = meter.create_histogram(
            DURATION_HISTOGRAM, unit="s",
            description="memory operation latency, governance included")
        self._denials = meter.create_counter(
            DENIALS_COUNTER, unit="{denial}", description="operations denied, by policy")

    def record(self, operation: Operation, provider: str, outcome: str,
               seconds: float) -> None:
        labels = {ATTR_OPERATION: operation.value, ATTR_OPERATION_NAME: operation.gen_ai_name,
                  ATTR_PROVIDER: provider, ATTR_OUTCOME: outcome}
        self._operations.add(1, labels)
        self._duration.record(seconds, labels)

    def denied(self, operation: Operation, policy: str) -> None:
        self._denials.add(1, {ATTR_OPERATION: operation.value, ATTR_POLICY: policy})
