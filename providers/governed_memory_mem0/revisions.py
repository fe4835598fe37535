"""The mem0 provider's scope revisions (capability ``scope_revisions``): kept by the ledger.

The ledger, not Mem0, decides what a search may return, so a change Mem0 holds but the
ledger has not committed is invisible anyway: the revisions its triggers advance with
every committed change are the ones a search cache in any process can trust.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from governed_memory.scope_revisions import ScopeState

from governed_memory_mem0.store import Mem0Store

__all__ = ["LedgerRevisions"]


class LedgerRevisions:
    """A ``governed_memory.scope_revisions.ScopeRevisions`` over the ledger, read off the
    event loop (one indexed read each)."""

    def __init__(self, store: Mem0Store) -> None:
        self._store = store

    async def read(self, tenant_id: str, scope_hashes: Sequence[str],
                   now: float) -> ScopeState:
        self._store.require_open()
        return await asyncio.to_thread(self._store.ledger.scope_state, tenant_id,
                                       scope_hashes, now)
