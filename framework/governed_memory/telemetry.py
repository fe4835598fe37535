"""OpenTelemetry spans for memory operations, using only the API.

The host decides whether anything is recorded by installing (or injecting) a tracer
provider; without one these spans are no-ops. Attribute names follow the GenAI memory
conventions where they exist and ``governed_memory.*`` for the rest. Query text and
content are never attributes.
"""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.trace import Span, Tracer, TracerProvider

from governed_memory.operations import Operation

TRACER_NAME = "governed_memory"

ATTR_OPERATION_NAME = "gen_ai.operation.name"
ATTR_RECORD_ID = "gen_ai.memory.record.id"
ATTR_RECORD_COUNT = "gen_ai.memory.record.count"
ATTR_OPERATION = "governed_memory.operation"
ATTR_OPERATION_ID = "governed_memory.operation.id"
ATTR_SCOPE_HASH = "governed_memory.scope.hash"
ATTR_PROFILE = "governed_memory.profile"
ATTR_PROFILE_REVISION = "governed_memory.profile.revision"
ATTR_PROVIDER = "governed_memory.provider"
ATTR_DECISION_ID = "governed_memory.decision.id"
ATTR_DECISION_OUTCOME = "governed_memory.decision.outcome"
ATTR_OUTCOME = "governed_memory.outcome"
ATTR_ERROR_CODE = "governed_memory.error.code"


def get_tracer(tracer_provider: TracerProvider | None = None) -> Tracer:
    from governed_memory import __version__

    return trace.get_tracer(TRACER_NAME, __version__, tracer_provider=tracer_provider)


def span_name(operation: Operation, provider: str) -> str:
    """``{gen_ai.operation.name} {provider}``, the GenAI span naming pattern."""
    return f"{operation.gen_ai_name} {provider}"


def span_ids(span: Span) -> tuple[str | None, str | None]:
    context = span.get_span_context()
    if not context.is_valid:
        return None, None
    return format(context.trace_id, "032x"), format(context.span_id, "016x")
