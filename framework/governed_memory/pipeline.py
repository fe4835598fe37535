"""The activity port: the single choke point every memory operation passes.

Order matters and is fixed: validate, announce (requested event), decide (scope rule,
then policies), call the provider inside a span with a deadline, verify what came
back, announce the outcome. Nothing reaches a provider without a recorded decision,
and nothing a provider returns reaches the caller without a scope check. The port
never asks which operation it runs: the request answers for itself
(:mod:`governed_memory.request`), so every operation takes the same path.
"""

from __future__ import annotations

import asyncio
import logging
import time
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TypeVar, cast

import attrs
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import INVALID_SPAN, Span, SpanKind, Status, StatusCode, Tracer

import governed_memory.telemetry as tm
from governed_memory.clock import Clock
from governed_memory.errors import (
    REFUSALS,
    GovernedMemoryError,
    MemoryCapabilityUnsupportedError,
    MemoryPolicyDeniedError,
    MemoryScopeError,
    MemoryStorageError,
    MemoryUnavailableError,
    MemoryValidationError,
)
from governed_memory.events import (
    RECEIPT_EVENT,
    AuditUnavailableError,
    EventBus,
    MemoryEvent,
    event_id,
)
from governed_memory.ids import new_id
from governed_memory.operation_context import OperationContext, ProfileRef
from governed_memory.operations import Operation, OperationKind
from governed_memory.outbox import OutboxDispatcher
from governed_memory.policy import (
    SCOPE_RULE_NAME,
    Effect,
    PolicyCheck,
    PolicyDecision,
    PolicyEngine,
)
from governed_memory.principal import Principal
from governed_memory.provider import MemoryProvider
from governed_memory.rates import RateWindows, default_rate_windows
from governed_memory.request import Request, Summary
from governed_memory.settings import GovernanceSettings
from governed_memory.usage import Usage, UsageMeter, UsageProbe, UsageQuery

log = logging.getLogger(__name__)

T = TypeVar("T")


# An operation emits at most one event of each kind; the kind numbers its event id, so
# every kind needs its own number (a write that timed out may be ``failed`` here and
# ``committed`` from the provider's outbox, and both must reach the trail).
_SEQUENCE = {"requested": 0, "scope_violation": 1, "rejected": 2, "failed": 3,
             "committed": 4, "completed": 5, "receipt": 6}


class ActivityPort:
    """Runs one request through governance against one provider, as ``settings`` (the
    profile's :class:`GovernanceSettings`; a manager's without a profile by default)
    say."""

    def __init__(
        self,
        provider: MemoryProvider,
        *,
        policies: PolicyEngine,
        events: EventBus,
        clock: Clock,
        tracer: Tracer,
        settings: GovernanceSettings | None = None,
        provider_revision: str = "unknown",
        meter_provider: MeterProvider | None = None,
        rate_windows: RateWindows | None = None,
    ) -> None:
        self._provider = provider
        self.policies = policies
        self.events = events
        self.clock = clock
        self.tracer = tracer
        self.settings = settings or GovernanceSettings()
        self.provider_revision = provider_revision
        self._provider_name = str(getattr(provider, "name", type(provider).__name__))
        self._capabilities: Any = None
        self.metrics = tm.OperationMetrics(meter_provider)
        self.outbox: OutboxDispatcher | None = None
        """Set when the provider stores committed events transactionally (the
        ``event_outbox`` capability): writes hand it a drafted event instead of
        emitting one, and this dispatcher delivers what the provider stored."""
        stored_events = provider.outbox if self._declares("event_outbox") else None
        if events.listening and stored_events is not None:
            # With nobody to deliver to, storing each write's event only to acknowledge
            # it would cost every write two statements; events an earlier run stored
            # stay stored for a manager that has sinks.
            self.outbox = OutboxDispatcher(
                stored_events, events, content_hashes=self.settings.content_hashes_in_events)
        self._usage_meter = provider.usage_meter if self._declares("usage") else None
        """What reads usage for quotas: the provider's ``usage_meter`` when it declares
        ``usage`` (asked once; a wrapper answers with its inner provider's)."""
        self.rate_windows: RateWindows = (
            rate_windows if rate_windows is not None else default_rate_windows(provider))
        """Where the quotas policy counts write rates (``PolicyCheck.rate_windows``): the
        windows given (a profile's ``[quotas] rate_store``), else the provider's own
        (``rate_windows``), else windows in this process, which warn once when used."""

    def beside(self, target: object) -> ActivityPort:
        """A port over another target (a tier adapter, the context ledger) that
        governs as this one does: the same policies, events, clock, tracer, settings,
        metrics and rate windows, so one trail and one profile cover both."""
        port = ActivityPort(cast(MemoryProvider, target), policies=self.policies,
                            events=self.events, clock=self.clock, tracer=self.tracer,
                            settings=self.settings,
                            provider_revision=str(getattr(target, "revision", "unknown")),
                            rate_windows=self.rate_windows)
        port.metrics = self.metrics
        return port

    @property
    def profile(self) -> ProfileRef:
        """The profile its events and spans name (``settings.profile``)."""
        return self.settings.profile

    @property
    def timeout_s(self) -> float | None:
        """The deadline of each operation (``settings.timeout_s``)."""
        return self.settings.timeout_s

    def _declares(self, capability: str) -> bool:
        if self._capabilities is None:
            self._capabilities = self._provider.capabilities()
        return bool(getattr(self._capabilities, capability, False))

    # -- events -----------------------------------------------------------------------

    def _event(self, kind: str, operation: Operation, ctx: OperationContext,
               request: Request[Any] | None, *, decision: PolicyDecision | None = None,
               summary: Summary | None = None, error: BaseException | None = None,
               started: float | None = None, outcome: str | None = None) -> MemoryEvent:
        hashes = (tuple(s.scope_hash for s in request.event_scopes())
                  if request is not None else ())
        summary = summary or Summary()
        return MemoryEvent(
            event_id=event_id(ctx.operation_id, _SEQUENCE.get(kind, 9)),
            type=f"memory.{operation.kind.value}.{kind}",
            occurred_at=self.clock.now(),
            operation_id=ctx.operation_id,
            operation=operation.value,
            principal_id=ctx.principal.principal_id,
            tenant_id=(request.tenant(ctx.principal.tenant_id) if request is not None
                       else ctx.principal.tenant_id),
            scope_hash=hashes[0] if hashes else None,
            scope_hashes=summary.scope_hashes or (hashes if len(hashes) > 1 else ()),
            profile_id=ctx.profile.id,
            profile_version=ctx.profile.version,
            profile_revision=ctx.profile.revision,
            provider=self._provider_name,
            provider_revision=self.provider_revision,
            decision_id=decision.decision_id if decision else ctx.decision_id,
            policy_revision=decision.policy_revision if decision else None,
            outcome=outcome if outcome is not None else (decision.outcome if decision else None),
            reasons=(summary.reasons or (decision.reasons() if decision else ())
                     ) + tuple(ctx.notes.lines),
            record_ids=summary.record_ids,
            versions=summary.versions,
            content_hashes=(summary.content_hashes
                            if self.settings.content_hashes_in_events else ()),
            count=summary.count,
            duration_ms=None if started is None else (time.perf_counter() - started) * 1000,
            error_code=getattr(error, "code", None) if error is not None else None,
            trace_id=ctx.trace_id,
            span_id=ctx.span_id,
            subject_hashes=request.subjects() if request is not None else (),
            erasure=summary.erasure,
        )

    async def reject_invalid(self, operation: Operation, principal: Principal,
                             error: MemoryValidationError) -> None:
        """Record a request that could not even be built (bad type, unknown enum)."""
        ctx = OperationContext(operation_id="op_" + new_id(), principal=principal,
                               now=self.clock.now(), profile=self.profile)
        await self._close_trail(self._event("rejected", operation, ctx, None, error=error,
                                            outcome="invalid"))

    # -- the pipeline -----------------------------------------------------------------

    async def execute(self, request: Request[T], principal: Principal) -> T:
        operation = request.operation
        started = time.perf_counter()
        ctx = OperationContext(operation_id="op_" + new_id(), principal=principal,
                               now=self.clock.now(), profile=self.profile)
        outcome = "failed"
        try:
            with _operation_span(self.tracer, operation, ctx, self._provider_name) as span:
                trace_id, span_id = tm.span_ids(span)
                if trace_id is not None:
                    ctx = attrs.evolve(ctx, trace_id=trace_id, span_id=span_id)
                try:
                    result = await self._run(operation, request, ctx, span, started)
                except GovernedMemoryError as exc:
                    outcome = _metric_outcome(exc)
                    span.set_attribute(tm.ATTR_ERROR_CODE, exc.code)
                    span.set_attribute(tm.ATTR_OUTCOME, _outcome_of(exc))
                    span.set_status(Status(StatusCode.ERROR, exc.code))
                    raise
                except asyncio.CancelledError:
                    outcome = "cancelled"
                    raise
                outcome = "ok"
                span.set_attribute(tm.ATTR_OUTCOME, "ok")
                return result
        finally:
            self.metrics.record(operation, self._provider_name, outcome,
                                time.perf_counter() - started)

    async def _run(self, operation: Operation, request: Request[T], ctx: OperationContext,
                   span: Any, started: float) -> T:
        # The one validation of what the caller sent, before anything else sees it.
        try:
            request.validate()
            request.validate_at(ctx.now)
        except MemoryValidationError as exc:
            await self._close_trail(self._event("rejected", operation, ctx, request, error=exc,
                                                started=started, outcome="invalid"))
            raise
        if getattr(request, "idempotency_key", None) is not None:
            # Fingerprinted as the caller sent it: policies may transform the request
            # (a TTL from the clock), and a retry must still match the first attempt.
            ctx = attrs.evolve(ctx, request_fingerprint=request.fingerprint())
        scopes = request.target_scopes()
        if scopes:
            span.set_attribute(tm.ATTR_SCOPE_HASH, scopes[0].scope_hash)
        # Fail-closed trails raise here, before any policy or provider sees the request.
        if self.events.listening:
            await self.events.emit(self._event("requested", operation, ctx, request))

        # One deadline covers the decision and the provider call: a slow policy spends
        # the operation's time, it does not extend it.
        deadline = (None if self.timeout_s is None
                    else asyncio.get_running_loop().time() + self.timeout_s)
        try:
            async with asyncio.timeout_at(deadline):
                decision = await self._decide(operation, request, ctx)
        except TimeoutError:
            late = MemoryUnavailableError(
                "policy evaluation did not finish within the deadline; nothing was done")
            await self._close_trail(self._event("failed", operation, ctx, request, error=late,
                                                started=started, outcome="failed"))
            raise late from None
        except BaseException as exc:
            # Cancelled (or a wait_for timeout) while policies ran: the trail still
            # closes the operation, so no ``requested`` event is left without an outcome.
            failure = _Cancelled() if isinstance(exc, asyncio.CancelledError) else exc
            await self._close_trail(self._event(
                "failed", operation, ctx, request, error=failure, started=started,
                outcome="cancelled" if isinstance(exc, asyncio.CancelledError) else "failed"))
            raise
        span.set_attribute(tm.ATTR_DECISION_ID, decision.decision_id)
        span.set_attribute(tm.ATTR_DECISION_OUTCOME, decision.outcome)
        if not decision.allowed:
            error = _refusal(decision)
            denial = decision.denial()
            self.metrics.denied(operation, denial.policy if denial else "unknown")
            await self._close_trail(self._event("rejected", operation, ctx, request,
                                                decision=decision, error=error,
                                                started=started))
            raise error

        # A policy's transform keeps the request's type (``_transform_problem``), and is
        # held to the caller's rules: it is validated too, before the provider sees it.
        decided = cast(Request[T], decision.request)
        transformed = decided is not request
        request = decided.governed(self.settings,
                                   held_for_review=decision.effect is Effect.REVIEW)
        if self.settings.capture_content:
            # After policies ran, so what a redaction removed never reaches the trace.
            for attribute, text in request.traced_text().items():
                span.set_attribute(attribute, text)
        ctx = attrs.evolve(ctx, decision_id=decision.decision_id,
                           policy_revision=decision.policy_revision)
        draft: MemoryEvent | None = None
        if self.outbox is not None and operation.kind is OperationKind.WRITE:
            draft = self._event("committed", operation, ctx, request, decision=decision,
                                outcome="committed")
            ctx = attrs.evolve(ctx, committed_event=draft)
        try:
            result = await self._call_provider(request, ctx, deadline, validate=transformed)
            result, summary = await self._verify(request, result, ctx)
        except GovernedMemoryError as exc:
            kind = "rejected" if isinstance(exc, REFUSALS) else "failed"
            await self._close_trail(self._event(kind, operation, ctx, request,
                                                decision=decision, error=exc, started=started,
                                                outcome=_outcome_of(exc)))
            raise
        except asyncio.CancelledError:
            # The caller gave up; a write may or may not have been applied. The trail
            # still closes the operation, so no ``requested`` event is left dangling.
            await self._close_trail(self._event("failed", operation, ctx, request,
                                                decision=decision, error=_Cancelled(),
                                                started=started, outcome="cancelled"))
            raise
        if summary.record_ids and len(summary.record_ids) == 1:
            span.set_attribute(tm.ATTR_RECORD_ID, summary.record_ids[0])
        if summary.count is not None:
            span.set_attribute(tm.ATTR_RECORD_COUNT, summary.count)
        if draft is None and not self.events.listening:
            return result  # nobody to tell: the outcome event would go nowhere
        done = "committed" if operation.kind is OperationKind.WRITE else "completed"
        event = self._event(done, operation, ctx, request, decision=decision,
                            summary=summary, started=started, outcome=done)
        recorded = await self._record_outcome(event, draft, operation)
        if summary.erasure is not None:
            await self._record_receipt(summary, event, recorded)
        return result

    async def _decide(self, operation: Operation, request: Request[Any],
                      ctx: OperationContext) -> PolicyDecision:
        """The policy decision, in a child span of its own: how long governance took
        and what it decided, apart from the provider's time."""
        spans: AbstractContextManager[Span] = (self.tracer.start_as_current_span(
            tm.DECISION_SPAN, kind=SpanKind.INTERNAL, record_exception=False,
            attributes={tm.ATTR_OPERATION: operation.value,
                        **_profile_attributes(self.profile)},
        ) if tm.may_record(self.tracer) else nullcontext(INVALID_SPAN))
        with spans as span:
            decision = await self.policies.decide(PolicyCheck(
                operation, ctx.principal, request, ctx.operation_id, ctx.now,
                usage=_usage_probe(self._usage_meter, ctx, self.timeout_s,
                                   self._provider_name),
                rate_windows=self.rate_windows))
            span.set_attribute(tm.ATTR_DECISION_ID, decision.decision_id)
            span.set_attribute(tm.ATTR_DECISION_OUTCOME, decision.outcome)
            span.set_attribute(tm.ATTR_POLICY_REVISION, decision.policy_revision)
            denial = decision.denial()
            if denial is not None:
                span.set_attribute(tm.ATTR_POLICY, denial.policy)
            return decision

    async def _close_trail(self, event: MemoryEvent) -> None:
        """Record the outcome of an operation that is failing anyway: its own error says
        more than "the trail is down", so a fail-closed trail's refusal is logged."""
        try:
            await self.events.emit(event)
        except AuditUnavailableError:
            log.error("audit trail could not record %s of %s", event.type, event.operation)

    async def _record_outcome(self, event: MemoryEvent, draft: MemoryEvent | None,
                              operation: Operation) -> MemoryEvent | None:
        """Emit the outcome, or — for a write whose provider stored its committed event —
        deliver what the provider stored. Returns the committed event as delivered
        (``None`` while it waits in the outbox)."""
        if draft is None or self.outbox is None:
            try:
                await self.events.emit(event)
            except AuditUnavailableError as exc:
                if operation.kind is OperationKind.WRITE:
                    raise AuditUnavailableError(
                        f"{operation.value} was applied, but {exc}; retry with the same "
                        "idempotency key to get the result once the trail is back",
                        sinks=exc.sinks) from exc
                raise
            return event
        settled = await self.outbox.settle(draft.event_id, self._provider_name)
        if settled.delivered is not None:
            return settled.delivered
        if settled.waiting:
            # Durable in the provider's outbox; the dispatcher delivers it later.
            log.warning("committed event of %s waits in the provider's outbox",
                        operation.value)
            return None
        # The provider did not store this operation's event (its outbox need not cover
        # every write), or its outbox could not be read: emit the event directly. At
        # least once: the audit sink drops the copy a later drain may bring.
        return await self._record_outcome(event, None, operation)

    async def _record_receipt(self, summary: Summary, committed: MemoryEvent,
                              recorded: MemoryEvent | None) -> None:
        """Erasure evidence: the committed event carries the receipt the provider
        issued; if a layer above it (the search cache) extended the receipt, or the
        committed event still waits in the outbox, the final receipt gets an event of
        its own."""
        if recorded is not None and recorded.erasure == summary.erasure:
            return
        event = attrs.evolve(committed, event_id=event_id(committed.operation_id,
                                                          _SEQUENCE["receipt"]),
                             type=RECEIPT_EVENT, occurred_at=self.clock.now(),
                             outcome="receipt", erasure=summary.erasure,
                             scope_hashes=summary.scope_hashes)
        await self.events.emit(event)

    async def _call_provider(self, request: Request[T], ctx: OperationContext,
                             deadline: float | None, *, validate: bool) -> T:
        """``validate``: the request is not the one the port validated (a policy
        transformed it), so it is validated here, where a provider would refuse it."""
        operation = request.operation
        capability = request.capability
        if capability is not None and not self._declares(capability):
            raise MemoryCapabilityUnsupportedError(
                f"provider {self._provider_name} does not support {operation.value} "
                f"(capability {capability!r})"
            )
        try:
            async with asyncio.timeout_at(deadline):
                if validate:
                    request.validate()
                    request.validate_at(ctx.now)
                return await request.send(self._provider, ctx)
        except GovernedMemoryError:
            raise
        except TimeoutError:
            if operation.kind is OperationKind.WRITE:
                raise MemoryUnavailableError(
                    f"provider {self._provider_name} timed out; the write may or may not "
                    "have been applied and is not retried"
                ) from None
            raise MemoryUnavailableError(f"provider {self._provider_name} timed out") from None
        except Exception as exc:
            # Provider exceptions may quote stored data; log the type only.
            log.error("provider %s raised %s in %s", self._provider_name,
                      type(exc).__name__, operation.value)
            raise MemoryStorageError(f"provider {self._provider_name} failed") from None

    # -- verification -----------------------------------------------------------------

    async def _verify(self, request: Request[T], result: T,
                      ctx: OperationContext) -> tuple[T, Summary]:
        """What the provider returned, checked against the scopes the decision allowed
        (the request knows the shape of its result): strays are reported as a scope
        violation, and a result with nothing safe left raises."""
        allowed = frozenset(scope.scope_hash for scope in request.target_scopes())
        checked = request.check(result, allowed, ctx)
        if checked.stray:
            await self._report_violation(request.operation, request, ctx, list(checked.stray))
        if checked.error is not None:
            raise checked.error
        return checked.result, checked.summary

    async def _report_violation(self, operation: Operation, request: Request[Any],
                                ctx: OperationContext, record_ids: list[str]) -> None:
        log.warning("provider %s returned %d record(s) outside the requested scope or "
                    "visibility in %s", self._provider_name, len(record_ids), operation.value)
        event = self._event("scope_violation", operation, ctx, request,
                            summary=Summary(record_ids=tuple(record_ids),
                                             count=len(record_ids)),
                            outcome="dropped")
        await self.events.emit(attrs.evolve(event, type="memory.read.scope_violation"))
        record_ids.clear()


class _Cancelled(MemoryUnavailableError):
    code = "cancelled"


def _outcome_of(exc: GovernedMemoryError) -> str:
    return "rejected" if isinstance(exc, REFUSALS) else "failed"


def _metric_outcome(exc: GovernedMemoryError) -> str:
    """The outcome label of the operations counter: denied, rejected or failed."""
    if isinstance(exc, MemoryScopeError | MemoryPolicyDeniedError):
        return "denied"
    return _outcome_of(exc)


def _refusal(decision: PolicyDecision) -> GovernedMemoryError:
    """The error a denied operation raises: the scope rule's, or the policies'."""
    denial = decision.denial()
    if denial is not None and denial.policy == SCOPE_RULE_NAME:
        return MemoryScopeError(f"scope authorization denied: {denial.reason}")
    return MemoryPolicyDeniedError(
        "denied by policy: " + "; ".join(decision.reasons()),
        decision_id=decision.decision_id,
        policy=denial.policy if denial else None,
        reasons=decision.reasons(),
    )


def _operation_span(tracer: Tracer, operation: Operation, ctx: OperationContext,
                    provider: str) -> AbstractContextManager[Span]:
    """The operation's span (``{gen_ai.operation.name} {provider}``), if anyone records."""
    if not tm.may_record(tracer):
        return nullcontext(INVALID_SPAN)
    attributes: dict[str, Any] = {
        tm.ATTR_OPERATION_NAME: operation.gen_ai_name,
        tm.ATTR_OPERATION: operation.value,
        tm.ATTR_OPERATION_ID: ctx.operation_id,
        **_profile_attributes(ctx.profile),
        tm.ATTR_PROVIDER: provider,
    }
    return tracer.start_as_current_span(
        tm.span_name(operation, provider), kind=SpanKind.INTERNAL,
        attributes=attributes, record_exception=False, set_status_on_exception=False)


def _profile_attributes(profile: ProfileRef) -> dict[str, str]:
    """The profile as span attributes (the operation's span and its decision's)."""
    return {tm.ATTR_PROFILE: str(profile), tm.ATTR_PROFILE_ID: profile.id,
            tm.ATTR_PROFILE_VERSION: profile.version,
            tm.ATTR_PROFILE_REVISION: profile.revision}


def _usage_probe(meter: UsageMeter | None, ctx: OperationContext, timeout_s: float | None,
                 provider_name: str) -> UsageProbe | None:
    """Usage of the operation's own tenant, read from the provider's ``meter`` within the
    operation's deadline; ``None`` if the provider cannot report it."""
    if meter is None:
        return None

    async def probe(query: UsageQuery) -> Usage:
        if query.tenant_id != ctx.principal.tenant_id:
            raise MemoryScopeError("usage of another tenant")
        async with asyncio.timeout(timeout_s):
            usage = await meter.usage(query, ctx)
        if not isinstance(usage, Usage):
            raise MemoryStorageError(f"provider {provider_name} reported no usage")
        return usage

    return probe
