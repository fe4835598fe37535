"""The provider's units of work: what every operation, whichever feature it belongs to,
needs of storage.

A write commits with its bookkeeping (delivered events removed, its own ``committed``
event stored, its idempotency entry) in one transaction, so exactly one fsync makes all
of it durable; an idempotent retry reads back the first result instead of writing again;
and a record handed to a caller never aliases what the backend keeps. Review, erasure,
search and the plain writes all go through one :class:`Units`, so none of them can
forget a piece of that bookkeeping.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import attrs
from governed_memory.cursor import decode_cursor, encode_cursor
from governed_memory.errors import (
    GovernedMemoryError,
    MemoryConflictError,
    MemoryUnavailableError,
)
from governed_memory.events import MemoryEvent
from governed_memory.operation_context import OperationContext
from governed_memory.outbox import finish_committed_event
from governed_memory.provider_kit import (
    check_fingerprint,
    check_link,
    check_revision,
    raise_missing,
)
from governed_memory.provider_kit import idempotency_fingerprint as fingerprint
from governed_memory.records import (
    DeleteResult,
    MemoryRecord,
    MemoryVersion,
    Page,
    RecordStatus,
    VersionOperation,
)
from governed_memory.requests import (
    AddRequest,
    ApproveRequest,
    DeleteRequest,
    RejectRequest,
    UpdateRequest,
)
from governed_memory.scope import Scope

from governed_memory_native.event_outbox import NativeEventOutbox
from governed_memory_native.storage.copies import detach
from governed_memory_native.storage.port import (
    IdempotencyEntry,
    ReadTransaction,
    StorageBackend,
    WriteTransaction,
)

T = TypeVar("T")

KeyedWrite = AddRequest | UpdateRequest | ApproveRequest
"""The writes whose idempotent retry returns the record the first one produced."""

KeyedRemoval = DeleteRequest | RejectRequest
"""The writes whose idempotent retry returns the removal the first one reported."""


class Units:
    """Units of work over one backend, and the rules every one of them keeps."""

    def __init__(self, backend: StorageBackend, events: NativeEventOutbox) -> None:
        self.backend = backend
        self.events = events
        self.open = False
        """Set by the provider between ``start`` and ``close``."""

    def require_open(self) -> None:
        if not self.open:
            raise MemoryUnavailableError("the native provider is not started (or was closed)")

    def owned(self, record: MemoryRecord) -> MemoryRecord:
        """``record`` as a caller may hold it: a copy only when the backend keeps the
        very objects it hands out (a SQL backend decodes fresh ones from rows)."""
        return detach(record) if self.backend.shares_records else record

    async def write(self, ctx: OperationContext,
                    body: Callable[[WriteTransaction], Awaitable[T]],
                    tenant_id: str | None) -> T:
        """Run one write as a unit of work, with its bookkeeping in the same transaction.

        Delivered events waiting to be removed from storage are removed here, and the
        write's ``committed`` event (when the activity port drafted one) is completed
        from the result and stored, so it commits exactly when the write does: one
        transaction, one fsync. A ``None`` result is an intermediate batch with no
        event of its own. An idempotent replay is a new operation with its own event.
        """
        acks = self.events.take_acks()
        stored: list[MemoryEvent] = []

        async def unit(tx: WriteTransaction) -> T:
            if acks:
                await tx.outbox.acknowledge(acks)
            result = await body(tx)
            if ctx.committed_event is not None and result is not None:
                event = finish_committed_event(ctx.committed_event, result)
                if ctx.notes.lines:
                    event = attrs.evolve(event,
                                         reasons=event.reasons + tuple(ctx.notes.lines))
                await tx.outbox.put(event)
                stored.append(event)
            return result

        noted = len(ctx.notes.lines)
        try:
            result = await self.backend.run_write(unit, tenant_id=tenant_id)
        except BaseException as exc:
            del ctx.notes.lines[noted:]  # what a rolled-back unit did, it did not do
            # Cancelled, or storage failed: the commit may or may not have happened.
            uncertain = (not isinstance(exc, GovernedMemoryError)
                         or isinstance(exc, MemoryUnavailableError))
            self.events.rolled_back(acks, uncertain=uncertain)
            raise
        self.events.committed(stored)
        return result

    async def id_page(self, kind: str, scope_hash: str, cursor: str | None, limit: int,
                      read: Callable[[ReadTransaction, str | None],
                                     Awaitable[Sequence[MemoryRecord]]],
                      ) -> Page[MemoryRecord]:
        """One page of a scope's records by id in one read unit, its cursor bound to the
        page's kind and scope (a cursor of another listing or scope is refused)."""
        after = decode_cursor(cursor, kind, scope_hash) if cursor is not None else None

        async def unit(tx: ReadTransaction) -> Sequence[MemoryRecord]:
            return await read(tx, after)

        items = tuple(self.owned(row) for row in await self.backend.run_read(unit))
        next_cursor = (encode_cursor(kind, scope_hash, items[-1].id)
                       if len(items) == limit else None)
        return Page(items=items, next_cursor=next_cursor)

    async def replayed_record(self, tx: WriteTransaction, scope_hash: str,
                              request: KeyedWrite, ctx: OperationContext,
                              ) -> MemoryRecord | None:
        """The first result of an earlier identical write, or ``None`` if this one is new."""
        entry = await _earlier(tx, scope_hash, request, ctx)
        if entry is None:
            return None
        snapshot = (await tx.versions.get(entry.record_id, entry.version)
                    if entry.version is not None and not entry.erased else None)
        if snapshot is None:
            # Every erasure either removes the entry or marks it erased, so a missing
            # snapshot means the same thing: the first result no longer exists.
            verb = ("created" if isinstance(request, AddRequest)
                    else "approved" if isinstance(request, ApproveRequest) else "updated")
            raise MemoryConflictError(f"the record {verb} with this idempotency key was erased")
        return self.owned(snapshot.record)

    async def remember(self, tx: WriteTransaction, request: KeyedWrite, scope: Scope,
                       record: MemoryRecord, ctx: OperationContext) -> None:
        """Store what a keyed write produced, so its retry gets it back."""
        if request.idempotency_key is None:
            return
        await tx.idempotency.put(IdempotencyEntry(
            scope_hash=scope.scope_hash, operation=request.operation.value,
            key=request.idempotency_key, fingerprint=fingerprint(ctx, request),
            record_id=record.id, tenant_id=scope.tenant_id, user_id=scope.user_id,
            created_at=ctx.now, version=record.version, revision=record.revision,
        ))

    async def replayed_removal(self, tx: WriteTransaction, scope_hash: str,
                               request: KeyedRemoval, ctx: OperationContext,
                               ) -> DeleteResult | None:
        """What an earlier identical delete or rejection reported, or ``None``."""
        entry = await _earlier(tx, scope_hash, request, ctx)
        if entry is None:
            return None
        return DeleteResult(entry.record_id, scope_hash, entry.hard, entry.version,
                            entry.revision)

    async def remember_removal(self, tx: WriteTransaction, request: KeyedRemoval,
                               result: DeleteResult, ctx: OperationContext) -> None:
        """Store what a keyed delete or rejection reported, so its retry gets it back."""
        if request.idempotency_key is None:
            return
        await tx.idempotency.put(IdempotencyEntry(
            scope_hash=result.scope_hash, operation=request.operation.value,
            key=request.idempotency_key, fingerprint=fingerprint(ctx, request),
            record_id=result.record_id, tenant_id=request.scope.tenant_id,
            user_id=request.scope.user_id, created_at=ctx.now,
            version=result.version, revision=result.revision, hard=result.hard,
        ))


async def _earlier(tx: WriteTransaction, scope_hash: str, request: KeyedWrite | KeyedRemoval,
                   ctx: OperationContext) -> IdempotencyEntry | None:
    """The entry an earlier write under this request's idempotency key left, checked to
    be the same request (a different one under the key is a conflict), or ``None``."""
    if request.idempotency_key is None:
        return None
    entry = await tx.idempotency.get(scope_hash, request.operation.value,
                                     request.idempotency_key)
    if entry is not None:
        check_fingerprint(entry, fingerprint(ctx, request))
    return entry

async def pending_record(tx: WriteTransaction, scope_hash: str,
                         request: ApproveRequest | RejectRequest,
                         ctx: OperationContext) -> MemoryRecord:
    """The record a review decision is about; only a live pending record qualifies."""
    current = await tx.records.get(scope_hash, request.record_id)
    if current is None or current.status is RecordStatus.DELETED or current.is_expired(ctx.now):
        raise_missing(request.expected_revision)
    if current.status is not RecordStatus.PENDING_REVIEW:
        raise MemoryConflictError(f"the record is {current.status.value}, not pending review")
    check_revision(current, request.expected_revision)
    return current


async def commit_version(tx: WriteTransaction, current: MemoryRecord, new: MemoryRecord,
                         operation: VersionOperation, ctx: OperationContext) -> None:
    """Replace ``current`` with ``new`` only if nobody moved it since it was read, and
    record the new version in the same transaction."""
    if not await tx.records.replace(new, current.revision):
        raise MemoryConflictError("the record changed concurrently; re-read and retry")
    await tx.versions.append(MemoryVersion(new, operation, ctx.now, ctx.operation_id))


async def require_in_scope(tx: ReadTransaction, scope_hash: str, record_id: str,
                           field: str, now: float) -> None:
    """A link (``supersedes``, ``superseded_by``) must name a live record of the scope."""
    check_link(await tx.records.get(scope_hash, record_id), field, now)
