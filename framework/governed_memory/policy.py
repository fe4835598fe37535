"""Deciding whether an operation may run: the fixed scope rule, then every policy.

The scope-authorization rule is not a plugin and cannot be unregistered: tenant
isolation and per-user ownership hold whatever else is configured. Registered
policies run after it, in order. Deny wins over review over allow, and a policy that
raises or returns something malformed counts as a deny, so a broken policy can only
make the system stricter.
"""

from __future__ import annotations

import enum
import hashlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from governed_memory.canonical import canonical_json
from governed_memory.errors import MemoryScopeError
from governed_memory.operations import (
    AUDIT_OPERATIONS,
    STORE_OPERATIONS,
    Operation,
    OperationKind,
)
from governed_memory.principal import Permission, Principal, PrincipalKind
from governed_memory.rates import RateWindows
from governed_memory.request import Request
from governed_memory.usage import UsageProbe

log = logging.getLogger(__name__)

SCOPE_RULE_NAME = "scope-authorization"
SCOPE_RULE_REVISION = "1"


class Effect(enum.IntEnum):
    """Ordered so that ``max`` picks the strictest verdict."""

    ALLOW = 0
    REVIEW = 1
    DENY = 2


@attrs.frozen(slots=True)
class PolicyCheck:
    """What a policy sees. ``request`` is the request as transformed by earlier policies."""

    operation: Operation
    principal: Principal
    request: Request[Any]
    operation_id: str
    now: float
    usage: UsageProbe | None = None
    """Asks the operation's provider for current usage (quotas); ``None`` when the
    provider cannot tell, in which case a policy that needs usage must deny."""
    rate_windows: RateWindows | None = None
    """Where write rates are counted (quotas): the windows the profile chose, shared
    by every process when the store is (``governed_memory.rates``); ``None`` when the
    check was built without them, in which case a policy that limits rates must deny."""


@attrs.frozen(slots=True)
class PolicyVerdict:
    """A policy's answer. ``reason`` must be safe to show: never content or secrets.

    ``request`` replaces the request for the policies after this one and for the
    provider (redaction, TTL); it must be of the same type and touch the same scopes.
    """

    effect: Effect
    reason: str = ""
    request: Request[Any] | None = None

    @classmethod
    def allow(cls, reason: str = "") -> PolicyVerdict:
        return cls(Effect.ALLOW, reason)

    @classmethod
    def deny(cls, reason: str) -> PolicyVerdict:
        return cls(Effect.DENY, reason)

    @classmethod
    def review(cls, reason: str) -> PolicyVerdict:
        return cls(Effect.REVIEW, reason)

    @classmethod
    def transform(cls, request: Request[Any], reason: str) -> PolicyVerdict:
        return cls(Effect.ALLOW, reason, request)


@runtime_checkable
class MemoryPolicy(Protocol):
    """A policy plugin's product. ``revision`` must change whenever what the policy
    decides could change (its code or its configuration): it goes into the policy set's
    revision, which every decision and event records."""

    name: str
    revision: str

    async def evaluate(self, check: PolicyCheck) -> PolicyVerdict: ...


@attrs.frozen(slots=True)
class PolicyOutcome:
    """One policy's verdict as recorded in a decision (no request body)."""

    policy: str
    effect: Effect
    reason: str
    transformed: bool = False


@attrs.frozen(slots=True)
class PolicyDecision:
    decision_id: str
    effect: Effect
    policy_revision: str
    outcomes: tuple[PolicyOutcome, ...]
    request: Request[Any]

    @property
    def allowed(self) -> bool:
        return self.effect is not Effect.DENY

    @property
    def outcome(self) -> str:
        return self.effect.name.lower()

    def denial(self) -> PolicyOutcome | None:
        return next((o for o in self.outcomes if o.effect is Effect.DENY), None)

    def reasons(self) -> tuple[str, ...]:
        """Every deny, review and transform, and each allow that says why (a policy set
        naming the rules that permitted it): what an auditor reads in the event."""
        return tuple(f"{o.policy}: {o.reason}" for o in self.outcomes
                     if o.effect is not Effect.ALLOW or o.transformed or o.reason)


def authorize_scope(principal: Principal, request: Request[Any]) -> str | None:
    """The fixed rule. Returns the reason for a denial, or ``None`` when allowed.

    - the principal's tenant must be the tenant of every scope touched;
    - the principal needs the operation's permission (``memory:admin`` implies every
      ``memory:`` one; ``audit:read`` is implied by none);
    - a principal bound to a user (every user principal; an agent or service acting
      for a user) may only touch that user's scopes, or read shared scopes with no
      user; writing a shared scope takes ``memory:admin``.
    """
    operation = request.operation
    if not principal.has(operation.permission):
        return f"principal lacks {operation.permission.value}"
    if operation in STORE_OPERATIONS:
        # Store-wide work reaches every tenant's jobs: an operator's, never a user's.
        if request.target_scopes():
            return "a store-wide operation names no scope"
        if principal.kind is not PrincipalKind.SERVICE or principal.user_id is not None:
            return "store-wide operations are run by a service principal bound to no user"
        return None
    if operation is Operation.SNAPSHOT_HEADER:
        # Names a tenant, not a scope: the replay that follows is authorized on the
        # snapshot's scopes like any read.
        if getattr(request, "tenant_id", None) != principal.tenant_id:
            return "tenant mismatch"
        return None
    if operation in AUDIT_OPERATIONS:
        # A whole tenant's trail: read by an auditor of that tenant bound to no user.
        if getattr(request, "tenant_id", None) != principal.tenant_id:
            return "tenant mismatch"
        if principal.user_id is not None:
            return "the audit trail is read by an auditor bound to no user"
        return None
    subject = request.named_subject()
    if subject is not None:
        # Names a user instead of a scope (an erasure across their tenant).
        tenant_id, user_id = subject
        if tenant_id != principal.tenant_id:
            return "tenant mismatch"
        if principal.user_id is not None and user_id != principal.user_id:
            return "principal is bound to another user"
        return None
    scopes = request.target_scopes()
    if not scopes:
        return "request names no scope"
    if principal.kind is PrincipalKind.USER and principal.user_id is None:
        return "user principal has no user_id"
    for scope in scopes:
        if scope.tenant_id != principal.tenant_id:
            return "tenant mismatch"
        if principal.user_id is None:
            continue
        if scope.user_id is None:
            if operation.kind is OperationKind.WRITE and not principal.has(Permission.ADMIN):
                return "writing a shared scope takes memory:admin"
        elif scope.user_id != principal.user_id:
            return "scope belongs to another user"
    return None


class PolicyEngine:
    """Runs the scope rule and the registered policies and aggregates one decision.

    ``configuration`` (policy name → the config it was built from) is folded into the
    revision, so two deployments with the same policies but different settings never
    share a policy revision even if a third-party policy's own ``revision`` ignores its
    configuration.
    """

    def __init__(self, policies: Sequence[MemoryPolicy] = (),
                 configuration: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        names = [p.name for p in policies]
        if len(set(names)) != len(names) or SCOPE_RULE_NAME in names:
            raise ValueError(f"policy names must be unique and not {SCOPE_RULE_NAME!r}")
        self._policies = tuple(policies)
        self.revision = _policy_revision(self._policies, configuration or {})

    @property
    def policies(self) -> tuple[MemoryPolicy, ...]:
        return self._policies

    async def decide(self, check: PolicyCheck) -> PolicyDecision:
        # One decision per operation, so its id is derived from the operation's.
        decision_id = "dec_" + check.operation_id.removeprefix("op_")
        reason = authorize_scope(check.principal, check.request)
        if reason is not None:
            outcome = PolicyOutcome(SCOPE_RULE_NAME, Effect.DENY, reason)
            return PolicyDecision(decision_id, Effect.DENY, self.revision, (outcome,),
                                  check.request)
        outcomes = [PolicyOutcome(SCOPE_RULE_NAME, Effect.ALLOW, "")]
        request = check.request
        effect = Effect.ALLOW
        for policy in self._policies:
            verdict = await self._evaluate(policy, attrs.evolve(check, request=request))
            transformed = False
            if verdict.effect is not Effect.DENY and verdict.request is not None:
                problem = _transform_problem(request, verdict.request)
                if problem is not None:
                    verdict = PolicyVerdict.deny(f"invalid transform: {problem}")
                else:
                    request, transformed = verdict.request, True  # type: ignore[assignment]
            outcomes.append(PolicyOutcome(policy.name, verdict.effect, verdict.reason,
                                          transformed))
            effect = max(effect, verdict.effect)
            if effect is Effect.DENY:
                break
        if effect is not Effect.DENY and request is not check.request:
            # Transforms never widen access: the request the provider will see must pass
            # the fixed rule on its own.
            again = authorize_scope(check.principal, request)
            if again is not None:
                outcomes.append(PolicyOutcome(SCOPE_RULE_NAME, Effect.DENY,
                                              f"transformed request: {again}"))
                effect = Effect.DENY
        if effect is Effect.REVIEW and not request.reviewable:
            outcomes.append(PolicyOutcome("review", Effect.DENY,
                                          f"review is only possible for new records, "
                                          f"not {request.operation.value}"))
            effect = Effect.DENY
        return PolicyDecision(decision_id, effect, self.revision, tuple(outcomes), request)

    @staticmethod
    async def _evaluate(policy: MemoryPolicy, check: PolicyCheck) -> PolicyVerdict:
        try:
            verdict = await policy.evaluate(check)
        except Exception:  # fail closed: a broken policy denies
            log.exception("policy %s raised; denying", policy.name)
            return PolicyVerdict.deny("policy failed")
        if not isinstance(verdict, PolicyVerdict) or not isinstance(verdict.effect, Effect):
            return PolicyVerdict.deny("policy returned no verdict")
        return verdict


def _transform_problem(before: Request[Any], after: object) -> str | None:
    if type(after) is not type(before):
        return "changed the request type"
    assert isinstance(after, type(before))
    if [s.scope_hash for s in after.target_scopes()] != [
        s.scope_hash for s in before.target_scopes()
    ]:
        return "changed the scope"
    if after.named_subject() != before.named_subject():
        return "changed the data subject"
    return None


def _policy_revision(policies: Sequence[MemoryPolicy],
                     configuration: Mapping[str, Mapping[str, Any]]) -> str:
    parts: list[list[Any]] = [[SCOPE_RULE_NAME, SCOPE_RULE_REVISION]]
    for policy in policies:
        part: list[Any] = [policy.name, str(policy.revision)]
        config = configuration.get(policy.name)
        if config:
            part.append(_json_plain(config))
        parts.append(part)
    return "pr1:" + hashlib.sha256(canonical_json(parts).encode()).hexdigest()[:32]


def _json_plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _json_plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_plain(v) for v in value]
    return value


def scope_error(decision: PolicyDecision) -> MemoryScopeError:
    denial = decision.denial()
    return MemoryScopeError(
        f"scope authorization denied: {denial.reason if denial else 'denied'}"
    )
