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

A bump that fails puts its scopes in quarantine in this process: lookups touching
them bypass the cache and retry the bump first, and a background task retries it so
other processes sharing the store see the write soon too. A store failure of any kind
bypasses the cache; a provider failure is passed on, never retried here.

A hit is answered with a retrieval snapshot of its own (see
:mod:`governed_memory.cache.snapshots`), and cache events go to the bus the host
attaches, fail-closed when that bus is strict.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

import attrs
from opentelemetry.metrics import MeterProvider

from governed_memory.cache.codec import (
    CacheDecodeError,
    CachedSearch,
    decode_entry,
    encode_entry,
    valid_until,
)
from governed_memory.cache.forwarding import ForwardedFeatures, ReviewForwarding, UsageForwarding
from governed_memory.cache.keys import EPOCH, revision_names, search_digest, tenant_tag
from governed_memory.cache.memo import DEFAULT_MEMO_ENTRIES, DecodedMemo
from governed_memory.cache.quarantine import HoldSnapshot, Quarantine
from governed_memory.cache.rules import is_cacheable
from governed_memory.cache.signals import CacheSignals
from governed_memory.cache.store import (
    CacheStore,
    CacheStoreError,
    CacheStoreTimeout,
    CacheValueTooLarge,
    ErasingCacheStore,
    entry_suffix,
)
from governed_memory.capabilities import Capabilities, HealthStatus
from governed_memory.clock import Clock, SystemClock
from governed_memory.errors import (
    REFUSALS,
    MemoryUnavailableError,
    MemoryValidationError,
)
from governed_memory.events import AuditUnavailableError, EventBus
from governed_memory.operation_context import OperationContext
from governed_memory.provider import MemoryProvider
from governed_memory.records import (
    CleanupPage,
    DeleteResult,
    ErasureReceipt,
    MemoryRecord,
    MemoryVersion,
    Page,
    SearchResult,
)
from governed_memory.replay import SnapshotReplay
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
from governed_memory.scope import Scope
from governed_memory.scope_revisions import ScopeRevisions, ScopeState

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_TTL_S: Final = 300.0
DEFAULT_MAX_VALUE_BYTES: Final = 1024 * 1024
DEFAULT_STORE_TIMEOUT_S: Final = 0.25
DEFAULT_QUARANTINE_RETRY_S: Final = 1.0
NO_SNAPSHOT: Final = "no_snapshot"
"""The reason on a hit answered without a retrieval snapshot although the provider
keeps them (it cannot record one for a hit, or storage refused it just now)."""
_MAX_EPOCHS: Final = 100_000
"""Tenants whose last-seen epoch a process remembers (an LRU)."""
DEFAULT_ERASE_TIMEOUT_S: Final = 30.0
"""Removing a tenant's entries on ``delete_user`` takes a round trip per batch; it gets
this deadline instead of a lookup's."""


"""The class built for each combination of optional operations (one per combination
per process)."""


class CachedMemoryProvider(ForwardedFeatures, ReviewForwarding, UsageForwarding):
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
        self._clock: Clock = clock or SystemClock()
        self._ttl_s = ttl_s
        self._max_value_bytes = max_value_bytes
        self._store_timeout_s = store_timeout_s
        self._erase_timeout_s = erase_timeout_s
        self._key_by_principal = key_by_principal
        self._quarantine_retry_s = quarantine_retry_s
        self._close_store = close_store
        self._quarantine = Quarantine()
        self._signals = CacheSignals(
            events=events, meter_provider=meter_provider, clock=self._clock,
            provider=self.name, provider_revision=self.provider_revision,
            store=str(getattr(store, "name", type(store).__name__)),
        )
        self._retry_task: asyncio.Task[None] | None = None
        self._pending: set[asyncio.Task[None]] = set()
        self._memo = DecodedMemo(decoded_memo_entries)
        self._recorder: SnapshotReplay | None = inner.replay
        self._scope_revisions: ScopeRevisions | None = inner.revisions
        self._epochs: OrderedDict[str, int] = OrderedDict()
        """The tenant epoch this process last read, by tenant tag: when another process
        erases a user, the first lookup here that sees the new epoch drops the tenant's
        entries from a process-local store, instead of leaving the erased content in
        memory, unreachable, until its TTL."""

    @property
    def inner(self) -> MemoryProvider:
        return self._inner

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
        return len(self._quarantine)

    @property
    def events(self) -> EventBus | None:
        """The bus ``memory.cache.*`` events go to."""
        return self._signals.events

    def attach_events(self, events: EventBus) -> None:
        """Send cache events to ``events`` from now on (the manager's own bus, so that
        its ``[audit] fail_closed`` covers them as it covers every other event)."""
        self._signals.events = events

    # -- lifecycle ----------------------------------------------------------------------

    def capabilities(self) -> Capabilities:
        return self._inner.capabilities()

    async def start(self) -> None:
        await self._inner.start()
        if self._quarantine_retry_s is not None and self._retry_task is None:
            self._retry_task = asyncio.create_task(self._retry_forever(self._quarantine_retry_s),
                                                   name="governed-memory-cache-quarantine")

    async def close(self) -> None:
        task, self._retry_task = self._retry_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
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

    async def add(self, request: AddRequest, ctx: OperationContext) -> MemoryRecord:
        return await self._write("add", lambda: self._inner.add(request, ctx), request, ctx)

    async def update(self, request: UpdateRequest, ctx: OperationContext) -> MemoryRecord:
        return await self._write("update", lambda: self._inner.update(request, ctx), request, ctx)

    async def delete(self, request: DeleteRequest, ctx: OperationContext) -> DeleteResult:
        return await self._write("delete", lambda: self._inner.delete(request, ctx), request, ctx)

    async def delete_all(self, request: DeleteAllRequest, ctx: OperationContext) -> int:
        return await self._write("delete_all", lambda: self._inner.delete_all(request, ctx),
                                 request, ctx)

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
        receipt = await self._write("delete_user",
                                    lambda: self._inner.delete_user(request, ctx), request, ctx)
        self._memo.drop_tenant(tenant_tag(request.tenant_id))
        if not isinstance(self._store, ErasingCacheStore):
            return receipt
        if not self._store.shared:
            # This process's entries go now, but the receipt claims nothing: other
            # processes' stores are out of reach (their pages are unreachable already,
            # by the epoch in storage, and are dropped at their next lookup).
            with contextlib.suppress(CacheStoreError):
                await self._store_call(self._store.erase_tenant(tenant_tag(request.tenant_id)),
                                       timeout_s=self._erase_timeout_s)
            return receipt
        try:
            dropped = await self._store_call(
                self._store.erase_tenant(tenant_tag(request.tenant_id)),
                timeout_s=self._erase_timeout_s)
        except CacheStoreError as exc:
            # The epoch bump already made them unreachable; they age out by TTL.
            log.warning("search cache: could not remove erased tenant entries (%s)",
                        exc.reason)
            return receipt
        counts = {**receipt.counts, "cached_searches": dropped}
        return attrs.evolve(receipt, counts=counts).sealed()

    async def purge_expired(
        self, request: PurgeExpiredRequest, ctx: OperationContext
    ) -> CleanupPage:
        return await self._write("purge_expired",
                                 lambda: self._inner.purge_expired(request, ctx), request, ctx)

    async def _write(self, operation: str, call: Callable[[], Awaitable[T]], request: Any,
                     ctx: OperationContext) -> T:
        if self._scope_revisions is not None:
            # The write advances the revisions in its own transaction: committing it is
            # the invalidation, in every process at once.
            return await call()
        try:
            result = await call()
        except REFUSALS:  # refused: storage unchanged, nothing to invalidate
            raise
        except BaseException:
            # It may have been applied (a timeout, a lost connection, a cancellation).
            try:
                await self._invalidate_shielded(operation, request, ctx, None)
            except AuditUnavailableError:
                # The write's own failure says more; the bumps themselves were made.
                log.error("search cache: the audit trail could not record the "
                          "invalidation after a failed %s", operation)
            raise
        try:
            await self._invalidate_shielded(operation, request, ctx, result)
        except AuditUnavailableError as exc:
            raise AuditUnavailableError(
                f"{operation} was applied and the search cache invalidated, but the audit "
                "trail could not record the invalidation; retry with the same idempotency "
                "key to get the result once the trail is back") from exc
        return result

    async def _invalidate_shielded(self, operation: str, request: Any, ctx: OperationContext,
                                   result: object) -> None:
        """Bump even if the caller is cancelled meanwhile: the write has happened."""
        task = asyncio.create_task(self._invalidate(operation, request, ctx, result))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        await asyncio.shield(task)

    async def _invalidate(self, operation: str, request: Any, ctx: OperationContext,
                          result: object) -> None:
        """Bump every tenant the write touched, then emit one event per tenant and raise
        the first one a strict bus refused: an unrecordable event must never leave a
        tenant unbumped."""
        expiries = _expiries(request, result)
        signals = [await self._bump_one(operation, ctx, tenant_id, names, expiries)
                   for tenant_id, names in _write_targets(request, ctx)]
        refused: AuditUnavailableError | None = None
        for signal in signals:
            try:
                await signal()
            except AuditUnavailableError as exc:
                refused = refused or exc
        if refused is not None:
            raise refused

    async def _bump_one(self, operation: str, ctx: OperationContext, tenant_id: str,
                        names: tuple[str, ...], expiries: tuple[float, ...]
                        ) -> Callable[[], Awaitable[None]]:
        """Bump one tenant's names (or quarantine them); return the event to emit."""
        tag = tenant_tag(tenant_id)
        hashes = tuple(name for name in names if name != EPOCH)
        before = self._quarantine.snapshot(tag, names)
        owed = before.expiries if before is not None else ()
        outcome, reason = "invalidate", operation
        try:
            await self._store_call(self._store.bump(
                tag, names, tuple(sorted({*expiries, *owed})), ctx.now))
        except CacheStoreError as exc:
            self._quarantine.hold(tenant_id, tag, names, expiries)
            outcome, reason = "quarantine", exc.reason
        else:
            if before is not None:
                self._quarantine.release(before)

        async def signal() -> None:
            await self._signals.signal(outcome, ctx=ctx, operation=operation,
                                       tenant_id=tenant_id, scope_hashes=hashes,
                                       reason=reason)

        return signal

    # -- search -------------------------------------------------------------------------

    async def search(self, request: SearchRequest, ctx: OperationContext) -> SearchResult:
        if not is_cacheable(request):
            return await self._inner.search(request, ctx)
        try:
            request.validate()
        except MemoryValidationError:
            return await self._inner.search(request, ctx)  # the provider refuses it
        return await _Search(self, request, ctx).run()

    # -- quarantine -----------------------------------------------------------------------

    async def retry_quarantined(self) -> int:
        """Retry every failed bump now; returns how many revisions are still held."""
        for snapshot in list(self._quarantine.snapshots()):
            await self._recover(snapshot, None)
        return len(self._quarantine)

    async def _recover(self, snapshot: HoldSnapshot, ctx: OperationContext | None) -> bool:
        now = ctx.now if ctx is not None else self._clock.now()
        try:
            await self._store_call(self._store.bump(snapshot.tag, snapshot.names,
                                                    snapshot.expiries, now))
        except CacheStoreError:
            return False
        self._quarantine.release(snapshot)
        await self._signals.signal(
            "invalidate", ctx=ctx, operation="search" if ctx is not None else "quarantine_retry",
            tenant_id=snapshot.tenant_id,
            scope_hashes=tuple(name for name in snapshot.names if name != EPOCH),
            reason="quarantine_retry")
        return True

    async def _retry_forever(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            if not self._quarantine:
                continue
            try:
                await self.retry_quarantined()
            except Exception:  # the loop must outlive any one failure
                log.exception("search cache: quarantine retry failed")

    # -- store access ---------------------------------------------------------------------

    async def _store_call(self, awaitable: Awaitable[T], *,
                          timeout_s: float | None = None) -> T:
        """One store operation under the cache's own deadline; every failure becomes a
        ``CacheStoreError`` so callers have exactly one thing to bypass on."""
        deadline = self._store_timeout_s if timeout_s is None else timeout_s
        try:
            async with asyncio.timeout(deadline):
                return await awaitable
        except CacheStoreError:
            raise
        except TimeoutError:
            raise CacheStoreTimeout(f"no answer within {deadline:g} s") from None
        except Exception as exc:
            raise CacheStoreError(type(exc).__name__) from exc


    async def _saw_epoch(self, tag: str, epoch: int) -> None:
        """Drop a tenant's entries from a process-local store once its epoch moved (a
        user of it was erased, possibly by another process)."""
        seen = self._epochs.get(tag)
        self._epochs[tag] = epoch
        self._epochs.move_to_end(tag)
        if len(self._epochs) > _MAX_EPOCHS:
            self._epochs.popitem(last=False)
        if seen is None or seen == epoch:
            return
        self._memo.drop_tenant(tag)
        if not self._store.shared and isinstance(self._store, ErasingCacheStore):
            with contextlib.suppress(CacheStoreError):
                await self._store_call(self._store.erase_tenant(tag),
                                       timeout_s=self._erase_timeout_s)


class _Search:
    """One cached search: lookup, maybe the provider, maybe a fill; at most twice."""

    def __init__(self, owner: CachedMemoryProvider, request: SearchRequest,
                 ctx: OperationContext) -> None:
        self.owner = owner
        self.request = request
        self.ctx = ctx
        self.names = revision_names(request.scopes)
        self.hashes = self.names[:-1]
        self.tenant_id = request.scopes[0].tenant_id
        self.tag = tenant_tag(self.tenant_id)

    async def signal(self, outcome: str, reason: str | None = None,
                     count: int | None = None) -> None:
        await self.owner._signals.signal(outcome, ctx=self.ctx, operation="search",
                                         tenant_id=self.tenant_id, scope_hashes=self.hashes,
                                         reason=reason, count=count)

    async def provider(self) -> SearchResult:
        return await self.owner._inner.search(self.request, self.ctx)

    async def bypass(self, reason: str, computed: SearchResult | None = None) -> SearchResult:
        await self.signal("bypassed", reason)
        return computed if computed is not None else await self.provider()

    async def run(self) -> SearchResult:
        owner = self.owner
        try:
            digest = search_digest(self.request, self.ctx, owner.provider_revision,
                                   include_principal_id=owner._key_by_principal)
        except (ValueError, TypeError):
            return await self.bypass("unkeyable")
        if owner._scope_revisions is not None:
            return await self.run_checked(owner._scope_revisions, digest)
        if not await self.trusted():
            return await self.bypass("quarantined")
        computed: SearchResult | None = None
        for attempt in range(2):
            try:
                found = await owner._store_call(
                    owner._store.lookup(self.tag, self.names, digest, self.ctx.now))
            except CacheStoreError as exc:
                return await self.bypass(exc.reason, computed)
            if found.value is not None:
                served = await self.serve(found.value, digest, found.revisions)
                if served is not None:
                    return served
            else:
                await self.signal("miss", "revision_moved" if attempt else "absent")
            computed = await self.provider()
            if await self.fill(found.revisions, found.horizon, digest, computed):
                return computed
        return await self.bypass("revision_moved", computed)

    async def run_checked(self, revisions: ScopeRevisions, digest: str) -> SearchResult:
        """A search checked against the provider's own revisions: read them (one point
        read), look for a page stored under exactly them, else compute and store it
        under them. No compare-and-set is needed: the revisions were read before the
        provider computed, so the page is at least as new as its key, and any later
        write moves the key for every process."""
        owner = self.owner
        try:
            state: ScopeState = await revisions.read(self.tenant_id, self.hashes, self.ctx.now)
        except Exception:
            return await self.bypass("revisions_unavailable")
        if len(state.revisions) != len(self.names):
            return await self.bypass("revisions_unavailable")
        await owner._saw_epoch(self.tag, state.revisions[-1])
        key = digest + ":s" + ".".join(str(revision) for revision in state.revisions)
        try:
            found = await owner._store_call(owner._store.lookup(self.tag, (), key, self.ctx.now))
        except CacheStoreError as exc:
            return await self.bypass(exc.reason)
        if found.value is not None:
            served = await self.serve(found.value, key, ())
            if served is not None:
                return served
        else:
            await self.signal("miss", "absent")
        computed = await self.provider()
        await self.fill((), state.horizon, key, computed)
        return computed

    async def serve(self, value: bytes, digest: str,
                    revisions: tuple[int, ...]) -> SearchResult | None:
        """The stored page as this operation's answer, or ``None`` (a miss, signalled)
        when it no longer serves ``now``; a value that cannot be trusted bypasses."""
        owner = self.owner
        memo_key = f"{self.tag}:{entry_suffix(digest, revisions)}"
        entry = owner._memo.get(memo_key, value)
        if entry is None:
            try:
                entry = decode_entry(value, digest=digest, revisions=revisions,
                                     scope_hashes=self.hashes)
            except CacheDecodeError:
                return await self.bypass("decode_error")
            owner._memo.put(memo_key, value, entry)
        if entry.serves(self.ctx.now):
            served, why = await self.served(entry.result)
            await self.signal("hit", why, count=len(served.hits))
            return served
        await self.signal("miss", "outside_window")
        return None

    async def served(self, cached: SearchResult) -> tuple[SearchResult, str | None]:
        """The cached answer as this operation's own: with a retrieval snapshot that
        describes this operation, recorded by the provider, or with none (and the reason,
        for the hit event) when one cannot be recorded. Never with the snapshot of the
        search that computed it, which describes another operation."""
        if cached.snapshot_id is None:
            return cached, None  # the provider stores no snapshots: nothing to describe
        recorder = self.owner._recorder
        if recorder is None:
            return attrs.evolve(cached, snapshot_id=None), NO_SNAPSHOT
        try:
            snapshot_id = await recorder.record_snapshot(self.request, self.ctx, cached)
        except MemoryUnavailableError:
            # As the provider's own search does: answer, without a snapshot to replay.
            log.warning("search cache: retrieval snapshot of a hit not stored "
                        "(storage unavailable for writes)")
            return attrs.evolve(cached, snapshot_id=None), NO_SNAPSHOT
        return attrs.evolve(cached, snapshot_id=snapshot_id), None if snapshot_id else NO_SNAPSHOT

    async def trusted(self) -> bool:
        """False while a name of this search is quarantined and its bump still fails."""
        snapshot = self.owner._quarantine.snapshot(self.tag, self.names)
        if snapshot is None:
            return True
        if not await self.owner._recover(snapshot, self.ctx):
            return False
        return not self.owner._quarantine.held(self.tag, self.names)

    async def fill(self, revisions: tuple[int, ...], horizon: float | None, digest: str,
                   result: SearchResult) -> bool:
        """Store ``result`` if the revisions are unchanged; False only when they moved
        (the caller retries), True when the result should be returned as it is."""
        owner = self.owner
        until = valid_until(result, horizon)
        if until is not None and until <= self.ctx.now:
            return True  # it can serve no one
        try:
            value = encode_entry(result, digest=digest, revisions=revisions,
                                 computed_at=self.ctx.now, until=until)
        except ValueError:
            await self.signal("bypassed", "encode_error")
            return True
        if len(value) > owner._max_value_bytes:
            await self.signal("bypassed", CacheValueTooLarge.reason)
            return True
        if owner._quarantine.held(self.tag, self.names):
            # A write's bump failed while we computed: this answer may predate it.
            await self.signal("bypassed", "quarantined")
            return True
        try:
            names = self.names if revisions else ()
            stored = await owner._store_call(owner._store.fill(
                self.tag, names, revisions, digest, value, owner._ttl_s))
        except CacheStoreError as exc:
            await self.signal("bypassed", exc.reason)
            return True
        if stored:
            # The answer just stored is what decoding its bytes would give back.
            owner._memo.put(f"{self.tag}:{entry_suffix(digest, revisions)}", value,
                            CachedSearch(result, self.ctx.now, until))
            await self.signal("fill", count=len(result.hits))
        return stored


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


def _write_targets(request: Any, ctx: OperationContext) -> list[tuple[str, tuple[str, ...]]]:
    """(tenant, revision names) a write touched: its exact scopes, or — when it names
    none, as ``delete_user`` does — the tenant epoch."""
    try:
        scopes = tuple(scope for scope in request.target_scopes() if isinstance(scope, Scope))
    except Exception:  # a malformed request that still reached a provider
        scopes = ()
    if scopes:
        by_tenant: dict[str, dict[str, None]] = {}
        for scope in scopes:
            by_tenant.setdefault(scope.tenant_id, {})[scope.scope_hash] = None
        return [(tenant, tuple(names)) for tenant, names in by_tenant.items()]
    tenant = getattr(request, "tenant_id", None)
    return [(tenant if isinstance(tenant, str) else ctx.principal.tenant_id, (EPOCH,))]


def _expiries(request: Any, result: object) -> tuple[float, ...]:
    """Expiry instants a write may have put into its scope, as marks for the store."""
    instants: set[float] = set()
    for source in (request, result):
        value = getattr(source, "expires_at", None)
        if isinstance(value, int | float) and not isinstance(value, bool):
            instants.add(float(value))
    return tuple(sorted(instants))


def default_provider_revision(inner: object) -> str:
    """The wrapped class and its ``revision`` attribute if it has one. Hosts should pass
    something sharper (a package version and a config hash)."""
    kind = type(inner)
    revision = getattr(inner, "revision", None)
    base = f"{kind.__module__}.{kind.__qualname__}"
    return f"{base}@{revision}" if isinstance(revision, str) else base
