"""The one shape every governed operation's request takes, generic in what it returns.

The activity port runs any :class:`Request` the same way (validate, announce, decide, call,
check, announce the outcome) without knowing which operation it is: the request itself
says which scopes it targets, which tenant and data subjects its events name, how it is
fingerprinted for idempotency, what governance sets on it (and whether a policy may
hold it for review), what of it a trace may carry, how it is sent to its target
(``send``: the typed dispatch, one method per request class), how what came back is
checked against the scopes that were allowed (``check``) and what an event may say
about it (``summarize``, which a provider storing its own committed event uses too).
That is what lets ``execute(request: Request[T]) -> T`` be typed end to end, and what
lets a new operation (a tier's, a store-wide one) join governance without a branch in
the port or in the policy engine's fixed rules.
"""

from __future__ import annotations

import hashlib
from collections.abc import Set
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

import attrs

from governed_memory.canonical import canonical_json
from governed_memory.errors import GovernedMemoryError, MemoryStorageError, MemoryValidationError
from governed_memory.events import ErasureEvidence, subject_hash
from governed_memory.operations import Operation
from governed_memory.scope import Scope

if TYPE_CHECKING:
    from governed_memory.operation_context import OperationContext
    from governed_memory.settings import GovernanceSettings

ResultT = TypeVar("ResultT")
R = TypeVar("R")


@attrs.frozen(slots=True, kw_only=True)
class Summary:
    """What an outcome event may say about a result: ids, versions, hashes and counts,
    never content."""

    record_ids: tuple[str, ...] = ()
    versions: tuple[int, ...] = ()
    content_hashes: tuple[str, ...] = ()
    count: int | None = None
    scope_hashes: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    erasure: ErasureEvidence | None = None


@attrs.frozen(slots=True)
class Checked(Generic[R]):
    """A result after its scope check: what the caller gets (anything of another scope
    left out), what the event says, the ids left out (reported as a
    ``memory.read.scope_violation``) and, when nothing safe is left to return, the error
    the port raises once the violation is reported."""

    result: R
    summary: Summary = attrs.field(factory=Summary)
    stray: tuple[str, ...] = ()
    error: GovernedMemoryError | None = None


class Audited:
    """A result value that checks itself against the allowed scopes (tier results,
    store-wide reports, lookups, replays): its request's ``check`` defers to it."""

    __slots__ = ()

    def audit(self, allowed: Set[str]) -> Checked[Any]:  # pragma: no cover - overridden
        raise NotImplementedError


class Request(Generic[ResultT]):
    """Base of every governed request; ``ResultT`` is what the operation returns."""

    __slots__ = ()

    operation: ClassVar[Operation]
    capability: ClassVar[str | None] = None
    """The optional provider capability the operation needs (``review``), checked by the
    port before the call; ``None`` for operations every target offers."""
    later_fields: ClassVar[tuple[str, ...]] = ()
    """Fields added after stored idempotency entries may have fingerprinted this kind of
    request: left out of the fingerprint while unset, so that the retry of a request
    sent before the field existed still matches its first attempt."""
    reviewable: ClassVar[bool] = False
    """Whether a policy may hold it for review (``Effect.REVIEW``): only a new record can
    wait for a reviewer (as ``pending_review``), so the policy engine denies any other
    operation a policy would review."""

    def target_scopes(self) -> tuple[Scope, ...]:
        """Every exact scope the operation reads or writes (empty for store-wide ones
        and for an erasure of a user, which names its subject instead)."""
        scope = getattr(self, "scope", None)
        return (scope,) if isinstance(scope, Scope) else ()

    def event_scopes(self) -> tuple[Scope, ...]:
        """The scopes its events name: :meth:`target_scopes` less anything that is not a
        ``Scope`` (a request that failed validation may hold anything there)."""
        return tuple(scope for scope in self.target_scopes() if isinstance(scope, Scope))

    def tenant(self, default: str) -> str:
        """The tenant its events name: the named subject's (:meth:`named_subject`), else
        its first scope's, else ``default`` (the acting principal's)."""
        subject = self.named_subject()
        if subject is not None:
            return subject[0]
        scopes = self.event_scopes()
        return scopes[0].tenant_id if scopes else default

    def subjects(self) -> tuple[str, ...]:
        """The data subjects it concerns (``events.subject_hash``): each user among its
        scopes. A request that names a user by id instead (an erasure of a user) says
        so itself (:meth:`named_subject`)."""
        subject = self.named_subject()
        if subject is not None:
            return user_subjects(*subject)
        return tuple(dict.fromkeys(subject_hash(scope.tenant_id, scope.user_id)
                                   for scope in self.event_scopes()
                                   if scope.user_id is not None))

    def named_subject(self) -> tuple[str, str] | None:
        """The user, as ``(tenant_id, user_id)``, it names in place of any scope (an
        erasure of one user in every scope of their tenant): the scope rule authorizes
        it by that tenant and user, and no policy may change them. ``None`` for a
        request that names its scopes."""
        return None

    def validate(self) -> None:
        """Check every limit and type; raises ``MemoryValidationError`` naming the field."""
        raise NotImplementedError  # pragma: no cover - every request overrides

    def validate_at(self, now: float) -> None:
        """What only the operation's clock can refuse, checked after :meth:`validate`;
        nothing by default."""
        return None

    def governed(self, settings: GovernanceSettings, *,
                 held_for_review: bool) -> Request[ResultT]:
        """The request as its target receives it once governance set what is its own to
        set: the profile's ``settings``, and a policy's review (``held_for_review``).
        Unchanged by default."""
        return self

    def traced_text(self) -> dict[str, str]:
        """The span attributes that carry its text when a profile captures content in
        traces (``privacy.capture_content_in_traces``, after policies ran); none by
        default."""
        return {}

    def fingerprint(self) -> str:
        """Hash of everything but the idempotency key, through the one converter:
        "the same request" means this, for every kind of request."""
        from governed_memory.converter import converter

        body = converter.unstructure(self)
        body.pop("idempotency_key", None)
        for name in self.later_fields:
            if body.get(name) is None:
                body.pop(name, None)
        body["operation"] = self.operation.value
        try:
            text = canonical_json(body)
        except ValueError:
            raise MemoryValidationError("the request cannot be serialized as JSON",
                                        field="metadata") from None
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()

    async def send(self, target: Any, ctx: OperationContext) -> ResultT:
        """Call the operation on its target (a provider, a tier store); each request
        class types ``target`` as what it calls."""
        raise NotImplementedError  # pragma: no cover - every request overrides

    def check(self, result: ResultT, allowed: Set[str],
              ctx: OperationContext) -> Checked[ResultT]:
        """What came back, checked against the scopes the decision allowed. The default
        is for results that check themselves (:class:`Audited`)."""
        if not isinstance(result, Audited):
            return wrong_result(self, result)
        checked: Checked[ResultT] = result.audit(allowed)
        return checked

    @classmethod
    def summarize(cls, result: ResultT) -> Summary:
        """What an outcome event may say about ``result`` as the caller gets it: the one
        derivation behind ``check``'s summary and, for a write, the committed event a
        provider stores (``committed_summary``). A result that checks itself
        summarizes itself in ``audit`` instead."""
        raise TypeError(f"no summary of a {type(result).__name__} result")


def user_subjects(tenant_id: object, user_id: object) -> tuple[str, ...]:
    """The data subject a request names by ids rather than by a scope, as its events
    name it; none while the ids are not even strings (a request that failed validation
    is evented too)."""
    if isinstance(tenant_id, str) and isinstance(user_id, str):
        return (subject_hash(tenant_id, user_id),)
    return ()


def wrong_result(request: Request[Any], result: object) -> Checked[Any]:
    """A result of the wrong type: a provider bug, never returned to the caller."""
    return Checked(result, error=MemoryStorageError(
        f"provider returned {type(result).__name__} for {request.operation.value}"))


def summarised(result: R, *, record_ids: tuple[str, ...] = (), versions: tuple[int, ...] = (),
               content_hashes: tuple[str, ...] = (), count: int | None = None,
               reasons: tuple[str, ...] = (), stray: tuple[str, ...] = ()) -> Checked[R]:
    """A checked result with its summary, in one call (what an :class:`Audited` result
    returns from ``audit``)."""
    return Checked(result, Summary(record_ids=record_ids, versions=versions,
                                   content_hashes=content_hashes, count=count,
                                   reasons=reasons), stray)
