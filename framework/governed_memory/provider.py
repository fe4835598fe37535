"""The provider protocol: what a plugin implements so the manager can govern it.

Providers enforce the exact scope in their datastore and return fresh (detached)
values; the manager still verifies every returned record's scope hash, so a provider
bug degrades to a dropped result and an audit event, never to a leak.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from governed_memory.clock import Clock
from governed_memory.context import OperationContext
from governed_memory.records import (
    Capabilities,
    CleanupPage,
    DeleteResult,
    ErasureReceipt,
    HealthStatus,
    MemoryRecord,
    MemoryVersion,
    Page,
    SearchResult,
)
from governed_memory.requests import (
    AddRequest,
    DeleteAllRequest,
    DeleteRequest,
    DeleteUserRequest,
    GetRequest,
    HistoryRequest,
    ListRequest,
    PurgeExpiredRequest,
    SearchRequest,
    UpdateRequest,
)


@runtime_checkable
class MemoryProvider(Protocol):
    """Async memory storage behind the governed contract.

    Contract highlights (the conformance suite checks each):

    - ``get`` / ``list`` / ``search`` / ``history`` never return a record of another
      scope, a deleted or expired record, or (except ``history``) a pending-review one;
    - ``list`` pages ascend by id; a cursor survives concurrent inserts;
    - ``update`` and ``delete`` compare-and-set on ``expected_revision`` and raise
      ``MemoryConflictError`` when it is stale, also once the record is deleted;
    - a write with an ``idempotency_key`` seen before returns the first result for the
      same request and raises ``MemoryConflictError`` for a different one;
    - a rejected write leaves storage unchanged.
    """

    name: str

    def capabilities(self) -> Capabilities: ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def health(self) -> HealthStatus: ...

    async def add(self, request: AddRequest, ctx: OperationContext) -> MemoryRecord: ...

    async def get(self, request: GetRequest, ctx: OperationContext) -> MemoryRecord: ...

    async def list(self, request: ListRequest, ctx: OperationContext) -> Page[MemoryRecord]: ...

    async def search(self, request: SearchRequest, ctx: OperationContext) -> SearchResult: ...

    async def update(self, request: UpdateRequest, ctx: OperationContext) -> MemoryRecord: ...

    async def delete(self, request: DeleteRequest, ctx: OperationContext) -> DeleteResult: ...

    async def history(
        self, request: HistoryRequest, ctx: OperationContext
    ) -> tuple[MemoryVersion, ...]: ...

    async def delete_all(self, request: DeleteAllRequest, ctx: OperationContext) -> int: ...

    async def delete_user(
        self, request: DeleteUserRequest, ctx: OperationContext
    ) -> ErasureReceipt: ...

    async def purge_expired(
        self, request: PurgeExpiredRequest, ctx: OperationContext
    ) -> CleanupPage: ...


ProviderFactory = Callable[[Mapping[str, Any], Clock], MemoryProvider]
"""Builds an unstarted provider from its profile config and the manager's clock."""
