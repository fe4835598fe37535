"""Scope revisions kept where the writes are: what lets any process trust a cached answer.

A search cache in one process cannot see another process's writes. A provider that
keeps, in its own storage, a monotonic revision per scope, advanced in the same
transaction as every change to that scope's records (and a per-tenant *epoch* advanced
by ``delete_user``), lets every process check a cached page against the truth with one
point read: the page is served only if it was stored under the revisions the store
holds now. A write or an erasure by any process, on any host, then invalidates every
process's cached pages at commit, with no message to deliver and nothing to lose.

The optional accessor :attr:`~governed_memory.provider.MemoryProvider.revisions` offers
it (capability ``scope_revisions``); the search cache uses it when present
(``docs/search-cache.md``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import attrs

__all__ = ["ScopeRevisions", "ScopeState", "epoch_name"]


def epoch_name(tenant_id: str) -> str:
    """The stored name of a tenant's epoch: it can never equal a scope hash (``sh1:…``)."""
    return "epoch:" + tenant_id


@attrs.frozen(slots=True)
class ScopeState:
    """What one read saw, in one consistent snapshot of storage.

    ``revisions`` holds one value per scope hash asked for, in order, then the tenant's
    epoch. ``horizon`` is the earliest instant after the read's ``now`` at which a
    record of those scopes expires, becomes valid or stops being valid: an answer
    computed now may change then without any write.
    """

    revisions: tuple[int, ...]
    horizon: float | None = None


@runtime_checkable
class ScopeRevisions(Protocol):
    """Per-scope revisions advanced by the writes themselves.

    Contract (``governed_memory_conformance`` checks it):

    - every committed change to a scope's records or to what ranks them (an add, an
      update, a delete, an approval, a rejection, a purge, ``delete_all``, a vector the
      indexing worker stores) advances that scope's revision, in the change's own
      transaction, before the write returns;
    - ``delete_user`` advances the tenant's epoch in the transaction that completes the
      erasure (the user's records may be in any scope of the tenant);
    - a revision never reads a value it read before a later committed change: a scope
      never written reads the same value until its first write, and a stored revision
      is dropped only together with an epoch advance (erasure may forget the erased
      user's scope hashes);
    - a read sees one committed state: revisions and horizon from the same snapshot.
    """

    async def read(self, tenant_id: str, scope_hashes: Sequence[str],
                   now: float) -> ScopeState: ...
