"""The review queue's requests: list what waits, approve it, reject it.

A policy may hold a new record for review (``pending_review``); these are how a
reviewer decides it. They need a provider that offers the ``review`` capability, and
reach it through the object its ``review`` accessor returns
(:class:`ReviewingProvider`), declared here with the requests it receives.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Protocol, runtime_checkable

import attrs

from governed_memory.capabilities import offered
from governed_memory.limits import check_page_size
from governed_memory.operations import Operation
from governed_memory.records import DeleteResult, MemoryRecord, Page, RecordStatus
from governed_memory.request_fields import check_optional_text, check_record_write
from governed_memory.request_kinds import DeletionRequest, PageRequest, RecordRequest
from governed_memory.scope import Scope

if TYPE_CHECKING:
    from governed_memory.operation_context import OperationContext


def _reviewer(target: ReviewTarget) -> ReviewingProvider:
    return offered(target.review, target, "does not support review (capability 'review')")


@attrs.frozen(slots=True, kw_only=True)
class ListPendingRequest(PageRequest):
    """The review queue of one exact scope: records held as ``pending_review``."""

    operation: ClassVar[Operation] = Operation.LIST_PENDING
    capability: ClassVar[str | None] = "review"

    scope: Scope
    limit: int = 20
    cursor: str | None = None

    def _validate(self) -> None:
        check_page_size(self.limit)
        check_optional_text(self.cursor, "cursor", 2048)

    async def send(self, target: ReviewTarget, ctx: OperationContext) -> Page[MemoryRecord]:
        return await _reviewer(target).list_pending(self, ctx)

    def shows(self, record: MemoryRecord, now: float) -> bool:
        return record.status is RecordStatus.PENDING_REVIEW and not record.is_expired(now)


@attrs.frozen(slots=True, kw_only=True)
class ApproveRequest(RecordRequest):
    """Make a ``pending_review`` record active (a new version), so reads can see it."""

    operation: ClassVar[Operation] = Operation.APPROVE
    capability: ClassVar[str | None] = "review"

    scope: Scope
    record_id: str
    expected_revision: str | None = None
    idempotency_key: str | None = None

    def _validate(self) -> None:
        check_record_write(self.record_id, self.expected_revision, self.idempotency_key)

    async def send(self, target: ReviewTarget, ctx: OperationContext) -> MemoryRecord:
        return await _reviewer(target).approve(self, ctx)


@attrs.frozen(slots=True, kw_only=True)
class RejectRequest(DeletionRequest):
    """Erase a ``pending_review`` record and its history: it was never accepted, so
    nothing of it is kept (the events still record that it was rejected)."""

    operation: ClassVar[Operation] = Operation.REJECT
    capability: ClassVar[str | None] = "review"

    scope: Scope
    record_id: str
    expected_revision: str | None = None
    idempotency_key: str | None = None

    def _validate(self) -> None:
        check_record_write(self.record_id, self.expected_revision, self.idempotency_key)

    async def send(self, target: ReviewTarget, ctx: OperationContext) -> DeleteResult:
        return await _reviewer(target).reject(self, ctx)


@runtime_checkable
class ReviewingProvider(Protocol):
    """The ``review`` capability: deciding records held as ``pending_review``.

    - ``approve`` turns a pending record active as a new version whose history entry
      has operation ``approve``;
    - ``reject`` erases a pending record with its history (it was never accepted) and
      returns a hard ``DeleteResult``;
    - either on a record that is not pending raises ``MemoryConflictError``; an unknown
      id raises ``MemoryNotFoundError``; a stale ``expected_revision`` is a conflict;
    - ``list_pending`` pages through one scope's pending, unexpired records by id (the
      review queue), with a cursor like ``list``.
    """

    async def approve(self, request: ApproveRequest, ctx: OperationContext) -> MemoryRecord: ...

    async def reject(self, request: RejectRequest, ctx: OperationContext) -> DeleteResult: ...

    async def list_pending(self, request: ListPendingRequest,
                           ctx: OperationContext) -> Page[MemoryRecord]: ...


class ReviewTarget(Protocol):
    """What the review requests are sent to: the ``review`` accessor of
    ``governed_memory.requests.Operations``."""

    @property
    def review(self) -> ReviewingProvider | None:
        """Deciding records held for review (capability ``review``)."""
        ...
