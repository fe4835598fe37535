"""The requests that remove records wholesale: a scope, a user, what has expired.

None of them names a record: they answer with a count, a cleanup page or an erasure
receipt, and an erasure of a user names no scope at all but the user, across every
scope of their tenant. What they remove is what an auditor asks about afterwards, so
their summaries carry the counts and, for a user, the receipt's evidence.
"""

from __future__ import annotations

from collections.abc import Set
from typing import TYPE_CHECKING, ClassVar, Protocol

import attrs

from governed_memory.errors import MemoryStorageError
from governed_memory.events import ErasureEvidence
from governed_memory.limits import check_identifier, check_page_size
from governed_memory.operations import Operation
from governed_memory.records import CleanupPage, ErasureReceipt
from governed_memory.request import Checked, Summary, wrong_result
from governed_memory.request_fields import check_optional_text
from governed_memory.request_kinds import LongTermRequest
from governed_memory.scope import Scope

if TYPE_CHECKING:
    from governed_memory.operation_context import OperationContext


@attrs.frozen(slots=True, kw_only=True)
class DeleteAllRequest(LongTermRequest[int]):
    """Physically erase one exact scope, live and expired records alike."""

    operation: ClassVar[Operation] = Operation.DELETE_ALL

    scope: Scope

    def _validate(self) -> None:
        return None

    async def send(self, target: ErasureTarget, ctx: OperationContext) -> int:
        return await target.delete_all(self, ctx)

    def check(self, result: int, allowed: Set[str],
              ctx: OperationContext) -> Checked[int]:
        if isinstance(result, bool) or not isinstance(result, int):
            return wrong_result(self, result)
        return Checked(result, self.summarize(result))

    @classmethod
    def summarize(cls, result: int) -> Summary:
        return Summary(count=result)


@attrs.frozen(slots=True, kw_only=True)
class DeleteUserRequest(LongTermRequest[ErasureReceipt]):
    """Erase one user in every scope of their tenant; the result is an erasure receipt."""

    operation: ClassVar[Operation] = Operation.DELETE_USER

    tenant_id: str
    user_id: str

    def named_subject(self) -> tuple[str, str]:
        return self.tenant_id, self.user_id

    def _validate(self) -> None:
        check_identifier(self.tenant_id, "tenant_id")
        check_identifier(self.user_id, "user_id")

    async def send(self, target: ErasureTarget, ctx: OperationContext) -> ErasureReceipt:
        return await target.delete_user(self, ctx)

    def check(self, result: ErasureReceipt, allowed: Set[str],
              ctx: OperationContext) -> Checked[ErasureReceipt]:
        if not isinstance(result, ErasureReceipt):
            return wrong_result(self, result)
        if (result.tenant_id, result.user_id) != (self.tenant_id, self.user_id):
            return Checked(result, error=MemoryStorageError("provider erased another subject"))
        return Checked(result, self.summarize(result))

    @classmethod
    def summarize(cls, result: ErasureReceipt) -> Summary:
        return Summary(count=result.total, scope_hashes=result.scope_hashes,
                       reasons=(f"receipt {result.receipt_hash}",),
                       erasure=erasure_evidence(result))


@attrs.frozen(slots=True, kw_only=True)
class PurgeExpiredRequest(LongTermRequest[CleanupPage]):
    operation: ClassVar[Operation] = Operation.PURGE_EXPIRED

    scope: Scope
    limit: int = 100
    after: str | None = None

    def _validate(self) -> None:
        check_page_size(self.limit)
        check_optional_text(self.after, "after", 2048)

    async def send(self, target: ErasureTarget, ctx: OperationContext) -> CleanupPage:
        return await target.purge_expired(self, ctx)

    def check(self, result: CleanupPage, allowed: Set[str],
              ctx: OperationContext) -> Checked[CleanupPage]:
        if not isinstance(result, CleanupPage):
            return wrong_result(self, result)
        return Checked(result, self.summarize(result))

    @classmethod
    def summarize(cls, result: CleanupPage) -> Summary:
        return Summary(count=result.deleted)


def erasure_evidence(receipt: ErasureReceipt) -> ErasureEvidence:
    """What of a receipt goes into the trail: all of it but the user id."""
    return ErasureEvidence(receipt.request_id, dict(receipt.counts), receipt.started_at,
                           receipt.completed_at, receipt.receipt_hash)


class ErasureTarget(Protocol):
    """What the erasure requests are sent to: the wholesale removals of
    ``governed_memory.requests.Operations``."""

    async def delete_all(self, request: DeleteAllRequest, ctx: OperationContext) -> int: ...

    async def delete_user(
        self, request: DeleteUserRequest, ctx: OperationContext
    ) -> ErasureReceipt: ...

    async def purge_expired(
        self, request: PurgeExpiredRequest, ctx: OperationContext
    ) -> CleanupPage: ...
