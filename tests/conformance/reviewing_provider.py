"""The example provider plus the optional ``review``, ``usage``, ``dedup`` and
``scope_revisions`` capabilities.

Kept apart from ``example_provider.py`` so the smallest provider stays small; this one
exists to prove that the suite's review, usage, dedup and scope-revision tests pass on
a correct implementation (and it is the base of the broken dedup and revision providers
in ``broken.py``). Its revisions live in this process, next to its records, so they are
as shared as its storage is.
"""

from __future__ import annotations

from collections.abc import Sequence

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
from governed_memory.clock import Clock
from governed_memory.cursor import decode_cursor, encode_cursor
from governed_memory.ids import new_revision
from governed_memory.operation_context import OperationContext
from governed_memory.records import ErasureReceipt, Page, VersionOperation, content_hash
from governed_memory.requests import (
    AddRequest,
    ApproveRequest,
    DedupMode,
    DeleteUserRequest,
    ListPendingRequest,
    RejectRequest,
)
from governed_memory.scope_revisions import ScopeRevisions, ScopeState, epoch_name
from governed_memory.usage import Usage, UsageMeter, UsageQuery


class ReviewingExampleProvider(ExampleProvider):
    name = "example-reviewing"

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock)
        self._scope_revisions: dict[str, int] = {}

    @property
    def review(self) -> ReviewingExampleProvider:
        return self

    @property
    def usage_meter(self) -> UsageMeter:
        return self

    def capabilities(self) -> Capabilities:
        return attrs.evolve(super().capabilities(), review=True, usage=True, dedup=True,
                            scope_revisions=True)

    # -- scope revisions ------------------------------------------------------------

    @property
    def revisions(self) -> ScopeRevisions:
        return self

    async def read(self, tenant_id: str, scope_hashes: Sequence[str],
                   now: float) -> ScopeState:
        revisions = self._scope_revisions
        instants = [record.expires_at for row in self._rows.values()
                    if (record := row.record).scope_hash in scope_hashes
                    and record.expires_at is not None and record.expires_at > now]
        return ScopeState((*(revisions.get(h, 0) for h in scope_hashes),
                           revisions.get(epoch_name(tenant_id), 0)),
                          min(instants) if instants else None)

    def _advance(self, name: str) -> None:
        self._scope_revisions[name] = self._scope_revisions.get(name, 0) + 1

    def _commit(self, record: MemoryRecord, operation: VersionOperation,
                ctx: OperationContext) -> None:
        super()._commit(record, operation, ctx)
        self._advance(record.scope_hash)

    def _erase(self, record_ids: set[str]) -> None:
        for record_id in record_ids:
            row = self._rows.get(record_id)
            if row is not None:
                self._advance(row.record.scope_hash)
        super()._erase(record_ids)

    async def delete_user(self, request: DeleteUserRequest,
                          ctx: OperationContext) -> ErasureReceipt:
        receipt = await super().delete_user(request, ctx)
        for scope_hash in receipt.scope_hashes:  # forgotten with the user...
            self._scope_revisions.pop(scope_hash, None)
        self._advance(epoch_name(request.tenant_id))  # ...safe: the epoch moves
        return receipt

    # -- dedup ----------------------------------------------------------------------

    async def add(self, request: AddRequest, ctx: OperationContext) -> MemoryRecord:
        """With ``dedup`` on, an add equal to a live record returns that record (no
        embedder here, so ``similarity`` is exact too). Checked and answered without an
        ``await``, so it is atomic with the write like everything else here."""
        if request.dedup is not DedupMode.OFF:
            request.validate()
            replay = self._replay(request, ctx)
            if replay is not None:
                return detached(replay)
            duplicate = self._duplicate_of(request, ctx.now)
            if duplicate is not None:
                ctx.notes.add(f"deduplicated: same content as record {duplicate.id}")
                self._remember(request, ctx, duplicate)  # a retry replays this answer
                return detached(duplicate)
        return await super().add(request, ctx)

    def _duplicate_of(self, request: AddRequest, now: float) -> MemoryRecord | None:
        """The oldest live record of the scope with the same content and key."""
        wanted = content_hash(request.content)
        return min((row.record for row in self._rows.values()
                    if row.record.scope_hash == request.scope.scope_hash
                    and row.record.key == request.key and row.record.content_hash == wanted
                    and self._live(row.record, now)),
                   key=lambda record: record.id, default=None)

    def _live(self, record: MemoryRecord, now: float) -> bool:
        return (record.status in (RecordStatus.ACTIVE, RecordStatus.PENDING_REVIEW)
                and not record.is_expired(now) and record.is_valid_at(now))

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
