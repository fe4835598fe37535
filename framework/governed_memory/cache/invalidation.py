"""Bump after commit, and distrust what a failed bump could not invalidate.

For a provider without scope revisions of its own, a write makes older pages
unreachable only by bumping, in the store, the revision of every scope it touched. The
bump runs after the provider committed and before the write returns, even if the caller
is cancelled meanwhile: the write has happened. A write the provider refused changed
nothing and bumps nothing; one that failed in any other way may have been applied (a
timeout, a lost connection) and bumps all the same.

A bump that fails puts its scopes in quarantine in this process
(:mod:`governed_memory.cache.quarantine`): searches touching them bypass the cache and
retry the bump first, and a background task retries it so that other processes sharing
the store see the write soon too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from governed_memory.cache.keys import EPOCH, tenant_tag
from governed_memory.cache.quarantine import HoldSnapshot, Quarantine
from governed_memory.cache.signals import CacheSignals
from governed_memory.cache.store import CacheStoreError
from governed_memory.cache.timed_store import TimedStore
from governed_memory.clock import Clock
from governed_memory.errors import REFUSALS
from governed_memory.events import AuditUnavailableError
from governed_memory.maintenance import ExpiredPurge, StoreRequest
from governed_memory.operation_context import OperationContext
from governed_memory.scope import Scope

log = logging.getLogger(__name__)

T = TypeVar("T")


class Invalidation:
    """The bumps of one wrapper's writes, and the quarantine of those that failed."""

    def __init__(self, store: TimedStore, signals: CacheSignals, clock: Clock) -> None:
        self._store = store
        self._signals = signals
        self._clock = clock
        self._quarantine = Quarantine()
        self._retry_task: asyncio.Task[None] | None = None
        self._pending: set[asyncio.Task[None]] = set()

    @property
    def quarantined(self) -> int:
        """How many (tenant, scope) revisions this process currently distrusts."""
        return len(self._quarantine)

    # -- writes ---------------------------------------------------------------------------

    async def write(self, operation: str, call: Callable[[], Awaitable[T]], request: Any,
                    ctx: OperationContext) -> T:
        """Run the write ``call``, then bump every scope it touched."""
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
                   for tenant_id, names in _write_targets(request, ctx, result)]
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
            await self._store.bump(tag, names, tuple(sorted({*expiries, *owed})), ctx.now)
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

    # -- quarantine -----------------------------------------------------------------------

    def held(self, tag: str, names: tuple[str, ...]) -> bool:
        """Whether one of ``names`` is quarantined now."""
        return bool(self._quarantine.held(tag, names))

    async def trusted(self, tag: str, names: tuple[str, ...], ctx: OperationContext) -> bool:
        """False while one of ``names`` is quarantined and its bump still fails."""
        snapshot = self._quarantine.snapshot(tag, names)
        if snapshot is None:
            return True
        if not await self._recover(snapshot, ctx):
            return False
        return not self._quarantine.held(tag, names)

    async def retry_quarantined(self) -> int:
        """Retry every failed bump now; returns how many revisions are still held."""
        for snapshot in list(self._quarantine.snapshots()):
            await self._recover(snapshot, None)
        return len(self._quarantine)

    async def _recover(self, snapshot: HoldSnapshot, ctx: OperationContext | None) -> bool:
        now = ctx.now if ctx is not None else self._clock.now()
        try:
            await self._store.bump(snapshot.tag, snapshot.names, snapshot.expiries, now)
        except CacheStoreError:
            return False
        self._quarantine.release(snapshot)
        await self._signals.signal(
            "invalidate", ctx=ctx, operation="search" if ctx is not None else "quarantine_retry",
            tenant_id=snapshot.tenant_id,
            scope_hashes=tuple(name for name in snapshot.names if name != EPOCH),
            reason="quarantine_retry")
        return True

    # -- background work ------------------------------------------------------------------

    def start(self, retry_s: float | None) -> None:
        """Retry quarantined bumps every ``retry_s`` (never, when it is ``None``)."""
        if retry_s is not None and self._retry_task is None:
            self._retry_task = asyncio.create_task(self._retry_forever(retry_s),
                                                   name="governed-memory-cache-quarantine")

    async def close(self) -> None:
        """Stop retrying, and wait for the bumps of writes that have returned."""
        task, self._retry_task = self._retry_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)

    async def _retry_forever(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            if not self._quarantine:
                continue
            try:
                await self.retry_quarantined()
            except Exception:  # the loop must outlive any one failure
                log.exception("search cache: quarantine retry failed")


def _write_targets(request: Any, ctx: OperationContext,
                   result: object = None) -> list[tuple[str, tuple[str, ...]]]:
    """(tenant, revision names) a write touched: its exact scopes, or — when it names
    none, as ``delete_user`` does — the tenant epoch.

    A store-wide purge of expired records names no scope either: the scopes are those
    its result says it removed records from, grouped by tenant. If it failed, nothing is
    known to bump, and nothing needs to be: every record it may have removed had
    expired, and a cached page is served only until the first expiry among its hits."""
    if isinstance(result, ExpiredPurge):
        touched: dict[str, dict[str, None]] = {}
        for owner, scope_hash in result.scopes:
            touched.setdefault(owner, {})[scope_hash] = None
        return [(owner, tuple(names)) for owner, names in touched.items()]
    if isinstance(request, StoreRequest):
        return []
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
