"""Deliberately broken providers, each the example provider with one classic bug.

The meta-tests run the conformance suite on each and insist it fails, and fails in the
tests that name the bug: a suite that passes a broken provider proves nothing. The
first three are the classics; the rest are the bugs a provider written from the docs
passed the suite with before issue 14, and the new areas (review, durability).
"""

from __future__ import annotations

from typing import Any

import attrs
from example_provider import ExampleProvider, detached
from governed_memory import (
    DeleteResult,
    MemoryNotFoundError,
    MemoryRecord,
    MemoryVersion,
    RecordStatus,
    Scope,
)
from governed_memory.capabilities import Capabilities
from governed_memory.clock import Clock
from governed_memory.ids import new_revision
from governed_memory.operation_context import OperationContext
from governed_memory.records import CleanupPage, VersionOperation
from governed_memory.requests import (
    AddRequest,
    ApproveRequest,
    DeleteRequest,
    HistoryRequest,
    PurgeExpiredRequest,
    RejectRequest,
    UpdateRequest,
)
from reviewing_provider import ReviewingExampleProvider


class ScopeLeakingProvider(ExampleProvider):
    """Matches a scope as "at least these dimensions": a user's query also sees the
    user's session records (the prefix mistake exact scope hashes exist to prevent)."""

    name = "broken-scope-leak"

    def _owned(self, record: MemoryRecord, scope: Scope) -> bool:
        have = record.scope.dimensions()
        return all(have.get(name) == value for name, value in scope.dimensions().items())


class RevisionIgnoringProvider(ExampleProvider):
    """Accepts any ``expected_revision``: compare-and-set in name only."""

    name = "broken-revisions"

    def _check_revision(self, record: MemoryRecord, expected: str | None) -> None:
        return None


class ExpiredReturningProvider(ExampleProvider):
    """Forgets expiry on reads: get, list and search still return expired records."""

    name = "broken-expiry"

    def _readable(self, record: MemoryRecord, now: float) -> bool:
        return record.status is RecordStatus.ACTIVE


# -- the bugs a provider written from the docs passed the suite with (issue 14) ---------------


class ReplayKeepingProvider(ExampleProvider):
    """Erasing a record (hard delete, ``delete_user``) leaves its idempotency-replay
    entry, content and all: a retried add hands the erased record back."""

    name = "broken-replay-kept"

    def _erase(self, record_ids: set[str]) -> None:
        for record_id in record_ids:
            self._rows.pop(record_id, None)


class ExpiredHistoryProvider(ExampleProvider):
    """``history`` still answers for a record whose expiry has passed."""

    name = "broken-expired-history"

    async def history(self, request: HistoryRequest,
                      ctx: OperationContext) -> tuple[MemoryVersion, ...]:
        request.validate()
        row = self._find(request.scope, request.record_id)
        if row is None:
            raise MemoryNotFoundError("no record with that id in this scope")
        return tuple(attrs.evolve(v, record=detached(v.record)) for v in row.versions)


class SupersessionDroppingProvider(ExampleProvider):
    """``update`` ignores ``superseded_by``, so extraction's supersession is lost."""

    name = "broken-supersession"

    async def update(self, request: UpdateRequest, ctx: OperationContext) -> MemoryRecord:
        return await super().update(attrs.evolve(request, superseded_by=None), ctx)


class PurgeStoppingProvider(ExampleProvider):
    """``purge_expired`` returns a cursor only when a page deleted something, so a caller
    stops at the first page of live records."""

    name = "broken-purge-cursor"

    async def purge_expired(self, request: PurgeExpiredRequest,
                            ctx: OperationContext) -> CleanupPage:
        page = await super().purge_expired(request, ctx)
        return page if page.deleted else CleanupPage(deleted=0, next_cursor=None)


class ExpiredSoftDeletingProvider(ExampleProvider):
    """A soft delete of an expired record succeeds and writes a tombstone version, where
    the contract treats an expired record as gone."""

    name = "broken-expired-soft-delete"

    async def delete(self, request: DeleteRequest, ctx: OperationContext) -> DeleteResult:
        row = self._find(request.scope, request.record_id)
        if (not request.hard and row is not None and row.record.is_expired(ctx.now)
                and row.record.status is not RecordStatus.DELETED):
            request.validate()
            self._check_revision(row.record, request.expected_revision)
            tombstone = attrs.evolve(row.record, status=RecordStatus.DELETED,
                                     version=row.record.version + 1, revision=new_revision(),
                                     updated_at=ctx.now)
            self._commit(tombstone, VersionOperation.DELETE, ctx)
            return DeleteResult(tombstone.id, tombstone.scope_hash, hard=False,
                                version=tombstone.version, revision=tombstone.revision)
        return await super().delete(request, ctx)


class ReviewIgnoringIdempotencyProvider(ReviewingExampleProvider):
    """``approve`` and ``reject`` ignore their idempotency keys: a retried approve is
    refused as "not pending", a retried reject as "not found"."""

    name = "broken-review-idempotency"

    def _replay(self, request: Any, ctx: OperationContext) -> Any:
        if isinstance(request, ApproveRequest | RejectRequest):
            return None
        return super()._replay(request, ctx)


class PendingLeakingProvider(ExampleProvider):
    """Reads show records held for review."""

    name = "broken-pending-visible"

    def _readable(self, record: MemoryRecord, now: float) -> bool:
        return record.status is not RecordStatus.DELETED and not record.is_expired(now)


class ActiveApprovingProvider(ReviewingExampleProvider):
    """Review decisions do not check that the record is pending: an active record can
    be "approved" again (a new version) or "rejected" (erased)."""

    name = "broken-review-any-record"

    def _pending(self, request: ApproveRequest | RejectRequest,
                 ctx: OperationContext) -> MemoryRecord:
        row = self._find(request.scope, request.record_id)
        if row is None or row.record.is_expired(ctx.now):
            raise MemoryNotFoundError("no record with that id in this scope")
        self._check_revision(row.record, request.expected_revision)
        return row.record


class PendingKeyFreeProvider(ReviewingExampleProvider):
    """A record held for review does not hold its key: a second record takes it, and
    approving the first makes two live records share one key."""

    name = "broken-pending-key"

    async def add(self, request: AddRequest, ctx: OperationContext) -> MemoryRecord:
        held = [row for row in self._rows.values()
                if row.record.scope_hash == request.scope.scope_hash
                and row.record.key == request.key
                and row.record.status is RecordStatus.PENDING_REVIEW]
        for row in held:
            row.record = attrs.evolve(row.record, key=None)
        try:
            return await super().add(request, ctx)
        finally:
            for row in held:
                row.record = attrs.evolve(row.record, key=request.key)


class AmnesiacProvider(ExampleProvider):
    """Declares ``durable`` but keeps everything in the instance: reopening the same
    storage finds nothing."""

    name = "broken-durability"

    def capabilities(self) -> Capabilities:
        return attrs.evolve(super().capabilities(), durable=True)


class SharedStorageProvider(ExampleProvider):
    """The example provider over storage that outlives an instance (a dict the test
    class keeps, written back on ``close``), so it may honestly declare ``durable``: the
    healthy baseline of the durability meta-test."""

    name = "example-durable"

    def __init__(self, clock: Clock, storage: dict[str, Any] | None = None) -> None:
        super().__init__(clock)
        self._storage = storage if storage is not None else {}
        self._rows = self._storage.get("rows", self._rows)
        self._replies = self._storage.get("replies", self._replies)

    async def close(self) -> None:
        self._storage.update(rows=self._rows, replies=self._replies)

    def capabilities(self) -> Capabilities:
        return attrs.evolve(super().capabilities(), durable=True)
