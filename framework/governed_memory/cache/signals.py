"""Events and metrics for every cache outcome.

Events go to the ``EventBus`` the host passes in (the manager's own bus, once it
attaches it with :func:`governed_memory.cache.attach_cache_events`), with the operation
id of the call they belong to, so an auditor can see that an answer came from the cache
and under which scope revisions it was trusted. On a strict (fail-closed) bus an event
that cannot be recorded raises ``AuditUnavailableError`` like any other event of the
operation: the caller decides what that means (see ``CachedMemoryProvider``). They
carry scope hashes and a reason, never the query, content or key. Metrics use the
OpenTelemetry API only: one counter per outcome, from a meter of an injectable
``MeterProvider`` (the global one otherwise).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from opentelemetry import metrics
from opentelemetry.metrics import Counter, MeterProvider

from governed_memory.clock import Clock
from governed_memory.events import EventBus, MemoryEvent, event_id
from governed_memory.ids import new_id
from governed_memory.operation_context import OperationContext

METER_NAME: Final = "governed_memory.cache"
OUTCOMES: Final = ("hit", "miss", "fill", "invalidate", "quarantine", "bypassed")
EVENT_TYPES: Final = tuple(f"memory.cache.{outcome}" for outcome in OUTCOMES)
_COUNTER_NAMES: Final = {
    "hit": "governed_memory.cache.hits",
    "miss": "governed_memory.cache.misses",
    "fill": "governed_memory.cache.fills",
    "invalidate": "governed_memory.cache.invalidations",
    "quarantine": "governed_memory.cache.quarantines",
    "bypassed": "governed_memory.cache.bypasses",
}
ATTR_STORE: Final = "governed_memory.cache.store"
ATTR_REASON: Final = "governed_memory.cache.reason"
ATTR_PROVIDER: Final = "governed_memory.provider"
BACKGROUND_PRINCIPAL: Final = "governed-memory-cache"
"""The principal id on events of work no caller asked for (the quarantine retry)."""


class CacheSignals:
    def __init__(self, *, events: EventBus | None, meter_provider: MeterProvider | None,
                 clock: Clock, provider: str, provider_revision: str, store: str) -> None:
        from governed_memory.version import __version__

        self.events = events
        """Where events go; replaced by ``CachedMemoryProvider.attach_events``."""
        self._clock = clock
        self._provider = provider
        self._provider_revision = provider_revision
        self._store = store
        meter = metrics.get_meter(METER_NAME, __version__, meter_provider=meter_provider)
        self._counters: dict[str, Counter] = {
            outcome: meter.create_counter(name, unit="1",
                                          description=f"search cache outcomes: {outcome}")
            for outcome, name in _COUNTER_NAMES.items()
        }

    async def signal(self, outcome: str, *, ctx: OperationContext | None, operation: str,
                     tenant_id: str, scope_hashes: Sequence[str], reason: str | None = None,
                     count: int | None = None) -> None:
        attributes = {ATTR_STORE: self._store, ATTR_PROVIDER: self._provider}
        if reason is not None:
            attributes[ATTR_REASON] = reason
        self._counters[outcome].add(1, attributes)
        events = self.events
        if events is None or not events.listening:
            return  # nobody could record or refuse it: do not even build it
        hashes = tuple(scope_hashes)
        await events.emit(MemoryEvent(
            # A fresh id: the activity port numbers its own events by operation id.
            event_id=event_id(),
            type=f"memory.cache.{outcome}",
            occurred_at=self._clock.now(),
            operation_id=ctx.operation_id if ctx is not None else "op_" + new_id(),
            operation=operation,
            principal_id=ctx.principal.principal_id if ctx is not None else BACKGROUND_PRINCIPAL,
            tenant_id=tenant_id,
            scope_hash=hashes[0] if hashes else None,
            scope_hashes=hashes if len(hashes) > 1 else (),
            profile_id=ctx.profile.id if ctx is not None else None,
            profile_version=ctx.profile.version if ctx is not None else None,
            profile_revision=ctx.profile.revision if ctx is not None else None,
            provider=self._provider,
            provider_revision=self._provider_revision,
            decision_id=ctx.decision_id if ctx is not None else None,
            outcome=outcome,
            reasons=(reason,) if reason is not None else (),
            count=count,
            trace_id=ctx.trace_id if ctx is not None else None,
            span_id=ctx.span_id if ctx is not None else None,
        ))
