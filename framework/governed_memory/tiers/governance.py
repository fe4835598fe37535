"""The shared machinery every tier's activity port is built from.

With a long-term manager, the tiers reuse its policies, event bus, clock, tracer and
governance settings, so one trail, one profile and one policy revision cover all three
tiers. Without one, a standalone governance is built from the same parts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import attrs
from opentelemetry.trace import Tracer, TracerProvider

from governed_memory.clock import Clock, SystemClock
from governed_memory.events import EventBus, EventSink
from governed_memory.manager import GovernedMemoryManager
from governed_memory.operation_context import ProfileRef
from governed_memory.pipeline import ActivityPort
from governed_memory.policy import MemoryPolicy, PolicyEngine
from governed_memory.provider import MemoryProvider
from governed_memory.rates import ProcessRateWindows, RateWindows
from governed_memory.settings import DEFAULT_TIMEOUT_S, GovernanceSettings
from governed_memory.telemetry import OperationMetrics, get_tracer


@attrs.frozen(slots=True)
class Governance:
    policies: PolicyEngine
    events: EventBus
    clock: Clock
    tracer: Tracer
    settings: GovernanceSettings = attrs.field(factory=GovernanceSettings)
    """How every tier operation is run (profile, deadline, event detail, content in
    traces): the long-term manager's, or a standalone governance's."""
    metrics: OperationMetrics | None = None
    """The manager's operation metrics, shared so tier operations count in the same
    instruments; ``None`` builds them from the global meter provider."""
    rate_windows: RateWindows = attrs.field(factory=ProcessRateWindows)
    """The write-rate windows every tier port counts in: the manager's, so a turn, a
    working-state update and a long-term write count against one tenant window."""

    @classmethod
    def of(cls, manager: GovernedMemoryManager) -> Governance:
        port = manager.activity
        return cls(port.policies, port.events, port.clock, port.tracer, port.settings,
                   port.metrics, port.rate_windows)

    @classmethod
    def standalone(cls, *, policies: Sequence[MemoryPolicy] = (),
                   sinks: Sequence[EventSink] = (), clock: Clock | None = None,
                   tracer_provider: TracerProvider | None = None,
                   profile: ProfileRef | None = None,
                   timeout_s: float | None = DEFAULT_TIMEOUT_S) -> Governance:
        return cls(PolicyEngine(policies), EventBus(sinks), clock or SystemClock(),
                   get_tracer(tracer_provider),
                   GovernanceSettings(profile=profile or ProfileRef(), timeout_s=timeout_s))

    def port(self, tier: Any) -> ActivityPort:
        """An activity port over a tier adapter (which the port calls like a provider)."""
        port = ActivityPort(cast(MemoryProvider, tier), policies=self.policies,
                            events=self.events, clock=self.clock, tracer=self.tracer,
                            settings=self.settings,
                            provider_revision=str(getattr(tier, "revision", "unknown")),
                            rate_windows=self.rate_windows)
        if self.metrics is not None:
            port.metrics = self.metrics
        return port
