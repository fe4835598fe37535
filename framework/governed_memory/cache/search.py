"""One search through the cache: look up, maybe ask the provider, maybe fill.

A page is looked up under the scope revisions read *before* the provider computes an
answer, so a page is never older than its key. With the provider's own revisions
(``inner.revisions``) the key is simply those revisions: any later write moves it, in
every process. With revisions kept in the store, a fill is a compare-and-set on them,
and a search whose revisions moved while it computed is retried once, then answered
uncached. A store failure of any kind bypasses the cache; a provider failure is passed
on, never retried here.

A hit is answered with a retrieval snapshot of its own, recorded by the provider's
``replay`` (never the snapshot of the search that computed the page, which describes
another operation).
"""

from __future__ import annotations

import logging
from typing import Final

import attrs

from governed_memory.cache.codec import (
    CacheDecodeError,
    CachedSearch,
    decode_entry,
    encode_entry,
    valid_until,
)
from governed_memory.cache.erasure import CachedErasure
from governed_memory.cache.invalidation import Invalidation
from governed_memory.cache.keys import revision_names, search_digest, tenant_tag
from governed_memory.cache.memo import DecodedMemo
from governed_memory.cache.signals import CacheSignals
from governed_memory.cache.store import CacheStoreError, CacheValueTooLarge, entry_suffix
from governed_memory.cache.timed_store import TimedStore
from governed_memory.errors import MemoryUnavailableError
from governed_memory.operation_context import OperationContext
from governed_memory.provider import MemoryProvider
from governed_memory.records import SearchResult
from governed_memory.replay import SnapshotReplay
from governed_memory.requests import SearchRequest
from governed_memory.scope_revisions import ScopeRevisions, ScopeState

log = logging.getLogger(__name__)

NO_SNAPSHOT: Final = "no_snapshot"
"""The reason on a hit answered without a retrieval snapshot although the provider
keeps them (it cannot record one for a hit, or storage refused it just now)."""


@attrs.frozen(slots=True, eq=False)
class SearchCache:
    """What every cached search of one wrapper works with."""

    inner: MemoryProvider
    store: TimedStore
    signals: CacheSignals
    memo: DecodedMemo
    invalidation: Invalidation
    erasure: CachedErasure
    recorder: SnapshotReplay | None
    """The provider's ``replay``, which records a hit's own retrieval snapshot."""
    ttl_s: float
    max_value_bytes: int
    key_by_principal: bool

    async def search(self, request: SearchRequest, ctx: OperationContext, *,
                     provider_revision: str, revisions: ScopeRevisions | None) -> SearchResult:
        """``request`` (cacheable and valid) answered from the cache or by ``inner``;
        checked against ``revisions`` (the provider's own) when given, else against the
        store's."""
        return await _Search(self, request, ctx).run(provider_revision, revisions)


class _Search:
    """One cached search: lookup, maybe the provider, maybe a fill; at most twice."""

    def __init__(self, cache: SearchCache, request: SearchRequest,
                 ctx: OperationContext) -> None:
        self.cache = cache
        self.request = request
        self.ctx = ctx
        self.names = revision_names(request.scopes)
        self.hashes = self.names[:-1]
        self.tenant_id = request.scopes[0].tenant_id
        self.tag = tenant_tag(self.tenant_id)

    async def signal(self, outcome: str, reason: str | None = None,
                     count: int | None = None) -> None:
        await self.cache.signals.signal(outcome, ctx=self.ctx, operation="search",
                                        tenant_id=self.tenant_id, scope_hashes=self.hashes,
                                        reason=reason, count=count)

    async def provider(self) -> SearchResult:
        return await self.cache.inner.search(self.request, self.ctx)

    async def bypass(self, reason: str, computed: SearchResult | None = None) -> SearchResult:
        await self.signal("bypassed", reason)
        return computed if computed is not None else await self.provider()

    async def run(self, provider_revision: str, revisions: ScopeRevisions | None
                  ) -> SearchResult:
        cache = self.cache
        try:
            digest = search_digest(self.request, self.ctx, provider_revision,
                                   include_principal_id=cache.key_by_principal)
        except (ValueError, TypeError):
            return await self.bypass("unkeyable")
        if revisions is not None:
            return await self.run_checked(revisions, digest)
        if not await cache.invalidation.trusted(self.tag, self.names, self.ctx):
            return await self.bypass("quarantined")
        computed: SearchResult | None = None
        for attempt in range(2):
            try:
                found = await cache.store.lookup(self.tag, self.names, digest, self.ctx.now)
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
        cache = self.cache
        try:
            state: ScopeState = await revisions.read(self.tenant_id, self.hashes, self.ctx.now)
        except Exception:
            return await self.bypass("revisions_unavailable")
        if len(state.revisions) != len(self.names):
            return await self.bypass("revisions_unavailable")
        await cache.erasure.saw_epoch(self.tag, state.revisions[-1])
        key = digest + ":s" + ".".join(str(revision) for revision in state.revisions)
        try:
            found = await cache.store.lookup(self.tag, (), key, self.ctx.now)
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
        memo = self.cache.memo
        memo_key = f"{self.tag}:{entry_suffix(digest, revisions)}"
        entry = memo.get(memo_key, value)
        if entry is None:
            try:
                entry = decode_entry(value, digest=digest, revisions=revisions,
                                     scope_hashes=self.hashes)
            except CacheDecodeError:
                return await self.bypass("decode_error")
            memo.put(memo_key, value, entry)
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
        recorder = self.cache.recorder
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

    async def fill(self, revisions: tuple[int, ...], horizon: float | None, digest: str,
                   result: SearchResult) -> bool:
        """Store ``result`` if the revisions are unchanged; False only when they moved
        (the caller retries), True when the result should be returned as it is."""
        cache = self.cache
        until = valid_until(result, horizon)
        if until is not None and until <= self.ctx.now:
            return True  # it can serve no one
        try:
            value = encode_entry(result, digest=digest, revisions=revisions,
                                 computed_at=self.ctx.now, until=until)
        except ValueError:
            await self.signal("bypassed", "encode_error")
            return True
        if len(value) > cache.max_value_bytes:
            await self.signal("bypassed", CacheValueTooLarge.reason)
            return True
        if cache.invalidation.held(self.tag, self.names):
            # A write's bump failed while we computed: this answer may predate it.
            await self.signal("bypassed", "quarantined")
            return True
        try:
            names = self.names if revisions else ()
            stored = await cache.store.fill(self.tag, names, revisions, digest, value,
                                            cache.ttl_s)
        except CacheStoreError as exc:
            await self.signal("bypassed", exc.reason)
            return True
        if stored:
            # The answer just stored is what decoding its bytes would give back.
            cache.memo.put(f"{self.tag}:{entry_suffix(digest, revisions)}", value,
                           CachedSearch(result, self.ctx.now, until))
            await self.signal("fill", count=len(result.hits))
        return stored
