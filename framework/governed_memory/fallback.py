"""A profile's ``[fallback]``: a provider to read from while the primary is down.

Reads (``get``, ``list``, ``search``, ``history``) go to the primary; when it answers
``MemoryUnavailableError`` (it cannot be reached, it is not started, its pool is
exhausted) the same read goes to the fallback, and the operation's
notes say so (``degraded: read from fallback <name>``), so the outcome event in the
trail marks the answer as degraded. Writes never go to the fallback: a write the
primary cannot take fails, because a fallback is typically a replica or an older copy,
and a write there would be lost or would fork the data. Every answer, the fallback's
included, still passes the activity port's scope check on the way back.

Any other error of the primary (a conflict, not found, a storage error) is its answer
and is not retried elsewhere: only unavailability is a reason to ask someone else.
Usage (for quotas), replay and the outboxes come from the primary only: a replica's
count may be behind, and a quota decided on it could let a write through.

The fallback must be a read replica of the primary, fed by the datastore's own
replication, so that every write, erasures included, reaches it: the framework never
writes there, so a fallback holding an independent copy would keep data that
``delete_user`` erased from the primary, and its receipt would not cover it.

Place it outside the search cache (the manager does): a degraded answer is never
cached, and a cache hit still answers while the primary is down.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from governed_memory.cache.forwarding import (
    ForwardedFeatures,
    ReviewForwarding,
    UsageForwarding,
    WriteForwarding,
)
from governed_memory.capabilities import HealthStatus
from governed_memory.errors import MemoryUnavailableError
from governed_memory.operation_context import OperationContext
from governed_memory.provider import MemoryProvider
from governed_memory.records import MemoryRecord, MemoryVersion, Page, SearchResult
from governed_memory.requests import GetRequest, HistoryRequest, ListRequest, SearchRequest

if TYPE_CHECKING:
    from governed_memory.scope_revisions import ScopeRevisions

log = logging.getLogger(__name__)

T = TypeVar("T")


class FallbackProvider(ForwardedFeatures, WriteForwarding, ReviewForwarding, UsageForwarding):
    """The primary provider, with reads falling back to ``fallback`` while it is down.

    Like the search cache, the wrapper answers each optional-feature accessor with the
    primary's (review, indexing, the event outbox, replay, rate windows): those never
    fall back. Writes never reach the fallback, so their rates are counted in the
    primary's windows (a write while the primary is down is refused either way).
    """

    def __init__(self, primary: MemoryProvider, fallback: MemoryProvider) -> None:
        self._inner = primary
        self._fallback = fallback
        self.name: str = str(getattr(primary, "name", type(primary).__name__))
        self.fallback_name: str = str(getattr(fallback, "name", type(fallback).__name__))
        self.revision = str(getattr(primary, "revision", "unknown"))

    @property
    def fallback(self) -> MemoryProvider:
        return self._fallback

    @property
    def revisions(self) -> ScopeRevisions | None:
        """None: a read may be answered by the fallback, which the primary's revisions
        say nothing about (a cache above this wrapper would keep its own)."""
        return None

    # -- lifecycle: both, so a broken fallback is found at start, not during an outage --

    async def start(self) -> None:
        await self._inner.start()
        try:
            await self._fallback.start()
        except BaseException:
            await self._inner.close()
            raise

    async def close(self) -> None:
        try:
            await self._inner.close()
        finally:
            await self._fallback.close()

    async def health(self) -> HealthStatus:
        """The primary's health; when it is down, whether reads can still be served."""
        status = await self._inner.health()
        if status.ok:
            return status
        backup = await self._fallback.health()
        detail = (f"{status.detail}; reads fall back to {self.fallback_name} "
                  f"({'ok' if backup.ok else 'down: ' + backup.detail})")
        return HealthStatus(ok=False, provider=status.provider, detail=detail,
                            latency_ms=status.latency_ms)

    # -- reads: the primary, else the fallback -------------------------------------------

    async def _read(self, ctx: OperationContext, primary: Callable[[], Awaitable[T]],
                    fallback: Callable[[], Awaitable[T]]) -> T:
        try:
            return await primary()
        except MemoryUnavailableError as exc:
            log.warning("provider %s unavailable (%s); reading from fallback %s",
                        self.name, exc.code, self.fallback_name)
            result = await fallback()
            ctx.notes.add(f"degraded: read from fallback {self.fallback_name}")
            return result

    async def get(self, request: GetRequest, ctx: OperationContext) -> MemoryRecord:
        return await self._read(ctx, lambda: self._inner.get(request, ctx),
                                lambda: self._fallback.get(request, ctx))

    async def list(self, request: ListRequest, ctx: OperationContext) -> Page[MemoryRecord]:
        return await self._read(ctx, lambda: self._inner.list(request, ctx),
                                lambda: self._fallback.list(request, ctx))

    async def search(self, request: SearchRequest, ctx: OperationContext) -> SearchResult:
        return await self._read(ctx, lambda: self._inner.search(request, ctx),
                                lambda: self._fallback.search(request, ctx))

    async def history(self, request: HistoryRequest,
                      ctx: OperationContext) -> tuple[MemoryVersion, ...]:
        return await self._read(ctx, lambda: self._inner.history(request, ctx),
                                lambda: self._fallback.history(request, ctx))

    # -- writes: the primary only ---------------------------------------------------------

    async def _write(self, operation: str, call: Callable[[], Awaitable[T]],
                     request: Any, ctx: OperationContext) -> T:
        """The forwarding mixins' write path: straight to the primary."""
        return await call()
