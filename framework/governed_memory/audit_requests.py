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

import asyncio
import contextlib
import re
from collections.abc import Callable, Iterable, Iterator, Set
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Final, TypeVar, cast

import attrs

from governed_memory.audit.proofs import (
    ForeignTrailError,
    ProofError,
    TreeCheckpoint,
    TreeSizeError,
)
from governed_memory.audit.query import EventFilter, TrailEntry, query
from governed_memory.audit.report import SubjectReport, subject_report
from governed_memory.audit.stored import StoredTrail, TrailStore
from governed_memory.audit.strict_json import JsonDocumentError
from governed_memory.audit.summary import PrincipalActivity, principal_summary
from governed_memory.audit.times import parse_time
from governed_memory.audit.verify import (
    BROKEN,
    NO_TRAIL,
    Problem,
    Source,
    TrailProblemError,
    Verification,
    verify_trail,
)
from governed_memory.capabilities import Capabilities
from governed_memory.errors import (
    MemoryCapabilityUnsupportedError,
    MemoryConflictError,
    MemoryNotFoundError,
    MemoryScopeError,
    MemoryValidationError,
)
from governed_memory.events import subject_hash
from governed_memory.limits import MAX_INT64, check_identifier, check_text
from governed_memory.operations import Operation
from governed_memory.pipeline import ActivityPort
from governed_memory.principal import Principal
from governed_memory.provider import MemoryProvider
from governed_memory.provider_kit import NoOptionalFeatures
from governed_memory.request import Audited, Checked, Request, summarised, user_subjects
from governed_memory.scope import Scope

if TYPE_CHECKING:
    from governed_memory.audit.trail_lock import TrailLock
    from governed_memory.operation_context import OperationContext

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


class AuditTrailError(MemoryConflictError):
    """The trail does not verify (``kind`` ``broken``: damage or tampering; the
    message starts ``BROKEN`` as the command line's does), or there is no trail yet
    (``no_trail``), so nothing is answered from it."""

    code = "audit_trail"

    def __init__(self, problem: Problem) -> None:
        prefix = "BROKEN " if problem.kind == BROKEN else ""
        super().__init__(f"{prefix}{problem}")
        self.kind = problem.kind


# -- the target ----------------------------------------------------------------------------


class OpenTrail:
    """A trail opened for one read: its sources, and verification that tells an append
    in flight from damage."""

    def __init__(self, sources: tuple[Source, ...], reader: TrailReader) -> None:
        self.sources = sources
        self._reader = reader

    def verification(self, *, merkle: bool = False) -> Verification:
        """:func:`verify_trail`, shown with file names rather than the server's paths.

        A file trail is read while writers append to it: a problem in its last file
        may be an entry being written at that instant, so such a trail is verified
        again with the writers' lock held (no append is then in flight: what is wrong
        is wrong). A store is read in one snapshot and needs no second look."""
        found = verify_trail(self.sources, merkle=merkle)
        lock = self._reader.lock()
        if (found.problem is not None and lock is not None and found.files
                and found.problem.path == found.files[-1]):
            with lock:
                found = verify_trail(self.sources, merkle=merkle)
        return self._reader.shown(found)

    def verified(self) -> None:
        """Raise :class:`AuditTrailError` unless the trail verifies."""
        found = self.verification()
        if found.problem is not None:
            raise AuditTrailError(found.problem)

    def refusal(self, problem: Problem) -> AuditTrailError:
        """The error for what proving ran into, naming files as the trail does."""
        return AuditTrailError(self._reader.shown_problem(problem))

    def stored(self) -> StoredTrail | None:
        only = self.sources[0] if len(self.sources) == 1 else None
        return only if isinstance(only, StoredTrail) else None


class TrailReader(NoOptionalFeatures):
    """The target of the audit requests: the trail one manager's sinks write, as the
    audit tools read it. A store (``TrailStore``: the ``postgres-trail`` sink) is opened
    for each read and closed after it; files are read from the trail's directory. With
    neither, every audit request is refused as unsupported (``501`` over REST): this
    deployment keeps no trail an auditor could verify."""

    name = "audit-trail"
    revision = "1"

    def __init__(self, *, directory: str | Path | None = None,
                 store: TrailStore | None = None, lock_timeout_s: float = 10.0) -> None:
        if directory is not None and store is not None:
            raise ValueError("a trail reader reads files or a store, not both")
        self.directory = None if directory is None else Path(directory)
        self.store = store
        self.lock_timeout_s = lock_timeout_s

    @classmethod
    def of_sinks(cls, sinks: Iterable[object]) -> TrailReader:
        """The trail among ``sinks`` (an event bus's): a trail store if one is there (on
        several nodes it holds every node's events), else the hash-chained files of the
        built-in ``audit`` sink, else none."""
        from governed_memory.audit.sink import AuditSink

        listed = tuple(sinks)
        for sink in listed:
            if isinstance(sink, TrailStore):
                return cls(store=sink)
        for sink in listed:
            if isinstance(sink, AuditSink):
                return cls(directory=sink.directory, lock_timeout_s=sink.lock_timeout_s)
        return cls()

    @property
    def configured(self) -> bool:
        return self.directory is not None or self.store is not None

    def capabilities(self) -> Capabilities:
        return Capabilities(durable=True, transactional=False, usage=False, review=False)

    async def read(self, ctx: OperationContext, answer: Callable[[OpenTrail, float], R]) -> R:
        """``answer(trail, now)`` on a worker thread, over the trail opened for it, for
        an auditor bound to no user (``now``: the operation's clock, for times ago)."""
        if ctx.principal.user_id is not None:
            # The scope rule refuses this first; kept, since a trail is never a user's.
            raise MemoryScopeError("scope authorization denied: the audit trail is read by "
                                   "an auditor bound to no user")
        if not self.configured:
            raise MemoryCapabilityUnsupportedError(
                "this deployment keeps no hash-chained trail to read (the profile's "
                "[audit] names no path and no trail store)")
        return await asyncio.to_thread(self._read, answer, ctx.now)

    def _read(self, answer: Callable[[OpenTrail, float], R], now: float) -> R:
        with self._opened() as sources:
            return answer(OpenTrail(sources, self), now)

    @contextlib.contextmanager
    def _opened(self) -> Iterator[tuple[Source, ...]]:
        if self.store is not None:
            trail = self.store.stored_trail()
            try:
                yield (trail,)
            finally:
                trail.close()
            return
        assert self.directory is not None
        if not self.directory.is_dir():
            raise AuditTrailError(Problem(self.directory.name, 0, None,
                                          "no trail here: nothing was recorded yet",
                                          NO_TRAIL))
        yield (self.directory,)

    def lock(self) -> contextlib.AbstractContextManager[None] | None:
        """The writers' lock of a file trail (``None`` for a store)."""
        if self.directory is None:
            return None
        from governed_memory.audit.trail_lock import TrailLock

        return _held(TrailLock(self.directory, self.lock_timeout_s))

    def shown(self, verification: Verification) -> Verification:
        """The verification with the trail's file names instead of the server's paths."""
        problem = verification.problem
        return attrs.evolve(
            verification, files=tuple(self._name(f) for f in verification.files),
            problem=None if problem is None else self.shown_problem(problem))

    def shown_problem(self, problem: Problem) -> Problem:
        return attrs.evolve(problem, path=self._name(problem.path))

    def _name(self, path: str) -> str:
        if self.directory is None:
            return path  # a store's location, which never holds a password
        return Path(path).name


@contextlib.contextmanager
def _held(lock: TrailLock) -> Iterator[None]:
    """Hold the lock of a trail's writers, on a descriptor of its own."""
    lock.open()
    try:
        with lock.held():
            yield
    finally:
        lock.close()


# -- results -------------------------------------------------------------------------------


@attrs.frozen(slots=True)
class AuditEvents(Audited):
    """Events of one tenant matching a query, in chain order, each as the chain hashed
    it (``seq`` and ``event``: ids, hashes, counts and outcomes, never content); with
    ``next_cursor`` when more match after them."""

    events: tuple[TrailEntry, ...]
    next_cursor: int | None = None

    def audit(self, allowed: Set[str]) -> Checked[AuditEvents]:
        return summarised(self, count=len(self.events))


@attrs.frozen(slots=True)
class AuditSummary(Audited):
    """``audit query --summary principal``: one row per principal among the matching
    events, and the totals over every row."""

    principals: tuple[PrincipalActivity, ...]
    operations: int
    events: int

    def audit(self, allowed: Set[str]) -> Checked[AuditSummary]:
        return summarised(self, count=self.events)


@attrs.frozen(slots=True)
class SubjectAudit(Audited):
    """``audit report``: what the trail records about one data subject, and the count
    per category (``written``, ``read``, ``deleted``, ``erased``, ``denied``,
    ``failed``)."""

    report: SubjectReport
    summary: dict[str, int]

    def audit(self, allowed: Set[str]) -> Checked[SubjectAudit]:
        return summarised(self, count=len(self.report.activities))


@attrs.frozen(slots=True)
class TrailCheck(Audited):
    """``audit verify``: the verification (files by name), whether it is ``ok`` and its
    ``status`` (``ok`` or the problem's kind), events still ``waiting`` for a position
    in a store; and, for a trail that verifies from its genesis, ``checkpoint``: an
    unsigned Merkle checkpoint of it (canonical JSON), to prove against later."""

    verification: Verification
    ok: bool
    status: str
    waiting: int | None = None
    checkpoint: str | None = None

    def audit(self, allowed: Set[str]) -> Checked[TrailCheck]:
        return summarised(self, count=self.verification.entries,
                          reasons=(f"status {self.status}",))


@attrs.frozen(slots=True)
class InclusionAnswer(Audited):
    """``audit prove``: the inclusion proof (canonical JSON) and the event it proves,
    as the chain hashed it: ``governed_memory.audit.proofs.verify_inclusion(event,
    InclusionProof.from_json(proof), checkpoint)`` checks them with nothing else."""

    proof: str
    event: dict[str, Any]

    def audit(self, allowed: Set[str]) -> Checked[InclusionAnswer]:
        return summarised(self, count=1)


@attrs.frozen(slots=True)
class ConsistencyAnswer(Audited):
    """``audit consistency``: the proof (canonical JSON) that the later checkpoint's
    tree extends the earlier one's."""

    proof: str

    def audit(self, allowed: Set[str]) -> Checked[ConsistencyAnswer]:
        return summarised(self, count=1)


# -- requests ------------------------------------------------------------------------------


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

