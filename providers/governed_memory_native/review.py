"""The review queue (``governed_memory.requests.ReviewingProvider``): records a policy
held as ``pending_review`` become active by an approval or are erased by a rejection.

It lives in the provider core, over any backend: a held record is an ordinary record
with a status, so review needs nothing of storage that the plain writes do not.
"""

from __future__ import annotations

import attrs
from governed_memory.ids import new_revision
from governed_memory.operation_context import OperationContext
from governed_memory.records import (
    DeleteResult,
    MemoryRecord,
    Page,
    RecordStatus,
    VersionOperation,
)
from governed_memory.requests import ApproveRequest, ListPendingRequest, RejectRequest

from governed_memory_native.storage.port import WriteTransaction
from governed_memory_native.units import Units, commit_version, pending_record


class NativeReview:
    """Approve, reject and list what is held, as units of work of the provider."""

    def __init__(self, units: Units) -> None:
        self._units = units

    async def list_pending(self, request: ListPendingRequest,
                           ctx: OperationContext) -> Page[MemoryRecord]:
        """The review queue of one scope: records held as ``pending_review``."""
        self._units.require_open()
        scope_hash = request.scope.scope_hash
        return await self._units.id_page(
            "pending", scope_hash, request.cursor, request.limit,
            lambda tx, after: tx.records.pending(scope_hash, after, request.limit, ctx.now))

    async def approve(self, request: ApproveRequest, ctx: OperationContext) -> MemoryRecord:
        """A pending record becomes active as a new version (history says ``approve``)."""
        units = self._units
        units.require_open()
        scope_hash = request.scope.scope_hash

        async def unit(tx: WriteTransaction) -> MemoryRecord:
            replay = await units.replayed_record(tx, scope_hash, request, ctx)
            if replay is not None:
                return replay
            current = await pending_record(tx, scope_hash, request, ctx)
            approved = units.owned(attrs.evolve(
                current, status=RecordStatus.ACTIVE, version=current.version + 1,
                revision=new_revision(), updated_at=ctx.now,
            ))
            await commit_version(tx, current, approved, VersionOperation.APPROVE, ctx)
            await units.remember(tx, request, request.scope, approved, ctx)
            return approved

        return units.owned(await units.write(ctx, unit, request.scope.tenant_id))

    async def reject(self, request: RejectRequest, ctx: OperationContext) -> DeleteResult:
        """A pending record is erased with its history: it was never accepted. Its
        idempotency entries stay as tombstones, so a late retry of the add that wrote it
        is refused instead of writing it again."""
        self._units.require_open()
        scope_hash = request.scope.scope_hash

        async def unit(tx: WriteTransaction) -> DeleteResult:
            replay = await self._units.replayed_removal(tx, scope_hash, request, ctx)
            if replay is not None:
                return replay
            current = await pending_record(tx, scope_hash, request, ctx)
            await tx.erasure.erase([current.id], tombstone_idempotency=True)
            result = DeleteResult(current.id, scope_hash, hard=True)
            await self._units.remember_removal(tx, request, result, ctx)
            return result

        return await self._units.write(ctx, unit, request.scope.tenant_id)
