"""Tier stores presented to the activity port as providers.

The port calls ``getattr(provider, operation.value)(request, ctx)``; these adapters
give each tier store exactly those methods, so a turn append or a working-state update
is validated, decided, traced, verified and recorded by the same code as a memory
write, with nothing tier-specific in the port beyond checking the result's scope.
"""

from __future__ import annotations

from governed_memory.capabilities import Capabilities
from governed_memory.operation_context import OperationContext
from governed_memory.provider_kit import NoOptionalFeatures
from governed_memory.tiers.requests import (
    AppendTurnRequest,
    ClearTurnsRequest,
    ClearWorkingStateRequest,
    EraseUserTurnsRequest,
    ListTurnsRequest,
    ReadWorkingStateRequest,
    RecentTurnsRequest,
    RecordContextRequest,
    RecordExtractionRequest,
    UpdateWorkingStateRequest,
)
from governed_memory.tiers.results import Cleared, ContextRecord, WorkingState, WorkingStateRead
from governed_memory.tiers.turns import Turn, TurnPage, TurnStore
from governed_memory.tiers.working import WorkingStateStore


def _capabilities(durable: bool) -> Capabilities:
    # The port asks only for optional capabilities (usage, review); tiers offer none.
    return Capabilities(durable=durable, transactional=True, usage=False, review=False)


class TurnTier(NoOptionalFeatures):
    def __init__(self, store: TurnStore) -> None:
        self.store = store
        self.name = f"turns:{store.name}"
        self.revision = str(getattr(store, "revision", "1"))

    def capabilities(self) -> Capabilities:
        return _capabilities(bool(getattr(self.store, "durable", False)))

    async def append_turn(self, request: AppendTurnRequest, ctx: OperationContext) -> Turn:
        return await self.store.append(request.scope, request.turn, ctx.now)

    async def recent_turns(self, request: RecentTurnsRequest,
                           ctx: OperationContext) -> TurnPage:
        turns = await self.store.recent(request.scope, request.limit)
        return TurnPage(request.scope.scope_hash, tuple(turns)[-request.limit:])

    async def list_turns(self, request: ListTurnsRequest, ctx: OperationContext) -> TurnPage:
        turns = await self.store.after(request.scope, request.after_seq, request.limit)
        return TurnPage(request.scope.scope_hash, tuple(turns)[:request.limit])

    async def clear_turns(self, request: ClearTurnsRequest, ctx: OperationContext) -> Cleared:
        return Cleared(request.scope.scope_hash, await self.store.clear(request.scope))

    async def erase_user_turns(self, request: EraseUserTurnsRequest,
                               ctx: OperationContext) -> Cleared:
        (scope,) = request.target_scopes()
        removed = await self.store.delete_user(request.tenant_id, request.user_id)
        return Cleared(scope.scope_hash, removed)


class WorkingTier(NoOptionalFeatures):
    def __init__(self, store: WorkingStateStore) -> None:
        self.store = store
        self.name = f"working:{store.name}"
        self.revision = str(getattr(store, "revision", "1"))

    def capabilities(self) -> Capabilities:
        return _capabilities(bool(getattr(self.store, "durable", False)))

    async def read_working_state(self, request: ReadWorkingStateRequest,
                                 ctx: OperationContext) -> WorkingStateRead:
        state = await self.store.read(request.scope, ctx.now)
        return WorkingStateRead(request.scope.scope_hash, state)

    async def update_working_state(self, request: UpdateWorkingStateRequest,
                                   ctx: OperationContext) -> WorkingState:
        return await self.store.update(request.scope, request.changes, ttl_s=request.ttl_s,
                                       replace=request.replace, now=ctx.now)

    async def clear_working_state(self, request: ClearWorkingStateRequest,
                                  ctx: OperationContext) -> Cleared:
        removed = await self.store.clear(request.scope)
        return Cleared(request.scope.scope_hash, 1 if removed else 0)


class ContextLedger(NoOptionalFeatures):
    """The "provider" of ``record_context``: it stores nothing. The record exists for
    its decision and its event, which say which memory versions a prompt received."""

    name = "context"
    revision = "1"

    def capabilities(self) -> Capabilities:
        return _capabilities(False)

    async def record_context(self, request: RecordContextRequest,
                             ctx: OperationContext) -> ContextRecord:
        return ContextRecord(request.injected, request.degraded, request.window_turn_ids)

    async def record_extraction(self, request: RecordExtractionRequest,
                                ctx: OperationContext) -> ContextRecord:
        return ContextRecord(request.injected, request.degraded, request.window_turn_ids)
