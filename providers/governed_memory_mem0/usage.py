"""The mem0 provider's usage meter (capability ``usage``): counted in the ledger.

Quotas decide on usage before a write, so it is read from storage on every call, never
from counters kept in the process. Mem0 cannot count a scope's records cheaply, but the
ledger holds each record's current version, content included: one indexed read under
the store lock answers without asking Mem0.
"""

from __future__ import annotations

from governed_memory.operation_context import OperationContext
from governed_memory.usage import Usage, UsageQuery

from governed_memory_mem0.store import Mem0Store

__all__ = ["LedgerUsage"]


class LedgerUsage:
    """A ``governed_memory.usage.UsageMeter`` over the ledger."""

    def __init__(self, store: Mem0Store) -> None:
        self._store = store

    async def usage(self, query: UsageQuery, ctx: OperationContext) -> Usage:
        """Records neither deleted nor expired (pending included) and their content
        bytes, for quotas: read from the ledger under the store lock."""
        self._store.require_open()
        scope_hash = None if query.scope is None else query.scope.scope_hash
        records, size = await self._store.locked(self._store.ledger.usage, query.tenant_id,
                                                 scope_hash, ctx.now)
        return Usage(records=records, bytes=size)
