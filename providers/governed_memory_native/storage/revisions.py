"""The native provider's scope revisions: read from storage, where the writes keep them.

Every backend advances a scope's revision in the transaction of each change to its
records or vectors (SQL: triggers, so a write from any process counts), and the
tenant epoch when ``delete_user`` completes. Reading them is one point read, which a
search cache in any process makes before it trusts a stored page.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from governed_memory.scope_revisions import ScopeState

from governed_memory_native.storage.port import ReadTransaction, StorageBackend


class StoredScopeRevisions:
    """``governed_memory.scope_revisions.ScopeRevisions`` over a storage backend."""

    __slots__ = ("_backend", "_require_open")

    def __init__(self, backend: StorageBackend, require_open: Callable[[], None]) -> None:
        self._backend = backend
        self._require_open = require_open

    async def read(self, tenant_id: str, scope_hashes: Sequence[str],
                   now: float) -> ScopeState:
        self._require_open()

        async def unit(tx: ReadTransaction) -> ScopeState:
            return await tx.revisions.read(tenant_id, scope_hashes, now)

        return await self._backend.run_read(unit, point=True)
