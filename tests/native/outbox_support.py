"""Contexts carrying a drafted ``committed`` event, as the activity port hands them over
to a provider that declares ``event_outbox``."""

from __future__ import annotations

import attrs
from governed_memory.clock import ManualClock
from governed_memory.events import MemoryEvent, event_id
from governed_memory.ids import new_id
from governed_memory.operation_context import OperationContext
from native_support import make_ctx


def draft_event(ctx: OperationContext, operation: str = "add") -> MemoryEvent:
    return MemoryEvent(
        event_id=event_id(ctx.operation_id, 2), type="memory.write.committed",
        occurred_at=ctx.now, operation_id=ctx.operation_id, operation=operation,
        principal_id=ctx.principal.principal_id, tenant_id=ctx.principal.tenant_id,
        outcome="committed",
    )


def outbox_ctx(clock: ManualClock, operation: str = "add",
               operation_id: str | None = None) -> OperationContext:
    """A context for one write whose committed event the provider must store."""
    ctx = make_ctx(clock)
    if operation_id is not None:
        ctx = attrs.evolve(ctx, operation_id=operation_id)
    else:
        ctx = attrs.evolve(ctx, operation_id="op_" + new_id())  # unique across processes
    return attrs.evolve(ctx, committed_event=draft_event(ctx, operation))
