"""Typed requests for the tier operations, shaped like the long-term ones.

Each names one exact scope (a session for turns, a run for working state), validates
itself before the requested event, and is what policies see: the secret guard reads a
turn's text exactly as it reads a memory's content.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import attrs

from governed_memory.errors import MemoryValidationError
from governed_memory.limits import MAX_INT64, check_identifier, check_int, check_text, is_real
from governed_memory.operations import Operation
from governed_memory.records import _frozen_mapping
from governed_memory.request import Request, user_subjects
from governed_memory.scope import Scope
from governed_memory.tiers.results import (
    Cleared,
    ContextRecord,
    InjectedVersion,
    RememberedDecision,
    RememberRecord,
    WorkingState,
    WorkingStateRead,
)
from governed_memory.tiers.turns import Turn, TurnDraft, TurnPage
from governed_memory.tiers.working import MAX_WORKING_TTL_S, check_state, check_ttl

if TYPE_CHECKING:
    from governed_memory.operation_context import OperationContext
    from governed_memory.tiers.adapters import ContextLedger, TurnTier, WorkingTier

ResultT = TypeVar("ResultT")

MAX_RECENT_TURNS = 500
MAX_TURN_PAGE = 100


def _need(scope: object, dimension: str, what: str) -> None:
    if not isinstance(scope, Scope):
        raise MemoryValidationError("scope must be a Scope", field="scope")
    if getattr(scope, dimension) is None:
        raise MemoryValidationError(f"{what} needs a scope with {dimension}",
                                    field=f"scope.{dimension}")


def _limit(value: object, maximum: int, field: str = "limit") -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise MemoryValidationError(f"{field} must be an integer between 1 and {maximum}",
                                    field=field)


class _TierRequest(Request[ResultT]):
    """A tier operation: it validates itself whole (each names the one dimension its
    tier needs) and its result checks itself (:mod:`governed_memory.tiers.results`)."""

    __slots__ = ()


@attrs.frozen(slots=True, kw_only=True)
class AppendTurnRequest(_TierRequest[Turn]):
    operation: ClassVar[Operation] = Operation.APPEND_TURN

    scope: Scope
    turn: TurnDraft

    def validate(self) -> None:
        _need(self.scope, "session_id", "a turn")
        if not isinstance(self.turn, TurnDraft):
            raise MemoryValidationError("turn must be a TurnDraft", field="turn")
        self.turn.validate()

    async def send(self, target: TurnTier, ctx: OperationContext) -> Turn:
        return await target.store.append(self.scope, self.turn, ctx.now)


@attrs.frozen(slots=True, kw_only=True)
class RecentTurnsRequest(_TierRequest[TurnPage]):
    operation: ClassVar[Operation] = Operation.RECENT_TURNS

    scope: Scope
    limit: int = 20

    def validate(self) -> None:
        _need(self.scope, "session_id", "reading turns")
        _limit(self.limit, MAX_RECENT_TURNS)

    async def send(self, target: TurnTier, ctx: OperationContext) -> TurnPage:
        turns = await target.store.recent(self.scope, self.limit)
        return TurnPage(self.scope.scope_hash, tuple(turns)[-self.limit:])


@attrs.frozen(slots=True, kw_only=True)
class ListTurnsRequest(_TierRequest[TurnPage]):
    """A page of turns after a sequence number, oldest first (summary catch-up)."""

    operation: ClassVar[Operation] = Operation.LIST_TURNS

    scope: Scope
    after_seq: int = 0
    limit: int = 50

    def validate(self) -> None:
        _need(self.scope, "session_id", "reading turns")
        # A turn's sequence number is a 64-bit integer in every store: a larger one is
        # refused here, never handed to a datastore that would overflow on it.
        check_int(self.after_seq, "after_seq", minimum=0, maximum=MAX_INT64)
        _limit(self.limit, MAX_TURN_PAGE)

    async def send(self, target: TurnTier, ctx: OperationContext) -> TurnPage:
        turns = await target.store.after(self.scope, self.after_seq, self.limit)
        return TurnPage(self.scope.scope_hash, tuple(turns)[:self.limit])


@attrs.frozen(slots=True, kw_only=True)
class ClearTurnsRequest(_TierRequest[Cleared]):
    operation: ClassVar[Operation] = Operation.CLEAR_TURNS

    scope: Scope

    def validate(self) -> None:
        _need(self.scope, "session_id", "clearing turns")

    async def send(self, target: TurnTier, ctx: OperationContext) -> Cleared:
        return Cleared(self.scope.scope_hash, await target.store.clear(self.scope))


@attrs.frozen(slots=True, kw_only=True)
class ReadWorkingStateRequest(_TierRequest[WorkingStateRead]):
    operation: ClassVar[Operation] = Operation.READ_WORKING_STATE

    scope: Scope

    def validate(self) -> None:
        _need(self.scope, "run_id", "working state")

    async def send(self, target: WorkingTier, ctx: OperationContext) -> WorkingStateRead:
        state = await target.store.read(self.scope, ctx.now)
        return WorkingStateRead(self.scope.scope_hash, state)


@attrs.frozen(slots=True, kw_only=True)
class UpdateWorkingStateRequest(_TierRequest[WorkingState]):
    operation: ClassVar[Operation] = Operation.UPDATE_WORKING_STATE

    scope: Scope
    changes: Mapping[str, Any] = attrs.field(converter=_frozen_mapping)
    ttl_s: float
    replace: bool = False

    def validate(self) -> None:
        _need(self.scope, "run_id", "working state")
        check_state(self.changes, "state")
        if not is_real(self.ttl_s):  # before check_ttl, whose float conversion overflows
            raise MemoryValidationError(
                f"ttl_seconds must be a number of seconds in (0, {MAX_WORKING_TTL_S:g}]",
                field="ttl_seconds")
        check_ttl(self.ttl_s)
        if not isinstance(self.replace, bool):
            raise MemoryValidationError("replace must be true or false", field="replace")

    async def send(self, target: WorkingTier, ctx: OperationContext) -> WorkingState:
        return await target.store.update(self.scope, self.changes, ttl_s=self.ttl_s,
                                         replace=self.replace, now=ctx.now)


@attrs.frozen(slots=True, kw_only=True)
class ClearWorkingStateRequest(_TierRequest[Cleared]):
    operation: ClassVar[Operation] = Operation.CLEAR_WORKING_STATE

    scope: Scope

    def validate(self) -> None:
        _need(self.scope, "run_id", "working state")

    async def send(self, target: WorkingTier, ctx: OperationContext) -> Cleared:
        removed = await target.store.clear(self.scope)
        return Cleared(self.scope.scope_hash, 1 if removed else 0)


@attrs.frozen(slots=True, kw_only=True)
class RecordContextRequest(_TierRequest[ContextRecord]):
    """Records which memory versions one per-turn context injected, and what it had to
    do without. ``scopes`` are the session's and every injected memory's scope, so the
    decision covers each of them."""

    operation: ClassVar[Operation] = Operation.RECORD_CONTEXT

    scopes: tuple[Scope, ...]
    injected: tuple[InjectedVersion, ...] = ()
    degraded: tuple[str, ...] = ()
    window_turn_ids: tuple[str, ...] = ()

    def target_scopes(self) -> tuple[Scope, ...]:
        return self.scopes

    def validate(self) -> None:
        if not self.scopes or not all(isinstance(s, Scope) for s in self.scopes):
            raise MemoryValidationError("scopes must be a non-empty tuple of Scope",
                                        field="scopes")
        if len({s.tenant_id for s in self.scopes}) != 1:
            raise MemoryValidationError("one context never spans tenants", field="scopes")
        hashes = {s.scope_hash for s in self.scopes}
        for i, version in enumerate(self.injected):
            if version.scope_hash not in hashes:
                raise MemoryValidationError("an injected memory's scope is not listed",
                                            field=f"injected[{i}]")
            check_identifier(version.record_id, f"injected[{i}].record_id")
            check_int(version.version, f"injected[{i}].version", minimum=1)
        for i, item in enumerate(self.degraded):
            check_identifier(item, f"degraded[{i}]")

    async def send(self, target: ContextLedger, ctx: OperationContext) -> ContextRecord:
        return ContextRecord(self.injected, self.degraded, self.window_turn_ids)


@attrs.frozen(slots=True, kw_only=True)
class RecordExtractionRequest(RecordContextRequest):
    """Records what one extraction stored (``injected`` holds the new versions) and
    what it had to do without; ``scopes`` are the session's and every stored fact's."""

    operation: ClassVar[Operation] = Operation.RECORD_EXTRACTION

    async def send(self, target: ContextLedger, ctx: OperationContext) -> ContextRecord:
        return ContextRecord(self.injected, self.degraded, self.window_turn_ids)


@attrs.frozen(slots=True, kw_only=True)
class RecordRememberRequest(_TierRequest[RememberRecord]):
    """Records what one ``remember`` call decided for each fact, so an auditor sees
    every decision, those that wrote nothing (unchanged) included, in one event."""

    operation: ClassVar[Operation] = Operation.RECORD_REMEMBER

    scope: Scope
    decisions: tuple[RememberedDecision, ...] = ()

    def validate(self) -> None:
        if not isinstance(self.scope, Scope):
            raise MemoryValidationError("scope must be a Scope", field="scope")
        for i, item in enumerate(self.decisions):
            check_identifier(item.decision, f"decisions[{i}].decision")
            check_text(item.reason, f"decisions[{i}].reason", max_bytes=512)
            if item.record_id is not None:
                check_identifier(item.record_id, f"decisions[{i}].record_id")
            if item.version is not None:
                check_int(item.version, f"decisions[{i}].version", minimum=1)

    async def send(self, target: ContextLedger, ctx: OperationContext) -> RememberRecord:
        return RememberRecord(self.scope.scope_hash, self.decisions)


@attrs.frozen(slots=True, kw_only=True)
class TierUserErasure(_TierRequest[ResultT]):
    """Erase what one tier keeps of one user in one tenant (a data-subject erasure). It
    names the user's tenant-level scope, so the fixed scope rule decides it:
    ``memory:admin``, and a principal bound to a user may erase only that user."""

    tenant_id: str
    user_id: str

    def target_scopes(self) -> tuple[Scope, ...]:
        try:
            return (Scope(self.tenant_id, user_id=self.user_id),)
        except MemoryValidationError:
            return ()

    def subjects(self) -> tuple[str, ...]:
        # The user it names, even when its ids are too malformed for a scope: the
        # event of a rejected erasure still says whom it concerned.
        return user_subjects(self.tenant_id, self.user_id)

    def validate(self) -> None:
        check_identifier(self.tenant_id, "tenant_id")
        check_identifier(self.user_id, "user_id")

    def subject_scope_hash(self) -> str:
        (scope,) = self.target_scopes()
        return scope.scope_hash


@attrs.frozen(slots=True, kw_only=True)
class EraseUserTurnsRequest(TierUserErasure[Cleared]):
    """Every conversation turn of one user in one tenant."""

    operation: ClassVar[Operation] = Operation.ERASE_USER_TURNS

    async def send(self, target: TurnTier, ctx: OperationContext) -> Cleared:
        removed = await target.store.delete_user(self.tenant_id, self.user_id)
        return Cleared(self.subject_scope_hash(), removed)


TierRequest = (
    AppendTurnRequest | RecentTurnsRequest | ListTurnsRequest | ClearTurnsRequest
    | ReadWorkingStateRequest | UpdateWorkingStateRequest | ClearWorkingStateRequest
    | RecordContextRequest | RecordExtractionRequest | RecordRememberRequest
    | EraseUserTurnsRequest
)
