"""``CachedMemoryProvider``: a read-through search cache that is itself a provider.

The promise: a search that starts after a write has returned never gets an answer
computed before that write — whichever process or host made the write.

When the provider keeps scope revisions in its own storage (``inner.revisions``, the
native and Mem0 providers do), the cache relies on them alone: a lookup reads the
revisions of the scopes searched and the tenant epoch (one point read) and looks for a
page stored under exactly those. Every write advances them in its own transaction, so
its commit makes every older page in every process unreachable; the cache does nothing
on writes, and a store outage can never hide a write. An answer is stored under the
revisions read *before* the provider computed it, so a page is never older than its key.

For a provider without them, the revisions live in the cache store instead, and rest on
three rules (correct across processes only when they share a Redis store and every
writer goes through a cache on it).

1. *Revisions in the key.* Every entry is stored under the revisions of the scopes it
   searched (and the tenant epoch), read before the provider call.
2. *Bump after commit.* A write runs on the provider first and then bumps every scope
   it touched, before it returns; entries of the old revisions are never reached again.
3. *Fill only if unchanged.* An answer is stored only if the revisions still read what
   they read before the call, checked and written atomically by the store. If they
   moved, the search is retried once against the new revisions, then answered uncached.

A bump that fails puts its scopes in quarantine in this process
(:mod:`governed_memory.cache.invalidation`). A store failure of any kind bypasses the
cache; a provider failure is passed on, never retried here. The wrapper puts the parts
together: a search (:mod:`governed_memory.cache.search`, where a hit gets a retrieval
snapshot of its own), the bumps of writes, what an erasure removes
(:mod:`governed_memory.cache.erasure`), and cache events on the bus the host attaches,
fail-closed when that bus is strict.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

from opentelemetry.metrics import MeterProvider

from governed_memory.cache.erasure import CachedErasure
from governed_memory.cache.forwarding import (
    ForwardedFeatures,
    ReviewForwarding,
    UsageForwarding,
    WriteForwarding,
)
from governed_memory.cache.invalidation import Invalidation
from governed_memory.cache.keys import tenant_tag
from governed_memory.cache.memo import DEFAULT_MEMO_ENTRIES, DecodedMemo
from governed_memory.cache.rules import is_cacheable
from governed_memory.cache.search import SearchCache
from governed_memory.cache.signals import CacheSignals
from governed_memory.cache.store import CacheStore
from governed_memory.cache.timed_store import TimedStore
from governed_memory.capabilities import HealthStatus
from governed_memory.clock import Clock, SystemClock
from governed_memory.events import EventBus
from governed_memory.operation_context import OperationContext
from governed_memory.provider import MemoryProvider
from governed_memory.records import (
    ErasureReceipt,
    MemoryRecord,
    MemoryVersion,
    Page,
    SearchResult,
)
from governed_memory.requests import (
    DeleteUserRequest,
    GetRequest,
    HistoryRequest,
    ListRequest,
    SearchRequest,
)
from governed_memory.scope_revisions import ScopeRevisions

T = TypeVar("T")

DEFAULT_TTL_S: Final = 300.0
DEFAULT_MAX_VALUE_BYTES: Final = 1024 * 1024
DEFAULT_STORE_TIMEOUT_S: Final = 0.25
DEFAULT_QUARANTINE_RETRY_S: Final = 1.0
DEFAULT_ERASE_TIMEOUT_S: Final = 30.0
"""Removing a tenant's entries on ``delete_user`` takes a round trip per batch; it gets
this deadline instead of a lookup's."""


class CachedMemoryProvider(ForwardedFeatures, WriteForwarding, ReviewForwarding,
                           UsageForwarding):
    """Wraps ``inner`` (any provider) with a search cache kept in ``store``.

    Only ``search`` is cached. ``get``, ``list``, ``history``, ``usage`` and replay go
    straight to ``inner``; writes (``add``, ``update``, ``delete``, ``approve``,
    ``reject`` and maintenance) run on ``inner`` and then invalidate.

    Its optional-feature accessors answer with what ``inner`` offers: indexing, the
    event outbox and replay are ``inner``'s own; ``review`` is the wrapper itself, so
    approving and rejecting invalidate (see :mod:`governed_memory.cache.forwarding`).

    ``provider_revision`` should change whenever ``inner`` could rank differently
    (a new version, another configuration); it is part of every key.

    ``events`` is the bus for ``memory.cache.*`` events; a host that builds the wrapper
    before its own bus attaches that bus later with :meth:`attach_events` (the manager
    does, through :func:`attach_cache_events`), so a fail-closed trail covers them.
    """

    _inner: MemoryProvider

    def __init__(
        self,
        inner: MemoryProvider,
        store: CacheStore,
        *,
        events: EventBus | None = None,
        meter_provider: MeterProvider | None = None,
        clock: Clock | None = None,
        ttl_s: float = DEFAULT_TTL_S,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        store_timeout_s: float = DEFAULT_STORE_TIMEOUT_S,
        provider_revision: str | None = None,
        key_by_principal: bool = False,
        decoded_memo_entries: int = DEFAULT_MEMO_ENTRIES,
        quarantine_retry_s: float | None = DEFAULT_QUARANTINE_RETRY_S,
        close_store: bool = True,
        erase_timeout_s: float = DEFAULT_ERASE_TIMEOUT_S,
    ) -> None:
        if (not ttl_s > 0 or not store_timeout_s > 0 or max_value_bytes < 1
                or not erase_timeout_s > 0):
            raise ValueError("ttl_s, store_timeout_s, erase_timeout_s and max_value_bytes "
                             "must be positive")
        if quarantine_retry_s is not None and not quarantine_retry_s > 0:
            raise ValueError("quarantine_retry_s must be positive (or None to disable)")
        self._inner = inner
        self._store = store
        self.name: str = str(getattr(inner, "name", type(inner).__name__))
        self.provider_revision = provider_revision or default_provider_revision(inner)
        clock = clock or SystemClock()
        self._quarantine_retry_s = quarantine_retry_s
        self._close_store = close_store
        signals = CacheSignals(
            events=events, meter_provider=meter_provider, clock=clock,
            provider=self.name, provider_revision=self.provider_revision,
            store=str(getattr(store, "name", type(store).__name__)),
        )
        self._signals = signals
        timed = TimedStore(store, store_timeout_s)
        memo = DecodedMemo(decoded_memo_entries)
        self._invalidation = Invalidation(timed, signals, clock)
        self._erasure = CachedErasure(timed, memo, erase_timeout_s)
        self._searches = SearchCache(
            inner=inner, store=timed, signals=signals, memo=memo,
            invalidation=self._invalidation, erasure=self._erasure, recorder=inner.replay,
            ttl_s=ttl_s, max_value_bytes=max_value_bytes, key_by_principal=key_by_principal)
        self._scope_revisions: ScopeRevisions | None = inner.revisions

    @property
    def store(self) -> CacheStore:
        return self._store

    @property
    def checks_provider_revisions(self) -> bool:
        """Whether pages are checked against the provider's own scope revisions (and
        writes need nothing from the cache), rather than against the store's."""
        return self._scope_revisions is not None

    @property
    def quarantined(self) -> int:
        """How many (tenant, scope) revisions this process currently distrusts."""
        return self._invalidation.quarantined

    @property
    def events(self) -> EventBus | None:
        """The bus ``memory.cache.*`` events go to."""
        return self._signals.events

    def attach_events(self, events: EventBus) -> None:
        """Send cache events to ``events`` from now on (the manager's own bus, so that
        its ``[audit] fail_closed`` covers them as it covers every other event)."""
        self._signals.events = events

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        await self._inner.start()
        self._invalidation.start(self._quarantine_retry_s)

    async def close(self) -> None:
        await self._invalidation.close()
        try:
            await self._inner.close()
        finally:
            if self._close_store:
                await self._store.close()

    async def health(self) -> HealthStatus:
        return await self._inner.health()

    # -- reads that are never cached --------------------------------------------------------

    async def get(self, request: GetRequest, ctx: OperationContext) -> MemoryRecord:
        return await self._inner.get(request, ctx)

    async def list(self, request: ListRequest, ctx: OperationContext) -> Page[MemoryRecord]:
        return await self._inner.list(request, ctx)

    async def history(
        self, request: HistoryRequest, ctx: OperationContext
    ) -> tuple[MemoryVersion, ...]:
        return await self._inner.history(request, ctx)

    # -- writes -------------------------------------------------------------------------

    async def delete_user(
        self, request: DeleteUserRequest, ctx: OperationContext
    ) -> ErasureReceipt:
        """Erase on ``inner``, bump the tenant epoch, then remove the tenant's cached
        answers (they may quote the erased user) and count them into the receipt as
        ``cached_searches``. The epoch bump made every entry of the tenant unreachable,
        so all of them are removed, the tenant's other users' included; they are
        recomputed on their next search.

        If the store cannot remove them (it has no ``erase_tenant``, or fails), the
        receipt carries no ``cached_searches`` count: the entries stay unreachable and
        expire within ``ttl_s``."""
        receipt = await super().delete_user(request, ctx)
        return await self._erasure.erased(tenant_tag(request.tenant_id), receipt)

    async def _write(self, operation: str, call: Callable[[], Awaitable[T]], request: Any,
                     ctx: OperationContext) -> T:
        if self._scope_revisions is not None:
            # The write advances the revisions in its own transaction: committing it is
            # the invalidation, in every process at once.
            return await call()
        return await self._invalidation.write(operation, call, request, ctx)

    # -- search -------------------------------------------------------------------------

    async def search(self, request: SearchRequest, ctx: OperationContext) -> SearchResult:
        if not is_cacheable(request):
            return await self._inner.search(request, ctx)
        # The port validated the request (a provider is never handed one it did not).
        return await self._searches.search(request, ctx, provider_revision=self.provider_revision,
                                           revisions=self._scope_revisions)

    async def retry_quarantined(self) -> int:
        """Retry every failed bump now; returns how many revisions are still held."""
        return await self._invalidation.retry_quarantined()


def attach_cache_events(provider: object, events: EventBus) -> int:
    """Send the ``memory.cache.*`` events of every search cache in ``provider`` (the
    provider itself, or any wrapper reached through ``inner``) to ``events``; returns
    how many caches were attached.

    A host that builds the cache before its own event bus (a profile's ``[cache]``
    wraps the provider before the manager exists) calls this once the bus is built, so
    cache events land in the same sinks and a strict (fail-closed) bus refuses a
    search whose cache events it cannot record, exactly as it refuses any other
    unrecordable event."""
    attached = 0
    for _ in range(8):
        if isinstance(provider, CachedMemoryProvider):
            provider.attach_events(events)
            attached += 1
        if not isinstance(getattr(type(provider), "inner", None), property):
            break
        provider = getattr(provider, "inner")  # noqa: B009 - a property, checked above
    return attached


def default_provider_revision(inner: object) -> str:
    """The wrapped class and its ``revision`` attribute if it has one. Hosts should pass
    something sharper (a package version and a config hash)."""
    kind = type(inner)
    revision = getattr(inner, "revision", None)
    base = f"{kind.__module__}.{kind.__qualname__}"
    return f"{base}@{revision}" if isinstance(revision, str) else base
