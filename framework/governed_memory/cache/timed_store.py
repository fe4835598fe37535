"""The cache store as the wrapper calls it: under a deadline, with one kind of failure.

A store that hangs must cost a search no more than ``store_timeout_s``, and a store
that fails in any way (a timeout, a refused connection, a bug in a third-party store)
must only ever make the cache step aside. So every call goes through
:meth:`TimedStore.call`, which turns each failure into a ``CacheStoreError``: callers
have exactly one thing to bypass on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import TypeVar

from governed_memory.cache.store import (
    CacheStore,
    CacheStoreError,
    CacheStoreTimeout,
    Lookup,
)

T = TypeVar("T")


class TimedStore:
    """``store``, each operation under ``timeout_s`` unless a call names another."""

    def __init__(self, store: CacheStore, timeout_s: float) -> None:
        self.store = store
        self._timeout_s = timeout_s

    async def call(self, awaitable: Awaitable[T], *, timeout_s: float | None = None) -> T:
        """One store operation under the cache's own deadline; every failure becomes a
        ``CacheStoreError``."""
        deadline = self._timeout_s if timeout_s is None else timeout_s
        try:
            async with asyncio.timeout(deadline):
                return await awaitable
        except CacheStoreError:
            raise
        except TimeoutError:
            raise CacheStoreTimeout(f"no answer within {deadline:g} s") from None
        except Exception as exc:
            raise CacheStoreError(type(exc).__name__) from exc

    async def lookup(self, tag: str, names: Sequence[str], digest: str, now: float) -> Lookup:
        return await self.call(self.store.lookup(tag, names, digest, now))

    async def fill(self, tag: str, names: Sequence[str], revisions: Sequence[int],
                   digest: str, value: bytes, ttl_s: float) -> bool:
        return await self.call(self.store.fill(tag, names, revisions, digest, value, ttl_s))

    async def bump(self, tag: str, names: Sequence[str], expiries: Sequence[float],
                   now: float) -> None:
        await self.call(self.store.bump(tag, names, expiries, now))
