"""The trail an auditor's requests read, and the answers they give.

:class:`TrailReader` is the target the audit requests (``governed_memory.audit_requests``)
are sent to: the ``postgres-trail`` store when one of the manager's sinks is one (the
deployment's whole trail), else the hash-chained files of ``[audit] path``, opened,
verified and locked the way the ``audit`` command line opens them. The answers are the
audit tools' own, each a result that checks itself against the auditor's tenant.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Iterator, Set
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from governed_memory.audit.query import TrailEntry
from governed_memory.audit.report import SubjectReport
from governed_memory.audit.stored import StoredTrail, TrailStore
from governed_memory.audit.summary import PrincipalActivity
from governed_memory.audit.verify import (
    BROKEN,
    NO_TRAIL,
    Problem,
    Source,
    Verification,
    verify_trail,
)
from governed_memory.capabilities import Capabilities
from governed_memory.errors import (
    MemoryCapabilityUnsupportedError,
    MemoryConflictError,
    MemoryScopeError,
)
from governed_memory.provider_kit import NoOptionalFeatures
from governed_memory.request import Audited, Checked, summarised

if TYPE_CHECKING:
    from governed_memory.audit.trail_lock import TrailLock
    from governed_memory.operation_context import OperationContext

R = TypeVar("R")


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
