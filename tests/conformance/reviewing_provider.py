"""The example provider plus the optional ``review`` and ``usage`` capabilities.

Kept apart from ``example_provider.py`` so the smallest provider stays small; this one
exists to prove that the suite's review and usage tests pass on a correct
implementation.
"""

from __future__ import annotations

import attrs
from example_provider import ExampleProvider, detached
from governed_memory import (
    DeleteResult,
    MemoryConflictError,
    MemoryNotFoundError,
    MemoryRecord,
    RecordStatus,
)
from governed_memory.capabilities import Capabilities
from governed_memory.cursor import decode_cursor, encode_cursor
from governed_memory.ids import new_revision
from governed_memory.operation_context import OperationContext
from governed_memory.records import Page, VersionOperation
from governed_memory.requests import ApproveRequest, ListPendingRequest, RejectRequest
from governed_memory.usage import Usage, UsageQuery


class ReviewingExampleProvider(ExampleProvider):
    name = "example-reviewing"

    @property
    def review(self) -> ReviewingExampleProvider:
        return self

    def capabilities(self) -> Capabilities:
        return attrs.evolve(super().capabilities(), review=True, usage=True)

    def _pending(self, request: ApproveRequest | RejectRequest,
                 ctx: OperationContext) -> MemoryRecord:
        row = self._find(request.scope, request.record_id)
        if row is None or row.record.is_expired(ctx.now):
            raise MemoryNotFoundError("no record with that id in this scope")
        if row.record.status is not RecordStatus.PENDING_REVIEW:
            raise MemoryConflictError("the record is not pending review")
        self._check_revision(row.record, request.expected_revision)
        return row.record

    async def approve(self, request: ApproveRequest, ctx: OperationContext) -> MemoryRecord:
        request.validate()
        replay = self._replay(request, ctx)
        if replay is not None:
            return detached(replay)
        current = self._pending(request, ctx)
        record = attrs.evolve(current, status=RecordStatus.ACTIVE, version=current.version + 1,
                              revision=new_revision(), updated_at=ctx.now)
        self._commit(record, VersionOperation.APPROVE, ctx)
        self._remember(request, ctx, record)
        return detached(record)

    async def reject(self, request: RejectRequest, ctx: OperationContext) -> DeleteResult:
        request.validate()
        replay = self._replay(request, ctx)
        if replay is not None:
            return replay  # type: ignore[no-any-return]
        current = self._pending(request, ctx)
        self._erase({current.id})
        result = DeleteResult(current.id, current.scope_hash, hard=True)
        self._remember(request, ctx, result)
        return result

    async def list_pending(self, request: ListPendingRequest,
                           ctx: OperationContext) -> Page[MemoryRecord]:
        request.validate()
        scope_hash = request.scope.scope_hash
        after = decode_cursor(request.cursor, "pending", scope_hash) if request.cursor else ""
        page = sorted((row.record for row in self._rows.values()
                       if row.record.scope_hash == scope_hash and row.record.id > after
                       and row.record.status is RecordStatus.PENDING_REVIEW
                       and not row.record.is_expired(ctx.now)),
                      key=lambda record: record.id)[: request.limit]
        cursor = (encode_cursor("pending", scope_hash, page[-1].id)
                  if len(page) == request.limit else None)
        return Page(tuple(detached(record) for record in page), cursor)

    async def usage(self, query: UsageQuery, ctx: OperationContext) -> Usage:
        counted = [row.record for row in self._rows.values()
                   if row.record.scope.tenant_id == query.tenant_id
                   and (query.scope is None or row.record.scope_hash == query.scope.scope_hash)
                   and row.record.status is not RecordStatus.DELETED
                   and not row.record.is_expired(ctx.now)]
        return Usage(len(counted), sum(len(r.content.encode()) for r in counted))
