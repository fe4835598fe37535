"""Replaying a stored retrieval snapshot: what a past search returned, exactly.

A provider that stores snapshots (the native one) gives each ``SearchResult`` a
``snapshot_id``. ``GovernedMemoryManager.replay`` looks up which scopes the snapshot
covers, then runs a ``replay`` operation through the activity port like any read: the
scope rule and the policies decide whether this principal may read those scopes, the
provider returns the record versions the search returned (even if they were updated or
soft-deleted since), and the port drops anything of another scope.

Erasure wins: versions erased since (a hard delete, an expiry purge, ``delete_all``)
come back as ``erased_record_ids`` instead of records, and a snapshot whose user was
erased with ``delete_user`` raises :class:`SnapshotErasedError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import TYPE_CHECKING, Any, ClassVar, Final, Protocol, TypeVar

import attrs

from governed_memory.capabilities import offered
from governed_memory.errors import (
    MemoryNotFoundError,
    MemoryValidationError,
)
from governed_memory.limits import check_identifier
from governed_memory.operation_context import OperationContext, ProfileRef
from governed_memory.operations import Operation
from governed_memory.principal import Principal
from governed_memory.records import SearchHit, SearchResult
from governed_memory.request import Audited, Checked, Request, summarised
from governed_memory.scope import Scope

if TYPE_CHECKING:
    from governed_memory.requests import SearchRequest

T = TypeVar("T")

MAX_SNAPSHOT_ID: Final = 64


class SnapshotErasedError(MemoryNotFoundError):
    """The snapshot named a user who has since been erased: nothing of it is replayable."""


class SnapshotLostError(MemoryNotFoundError):
    """The search was answered, but its snapshot never reached storage (it was waiting
    to be written in a batch when the process stopped): the search cannot be replayed.
    Profiles that cannot accept this store snapshots with ``[retrieval] snapshots =
    "sync"``."""

    code = "snapshot_lost"


def _check_snapshot_id(snapshot_id: object) -> None:
    if (not isinstance(snapshot_id, str) or not snapshot_id
            or len(snapshot_id) > MAX_SNAPSHOT_ID or not snapshot_id.isascii()):
        raise MemoryValidationError("snapshot_id must be a snapshot id string",
                                    field="snapshot_id")


@attrs.frozen(slots=True, kw_only=True)
class ReplayRequest(Request["ReplayResult"]):
    """Replay one snapshot; ``scopes`` are the snapshot's, so governance sees them."""

    operation: ClassVar[Operation] = Operation.REPLAY

    snapshot_id: str
    scopes: tuple[Scope, ...]

    def target_scopes(self) -> tuple[Scope, ...]:
        return self.scopes

    def validate(self) -> None:
        _check_snapshot_id(self.snapshot_id)
        if (not isinstance(self.scopes, tuple) or not self.scopes
                or not all(isinstance(scope, Scope) for scope in self.scopes)):
            raise MemoryValidationError("scopes must be a non-empty tuple of Scope",
                                        field="scopes")

    async def send(self, target: HasReplay, ctx: OperationContext) -> ReplayResult:
        return await snapshots_of(target).replay_snapshot(self, ctx)


@attrs.frozen(slots=True, kw_only=True)
class SnapshotHeaderRequest(Request["SnapshotHeader"]):
    """Find which scopes a snapshot of the principal's tenant covers: a governed read of
    its own, so even the lookup before a replay is decided, traced and evented."""

    operation: ClassVar[Operation] = Operation.SNAPSHOT_HEADER

    snapshot_id: str
    tenant_id: str

    def target_scopes(self) -> tuple[Scope, ...]:
        return ()

    def validate(self) -> None:
        _check_snapshot_id(self.snapshot_id)
        check_identifier(self.tenant_id, "tenant_id")

    async def send(self, target: HasReplay, ctx: OperationContext) -> SnapshotHeader:
        return await snapshots_of(target).snapshot_header(self.snapshot_id, self.tenant_id)


@attrs.frozen(slots=True)
class SnapshotHeader(Audited):
    """Who may replay a snapshot: its tenant and the exact scopes it searched."""

    snapshot_id: str
    tenant_id: str
    scopes: tuple[Scope, ...]
    erased: bool = False

    def audit(self, allowed: Set[str]) -> Checked[SnapshotHeader]:
        return summarised(self, count=len(self.scopes),
                         reasons=(f"snapshot {self.snapshot_id}",
                                  *(("erased",) if self.erased else ())))


def _frozen(value: Mapping[str, Any]) -> Mapping[str, Any]:
    from governed_memory.records import _frozen_mapping

    return _frozen_mapping(value)


@attrs.frozen(slots=True)
class ReplayResult(Audited):
    """The hits of a past search, each record at the version it was returned at."""

    snapshot_id: str
    created_at: float
    hits: tuple[SearchHit, ...]
    erased_record_ids: tuple[str, ...] = ()
    """Records returned by the search whose version has been erased since."""
    candidates: int = 0
    profile: ProfileRef = attrs.field(factory=ProfileRef)
    policy_revision: str | None = None
    decision_id: str | None = None
    ranking: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen)
    """The ranking configuration (modes, weights, half-life, fusion constant) and its
    revision, and the embedder identity when vectors took part."""

    @property
    def complete(self) -> bool:
        """Every hit of the original search is still there."""
        return not self.erased_record_ids

    @property
    def records(self) -> tuple[Any, ...]:
        return tuple(hit.record for hit in self.hits)

    def audit(self, allowed: Set[str]) -> Checked[ReplayResult]:
        stray = tuple(hit.record.id for hit in self.hits
                      if hit.record.scope_hash not in allowed
                      or hit.record.scope.scope_hash != hit.record.scope_hash)
        hits = tuple(hit for hit in self.hits if hit.record.id not in stray)
        kept = attrs.evolve(self, hits=hits)
        return summarised(kept, record_ids=tuple(hit.record.id for hit in hits),
                         versions=tuple(hit.record.version for hit in hits),
                         count=len(hits), stray=stray)


class SnapshotReplay(Protocol):
    """What a provider that stores a retrieval snapshot per search offers (its
    ``replay`` accessor): the snapshot's scopes, the replay itself, a snapshot for an
    answer it did not compute (a search-cache hit) and the retention round."""

    async def snapshot_header(self, snapshot_id: str, tenant_id: str) -> SnapshotHeader:
        """The snapshot's scopes; ``MemoryNotFoundError`` if there is none in the tenant."""
        ...

    async def replay_snapshot(self, request: ReplayRequest,
                              ctx: OperationContext) -> ReplayResult: ...

    async def record_snapshot(self, request: SearchRequest, ctx: OperationContext,
                              result: SearchResult) -> str | None:
        """Store a snapshot saying that operation ``ctx`` answered ``request`` with
        ``result``, exactly as a search of its own would have (the operation id,
        principal, decision, profile and policy revisions and time of ``ctx``; the
        hits, versions, scores, explanations and candidate count of ``result``), and
        return its id; ``result.snapshot_id`` names the snapshot of the search that
        computed the answer, which the new one may record as its source (see
        :mod:`governed_memory.cache`: a cache hit gets a snapshot of its own).

        Returns ``None`` when the provider stores no snapshots (``[retrieval] snapshots
        = "off"``). Raises ``MemoryUnavailableError`` when storage cannot take it now;
        the hit is then answered without a snapshot, as the provider's own search does
        in that case."""
        ...

    async def purge_snapshots(self, *, limit: int) -> int:
        """Remove up to ``limit`` snapshots older than the provider's retention."""
        ...


def snapshots_of(target: HasReplay) -> SnapshotReplay:
    """The target's snapshot store, or ``MemoryCapabilityUnsupportedError``."""
    return offered(target.replay, target, "stores no retrieval snapshots (no replay)")


class HasReplay(Protocol):
    @property
    def replay(self) -> SnapshotReplay | None: ...


class Port(Protocol):
    """What a replay is run through: the activity port (``pipeline.ActivityPort``),
    named by what it does, so this module does not import the pipeline."""

    async def execute(self, request: Request[T], principal: Principal) -> T: ...


async def replay_through(port: Port, principal: Principal,
                         snapshot_id: str) -> ReplayResult:
    """Look up the snapshot's scopes, then replay it as a governed read."""
    if not isinstance(principal, Principal):
        raise MemoryValidationError("principal must be a Principal from authenticated "
                                    "context", field="principal")
    header = await port.execute(
        SnapshotHeaderRequest(snapshot_id=snapshot_id, tenant_id=principal.tenant_id), principal)
    if header.tenant_id != principal.tenant_id:
        raise MemoryNotFoundError("no snapshot with that id in this tenant")
    if header.erased:
        raise SnapshotErasedError("the snapshot named a user who has been erased; "
                                  "nothing of it can be replayed")
    # The port validates the request, authorizes the snapshot's scopes, records the
    # events, calls ``provider.replay`` and drops any hit of another scope.
    return await port.execute(ReplayRequest(snapshot_id=snapshot_id, scopes=header.scopes),
                                          principal)
