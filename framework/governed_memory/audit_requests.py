"""Reading the audit trail as governed operations: query, subject report, verify, prove.

``governed-memory audit`` reads a trail as whoever holds its files or its store. A
service's auditor reads it through the activity port instead, like any memory
operation: each read is a request here (``audit_query``, ``audit_report``,
``audit_verify``, ``audit_prove``, with the permission ``audit:read``, which no memory
permission implies) and has its decision, its span and its ``memory.audit.*`` events,
so reading the trail is itself in the trail. Those events say who read, when, with
what outcome and how many events came back (and, for a report or a query by subject,
which data subject): never what the filters or the answer held.

What each request answers is the audit tools' own answer, from their own code
(``audit.query``, ``audit.summary``, ``audit.report``, ``audit.verify``,
``audit.proving``, ``audit.times``): this module only makes each a request, sends it to
the trail the manager's sinks write (:class:`TrailReader`: the ``postgres-trail`` store
when one of them is one, the deployment's whole trail; else the hash-chained files of
``[audit] path``) and keeps an auditor to its tenant. An auditor's tenant must be the
tenant it asks about (the fixed scope rule's branch for audit reads checks it, and
refuses an auditor bound to a user: the trail of a tenant is no user's to read), only
that tenant's events come back, and a proof is given only of one of them.

Reading is blocking (files, or a store's synchronous reader), so it runs on a worker
thread; as with the command line, a query or a report verifies the chain first unless
asked not to, and refuses to answer from a trail that does not verify
(:class:`AuditTrailError`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, ClassVar, Final, TypeVar, cast

import attrs

from governed_memory.audit.proofs import (
    ForeignTrailError,
    ProofError,
    TreeCheckpoint,
    TreeSizeError,
)
from governed_memory.audit.query import EventFilter, TrailEntry, query
from governed_memory.audit.report import subject_report
from governed_memory.audit.strict_json import JsonDocumentError
from governed_memory.audit.summary import principal_summary
from governed_memory.audit.times import parse_time
from governed_memory.audit.verify import (
    Problem,
    TrailProblemError,
)
from governed_memory.errors import (
    MemoryNotFoundError,
    MemoryValidationError,
)
from governed_memory.events import subject_hash
from governed_memory.limits import MAX_INT64, check_identifier, check_text
from governed_memory.operations import Operation
from governed_memory.pipeline import ActivityPort
from governed_memory.principal import Principal
from governed_memory.provider import MemoryProvider
from governed_memory.request import Request, user_subjects
from governed_memory.scope import Scope

if TYPE_CHECKING:
    from governed_memory.operation_context import OperationContext

from governed_memory.audit_trail_reader import (
    AuditEvents,
    AuditSummary,
    AuditTrailError,
    ConsistencyAnswer,
    InclusionAnswer,
    OpenTrail,
    SubjectAudit,
    TrailCheck,
    TrailReader,
)

__all__ = ["AUDIT_REQUESTS", "DEFAULT_EVENTS", "MAX_EVENTS", "AuditConsistencyRequest",
           "AuditEvents", "AuditFilter", "AuditInclusionRequest", "AuditQueryRequest",
           "AuditReportRequest", "AuditRequest", "AuditSummary", "AuditSummaryRequest",
           "AuditTrailError", "AuditVerifyRequest", "ConsistencyAnswer", "GovernedAudit",
           "InclusionAnswer", "OpenTrail", "SubjectAudit", "TrailCheck", "TrailReader"]

ResultT = TypeVar("ResultT")
R = TypeVar("R")

MAX_EVENTS: Final = 1000
"""The most events one query answers; the next page starts after its ``next_cursor``."""
DEFAULT_EVENTS: Final = 100
MAX_TIME_CHARS: Final = 64
"""A time as an auditor types it (``2 days ago``, ISO 8601) is short; longer is refused
before it is parsed."""
_SCOPE_HASH: Final = re.compile(r"sh1:[0-9a-f]{64}")
_EVENT_ID: Final = re.compile(r"[\x21-\x7e]{1,255}")


class AuditRequest(Request[ResultT]):
    """Base of the audit requests: one tenant's trail, read by its auditor.

    The fixed scope rule checks ``tenant_id`` against the auditor's tenant (its branch
    for audit reads); the tenant-wide scope it targets names what a transforming policy
    may not move. Its events name no scope (the read touched no memory) and the
    auditor's tenant."""

    __slots__ = ()

    def target_scopes(self) -> tuple[Scope, ...]:
        tenant = getattr(self, "tenant_id", None)
        try:
            return (Scope(tenant),) if isinstance(tenant, str) else ()
        except MemoryValidationError:
            return ()

    def event_scopes(self) -> tuple[Scope, ...]:
        return ()

    def subjects(self) -> tuple[str, ...]:
        return user_subjects(getattr(self, "tenant_id", None), getattr(self, "user_id", None))

    def validate(self) -> None:
        check_identifier(getattr(self, "tenant_id", None), "tenant_id")


def _optional_identifier(value: object, field: str) -> None:
    if value is not None:
        check_identifier(value, field)


def _check_time(value: object, field: str, now: float) -> float | None:
    if value is None:
        return None
    text = check_text(value, field, max_bytes=MAX_TIME_CHARS)
    try:
        return parse_time(text, now)
    except ValueError as exc:
        raise MemoryValidationError(str(exc), field=field) from None


def _check_int(value: object, field: str, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise MemoryValidationError(f"{field} must be an integer from {low} to {high}",
                                    field=field)


def _check_bool(value: object, field: str) -> None:
    if not isinstance(value, bool):
        raise MemoryValidationError(f"{field} must be true or false", field=field)


@attrs.frozen(slots=True, kw_only=True)
class AuditFilter:
    """What ``audit query`` filters by (every condition given must hold), within the
    auditor's tenant: a principal (exactly), a data subject (the user id of the
    tenant's subject, matched by its subject hash), a scope hash, an operation or event
    type, an outcome, and a time range: ``since`` and ``until`` as an auditor types
    them (epoch seconds, ISO 8601, or a time ago: ``24h``, ``2 days ago``), a time ago
    counted back from the operation's clock."""

    principal_id: str | None = None
    user_id: str | None = None
    scope_hash: str | None = None
    operation: str | None = None
    outcome: str | None = None
    since: str | None = None
    until: str | None = None

    def validate(self) -> None:
        _optional_identifier(self.principal_id, "principal")
        _optional_identifier(self.user_id, "subject")
        if self.scope_hash is not None and not (isinstance(self.scope_hash, str)
                                                and _SCOPE_HASH.fullmatch(self.scope_hash)):
            raise MemoryValidationError("scope_hash must be sh1: and 64 lower-case hex "
                                        "digits", field="scope_hash")
        if self.operation is not None:
            check_text(self.operation, "operation", max_bytes=128)
        if self.outcome is not None:
            check_text(self.outcome, "outcome", max_bytes=64)

    def validate_at(self, now: float) -> None:
        _check_time(self.since, "since", now)
        _check_time(self.until, "until", now)

    def event_filter(self, tenant_id: str, now: float) -> EventFilter:
        """The audit tools' filter, bound to ``tenant_id``."""
        return EventFilter(
            tenant=tenant_id, principal=self.principal_id, scope_hash=self.scope_hash,
            subject_hash=(None if self.user_id is None
                          else subject_hash(tenant_id, self.user_id)),
            operation=self.operation, outcome=self.outcome,
            since=_check_time(self.since, "since", now),
            until=_check_time(self.until, "until", now))


@attrs.frozen(slots=True, kw_only=True)
class _FilteredAuditRequest(AuditRequest[R]):
    """An audit read of the tenant's events that ``where`` selects, verified first unless
    ``verify`` is false: what ``audit query`` and its summary share."""

    tenant_id: str
    where: AuditFilter = attrs.field(factory=AuditFilter)
    verify: bool = True

    @property
    def user_id(self) -> str | None:
        """The data subject the read is about, if it names one (for its events)."""
        where = self.where
        return where.user_id if isinstance(where, AuditFilter) else None

    def validate(self) -> None:
        super().validate()
        if not isinstance(self.where, AuditFilter):
            raise MemoryValidationError("where must be an AuditFilter", field="where")
        self.where.validate()
        _check_bool(self.verify, "verify")

    def validate_at(self, now: float) -> None:
        self.where.validate_at(now)


@attrs.frozen(slots=True, kw_only=True)
class AuditQueryRequest(_FilteredAuditRequest[AuditEvents]):
    """``audit query``: the tenant's events matching ``where``, in chain order, at most
    ``limit`` after entry ``cursor``; the chain is verified first unless ``verify`` is
    false."""

    operation: ClassVar[Operation] = Operation.AUDIT_QUERY

    limit: int = DEFAULT_EVENTS
    cursor: int | None = None

    def validate(self) -> None:
        super().validate()
        _check_int(self.limit, "limit", 1, MAX_EVENTS)
        if self.cursor is not None:
            _check_int(self.cursor, "cursor", 0, MAX_INT64)

    async def send(self, target: TrailReader, ctx: OperationContext) -> AuditEvents:
        return await target.read(ctx, self._answer)

    def _answer(self, trail: OpenTrail, now: float) -> AuditEvents:
        if self.verify:
            trail.verified()
        after = self.cursor or 0
        found: list[TrailEntry] = []
        for entry in query(trail.sources, self.where.event_filter(self.tenant_id, now)):
            if entry.seq <= after:
                continue
            if len(found) == self.limit:
                return AuditEvents(tuple(found), found[-1].seq)
            found.append(entry)
        return AuditEvents(tuple(found))


@attrs.frozen(slots=True, kw_only=True)
class AuditSummaryRequest(_FilteredAuditRequest[AuditSummary]):
    """``audit query --summary principal``: the matching events summed up per
    principal, the most operations first, at most ``limit`` rows (totals over all)."""

    operation: ClassVar[Operation] = Operation.AUDIT_QUERY

    limit: int | None = None

    def validate(self) -> None:
        super().validate()
        if self.limit is not None:
            _check_int(self.limit, "limit", 1, MAX_EVENTS)

    async def send(self, target: TrailReader, ctx: OperationContext) -> AuditSummary:
        return await target.read(ctx, self._answer)

    def _answer(self, trail: OpenTrail, now: float) -> AuditSummary:
        if self.verify:
            trail.verified()
        rows = principal_summary(query(trail.sources,
                                       self.where.event_filter(self.tenant_id, now)))
        shown = rows if self.limit is None else rows[:self.limit]
        return AuditSummary(shown, sum(row.operations for row in rows),
                            sum(row.events for row in rows))


@attrs.frozen(slots=True, kw_only=True)
class AuditReportRequest(AuditRequest[SubjectAudit]):
    """``audit report``: what the trail records about the tenant's data subject
    ``user_id``; the chain is verified first unless ``verify`` is false. Its events
    name the subject, so the subject's next report lists this read among its reads."""

    operation: ClassVar[Operation] = Operation.AUDIT_REPORT

    tenant_id: str
    user_id: str
    verify: bool = True

    def validate(self) -> None:
        super().validate()
        check_identifier(self.user_id, "subject")
        _check_bool(self.verify, "verify")

    async def send(self, target: TrailReader, ctx: OperationContext) -> SubjectAudit:
        return await target.read(ctx, self._answer)

    def _answer(self, trail: OpenTrail, now: float) -> SubjectAudit:
        if self.verify:
            trail.verified()
        found = subject_report(trail.sources, self.tenant_id, self.user_id)
        return SubjectAudit(found, found.summary())


@attrs.frozen(slots=True, kw_only=True)
class AuditVerifyRequest(AuditRequest[TrailCheck]):
    """``audit verify``: every entry, link and file boundary of the whole trail (the
    chain is one for every tenant), its first break if any; with a Merkle checkpoint
    of a trail that verifies (``audit checkpoint``, unsigned)."""

    operation: ClassVar[Operation] = Operation.AUDIT_VERIFY

    tenant_id: str

    async def send(self, target: TrailReader, ctx: OperationContext) -> TrailCheck:
        return await target.read(ctx, self._answer)

    @staticmethod
    def _answer(trail: OpenTrail, now: float) -> TrailCheck:
        found = trail.verification(merkle=True)
        stored = trail.stored()
        checkpoint = None
        if (found.problem is None and found.first_seq == 0 and found.root is not None
                and found.chain_id is not None and found.head is not None):
            # As audit.verify.tree_checkpoint_of takes it, from this same walk.
            checkpoint = TreeCheckpoint(found.chain_id, found.last_seq, found.root,
                                        found.head, now).to_json()
        return TrailCheck(found, found.ok, found.status,
                          None if stored is None else stored.waiting(), checkpoint)


def _checkpoint(value: object, field: str) -> TreeCheckpoint:
    """A Merkle checkpoint from its canonical JSON text (what ``audit checkpoint`` and
    ``audit_verify`` give), refused as ``audit verify-proof`` refuses it."""
    if not isinstance(value, str):
        raise MemoryValidationError(f"{field} must be a checkpoint's JSON text", field=field)
    try:
        return TreeCheckpoint.from_json(value, source=field)
    except (ProofError, JsonDocumentError, ValueError) as exc:
        raise MemoryValidationError(f"{field}: {exc}", field=field) from None


@attrs.frozen(slots=True, kw_only=True)
class AuditInclusionRequest(AuditRequest[InclusionAnswer]):
    """``audit prove``: an inclusion proof of the tenant's event ``event_id`` against
    ``checkpoint`` (a Merkle checkpoint's canonical JSON). Another tenant's event is
    answered as one that is not there."""

    operation: ClassVar[Operation] = Operation.AUDIT_PROVE

    tenant_id: str
    event_id: str
    checkpoint: str

    def validate(self) -> None:
        super().validate()
        if not isinstance(self.event_id, str) or not _EVENT_ID.fullmatch(self.event_id):
            raise MemoryValidationError("event_id must be 1-255 printable ASCII characters",
                                        field="event_id")
        _checkpoint(self.checkpoint, "checkpoint")

    async def send(self, target: TrailReader, ctx: OperationContext) -> InclusionAnswer:
        return await target.read(ctx, self._answer)

    def _answer(self, trail: OpenTrail, now: float) -> InclusionAnswer:
        from governed_memory.audit.proofs import load_event
        from governed_memory.audit.proving import EventNotInTreeError, prove_inclusion

        checkpoint = _checkpoint(self.checkpoint, "checkpoint")
        missing = MemoryNotFoundError(
            f"event {self.event_id} is not among this tenant's events within the "
            f"checkpoint's {checkpoint.tree_size} entries (an event recorded after it "
            "needs a later checkpoint)")
        try:
            proof, body = prove_inclusion(trail.sources, self.event_id, checkpoint)
        except EventNotInTreeError:
            raise missing from None
        except TrailProblemError as exc:
            raise trail.refusal(exc.problem) from None
        except (ForeignTrailError, TreeSizeError) as exc:
            raise MemoryValidationError(f"checkpoint: {exc}", field="checkpoint") from None
        except ProofError as exc:
            raise trail.refusal(Problem("the trail", 0, None, str(exc))) from None
        event = load_event(body)
        if event.get("tenant_id") != self.tenant_id:
            raise missing
        return InclusionAnswer(proof.to_json(), event)


@attrs.frozen(slots=True, kw_only=True)
class AuditConsistencyRequest(AuditRequest[ConsistencyAnswer]):
    """``audit consistency``: a proof that checkpoint ``second``'s tree extends
    ``first``'s (both a Merkle checkpoint's canonical JSON, the older first)."""

    operation: ClassVar[Operation] = Operation.AUDIT_PROVE

    tenant_id: str
    first: str
    second: str

    def validate(self) -> None:
        super().validate()
        older, newer = _checkpoint(self.first, "first"), _checkpoint(self.second, "second")
        if older.chain_id != newer.chain_id:
            raise MemoryValidationError(f"the checkpoints are of two trails: "
                                        f"{older.chain_id} and {newer.chain_id}",
                                        field="second")
        if older.tree_size > newer.tree_size:
            raise MemoryValidationError(f"first covers {older.tree_size} entries, second "
                                        f"{newer.tree_size}: give the older checkpoint first",
                                        field="first")

    async def send(self, target: TrailReader, ctx: OperationContext) -> ConsistencyAnswer:
        return await target.read(ctx, self._answer)

    def _answer(self, trail: OpenTrail, now: float) -> ConsistencyAnswer:
        from governed_memory.audit.proving import prove_consistency

        older, newer = _checkpoint(self.first, "first"), _checkpoint(self.second, "second")
        try:
            proof = prove_consistency(trail.sources, older, newer)
        except TrailProblemError as exc:
            raise trail.refusal(exc.problem) from None
        except (ForeignTrailError, TreeSizeError) as exc:
            raise MemoryValidationError(str(exc), field="second") from None
        except ProofError as exc:
            raise trail.refusal(Problem("the trail", 0, None, str(exc))) from None
        return ConsistencyAnswer(proof.to_json())


AUDIT_REQUESTS = (AuditQueryRequest, AuditSummaryRequest, AuditReportRequest,
                  AuditVerifyRequest, AuditInclusionRequest, AuditConsistencyRequest)


# -- the facade ----------------------------------------------------------------------------


class GovernedAudit:
    """The audit reads of one manager's trail, each through an activity port that
    shares the manager's policies, event bus, clock, tracer, settings, metrics and rate
    windows: one trail, one profile and one policy revision cover the memories and
    the reads of their trail. ``principal`` is the auditor, built by the host from its
    own authentication (an API key or a token carrying ``audit:read``)."""

    def __init__(self, port: ActivityPort) -> None:
        self.port = port

    @classmethod
    def of(cls, activity: ActivityPort, trail: TrailReader | None = None) -> GovernedAudit:
        """Over ``activity`` (a manager's ``activity`` port): the trail its sinks write,
        unless ``trail`` names another."""
        reader = trail if trail is not None else TrailReader.of_sinks(activity.events.sinks)
        port = ActivityPort(_as_provider(reader), policies=activity.policies,
                            events=activity.events, clock=activity.clock,
                            tracer=activity.tracer, settings=activity.settings,
                            provider_revision=reader.revision,
                            rate_windows=activity.rate_windows)
        port.metrics = activity.metrics
        return cls(port)

    async def query(self, principal: Principal, tenant_id: str, *,
                    where: AuditFilter | None = None, limit: int = DEFAULT_EVENTS,
                    cursor: int | None = None, verify: bool = True) -> AuditEvents:
        return await self.port.execute(AuditQueryRequest(
            tenant_id=tenant_id, where=where or AuditFilter(), limit=limit, cursor=cursor,
            verify=verify), principal)

    async def summary(self, principal: Principal, tenant_id: str, *,
                      where: AuditFilter | None = None, limit: int | None = None,
                      verify: bool = True) -> AuditSummary:
        return await self.port.execute(AuditSummaryRequest(
            tenant_id=tenant_id, where=where or AuditFilter(), limit=limit, verify=verify),
            principal)

    async def report(self, principal: Principal, tenant_id: str, user_id: str, *,
                     verify: bool = True) -> SubjectAudit:
        return await self.port.execute(AuditReportRequest(
            tenant_id=tenant_id, user_id=user_id, verify=verify), principal)

    async def verify(self, principal: Principal, tenant_id: str) -> TrailCheck:
        return await self.port.execute(AuditVerifyRequest(tenant_id=tenant_id), principal)

    async def prove(self, principal: Principal, tenant_id: str, event_id: str,
                    checkpoint: str) -> InclusionAnswer:
        return await self.port.execute(AuditInclusionRequest(
            tenant_id=tenant_id, event_id=event_id, checkpoint=checkpoint), principal)

    async def consistency(self, principal: Principal, tenant_id: str, first: str,
                          second: str) -> ConsistencyAnswer:
        return await self.port.execute(AuditConsistencyRequest(
            tenant_id=tenant_id, first=first, second=second), principal)


def _as_provider(reader: TrailReader) -> MemoryProvider:
    """The reader as the port's target: the port asks a target only for its name,
    capabilities and optional features, which :class:`NoOptionalFeatures` answers."""
    return cast(MemoryProvider, reader)

