"""What erasing a user does to the cached answers of the user's tenant.

A cached page may quote the erased user, and an erasure receipt must say what was
removed. ``delete_user`` bumps the tenant epoch (in the provider's storage or in the
store), which makes every page of the tenant unreachable in every process at once; this
module then *removes* them, where it can, and counts them into the receipt only when the
count covers every process (a shared store). A process-local store is out of reach of
the process that erased: the first lookup here that sees the new epoch drops the
tenant's pages, instead of leaving the erased content in memory, unreachable, until its
TTL.
"""

from __future__ import annotations

import contextlib
import logging
from collections import OrderedDict
from typing import Final

import attrs

from governed_memory.cache.memo import DecodedMemo
from governed_memory.cache.store import CacheStoreError, ErasingCacheStore
from governed_memory.cache.timed_store import TimedStore
from governed_memory.records import ErasureReceipt

log = logging.getLogger(__name__)

MAX_EPOCHS: Final = 100_000
"""Tenants whose last-seen epoch a process remembers (an LRU)."""


class CachedErasure:
    """Removes a tenant's cached answers from ``store`` and ``memo`` after an erasure,
    each removal under ``erase_timeout_s`` (a round trip per batch, so not a lookup's
    deadline)."""

    def __init__(self, store: TimedStore, memo: DecodedMemo, erase_timeout_s: float) -> None:
        self._store = store
        self._memo = memo
        self._erase_timeout_s = erase_timeout_s
        self._epochs: OrderedDict[str, int] = OrderedDict()
        """The tenant epoch this process last read, by tenant tag."""

    async def erased(self, tag: str, receipt: ErasureReceipt) -> ErasureReceipt:
        """Remove the tenant's answers after ``delete_user`` returned ``receipt``; the
        receipt, counting them as ``cached_searches`` when the store is shared and
        removed them. Otherwise it carries no such count: the entries stay unreachable
        and expire within the TTL."""
        self._memo.drop_tenant(tag)
        store = self._store.store
        if not isinstance(store, ErasingCacheStore):
            return receipt
        if not store.shared:
            # This process's entries go now, but the receipt claims nothing: other
            # processes' stores are out of reach (their pages are unreachable already,
            # by the epoch in storage, and are dropped at their next lookup).
            with contextlib.suppress(CacheStoreError):
                await self._erase(store, tag)
            return receipt
        try:
            dropped = await self._erase(store, tag)
        except CacheStoreError as exc:
            # The epoch bump already made them unreachable; they age out by TTL.
            log.warning("search cache: could not remove erased tenant entries (%s)",
                        exc.reason)
            return receipt
        counts = {**receipt.counts, "cached_searches": dropped}
        return attrs.evolve(receipt, counts=counts).sealed()

    async def saw_epoch(self, tag: str, epoch: int) -> None:
        """Drop a tenant's entries from a process-local store once its epoch moved (a
        user of it was erased, possibly by another process)."""
        seen = self._epochs.get(tag)
        self._epochs[tag] = epoch
        self._epochs.move_to_end(tag)
        if len(self._epochs) > MAX_EPOCHS:
            self._epochs.popitem(last=False)
        if seen is None or seen == epoch:
            return
        self._memo.drop_tenant(tag)
        store = self._store.store
        if not store.shared and isinstance(store, ErasingCacheStore):
            with contextlib.suppress(CacheStoreError):
                await self._erase(store, tag)

    async def _erase(self, store: ErasingCacheStore, tag: str) -> int:
        return await self._store.call(store.erase_tenant(tag), timeout_s=self._erase_timeout_s)
