"""Erasure that no one asked for record by record: a whole scope, a data subject, or
what has expired (in one scope, or in every scope: the maintenance round's purge).

Large erasures commit in batches of ``ERASURE_BATCH`` records so none holds the write
lock long; erasing a user keeps its progress in storage, so the receipt accounts for
every committed batch, also those of an interrupted earlier run, and a user of fewer
records than one batch is erased atomically with the receipt's event. After the last
batch the backend scrubs what it can of erased bytes (SQLite's write-ahead log).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

from governed_memory.clock import Clock
from governed_memory.cursor import decode_cursor, encode_cursor
from governed_memory.errors import MemoryUnavailableError
from governed_memory.maintenance import ExpiredPurge, PurgeExpiredAllRequest
from governed_memory.operation_context import OperationContext
from governed_memory.records import CleanupPage, ErasureReceipt
from governed_memory.requests import DeleteAllRequest, DeleteUserRequest, PurgeExpiredRequest

from governed_memory_native.replaying import NativeReplay
from governed_memory_native.retrieval.snapshots import tombstone
from governed_memory_native.storage.port import ReadTransaction, Removal, WriteTransaction
from governed_memory_native.units import Units

ERASURE_BATCH: Final = 500
"""Records erased per transaction, so erasing a large user never holds the write lock long."""


class NativeErasure:
    """Whole-scope, whole-user and expiry erasure, as units of work of the provider."""

    def __init__(self, units: Units, replay: NativeReplay, clock: Clock) -> None:
        self._units = units
        self._replay = replay
        self._clock = clock

    async def delete_all(self, request: DeleteAllRequest, ctx: OperationContext) -> int:
        self._units.require_open()
        scope_hash = request.scope.scope_hash

        async def unit(tx: WriteTransaction) -> int:
            removed = Removal()
            while ids := await tx.records.ids_in_scope(scope_hash, None, ERASURE_BATCH):
                removed += await tx.erasure.erase(ids)
            removed += await tx.idempotency.erase(scope_hash=scope_hash)
            return removed.records

        return await self._units.write(ctx, unit, request.scope.tenant_id)

    async def delete_user(
        self, request: DeleteUserRequest, ctx: OperationContext
    ) -> ErasureReceipt:
        self._units.require_open()
        await self._replay.flush_snapshots()  # queued snapshots naming the user are erased too

        async def unit(tx: WriteTransaction) -> ErasureReceipt | None:
            ids = await tx.records.ids_of_user(request.tenant_id, request.user_id,
                                              ERASURE_BATCH)
            batch = await tx.erasure.erase(ids) if ids else Removal()
            if len(ids) == ERASURE_BATCH:
                await tx.erasure.add_progress(request.tenant_id, request.user_id,
                                              batch, ctx.now)
                return None
            removed, began = await tx.erasure.take_progress(request.tenant_id,
                                                            request.user_id)
            removed += batch
            removed += await tx.idempotency.erase(
                tenant_user=(request.tenant_id, request.user_id)
            )
            snapshots = await tx.snapshots.erase_of_user(
                request.tenant_id, request.user_id,
                tombstone(request.tenant_id, ctx.now, ctx.operation_id))
            # Every search cache of the tenant, in any process, is stale from this
            # commit on: the user's records may have been in any of its scopes.
            await tx.revisions.advance_epoch(request.tenant_id,
                                             sorted(removed.scope_hashes))
            return ErasureReceipt(
                request_id=ctx.operation_id, tenant_id=request.tenant_id,
                user_id=request.user_id,
                counts={"records": removed.records, "versions": removed.versions,
                        "index_entries": removed.index_entries,
                        "idempotency_entries": removed.idempotency_entries,
                        "retrieval_snapshots": snapshots},
                scope_hashes=tuple(sorted(removed.scope_hashes)),
                started_at=ctx.now if began is None else min(began, ctx.now),
                completed_at=max(ctx.now, self._clock.now()),
            ).sealed()

        while True:
            # Batches commit one by one. Each but the last adds what it removed to the
            # user's stored progress in its own transaction; the last (fewer than a full
            # batch left) takes that progress, erases the idempotency entries and stores
            # the receipt's event. So the receipt accounts for every committed batch,
            # also those of an earlier run that was interrupted, and a user of fewer
            # than ERASURE_BATCH records is erased atomically with its event.
            receipt = await self._units.write(ctx, unit, request.tenant_id)
            if receipt is None:
                continue
            # Erased rows were zeroed in the database file at commit; copies of their
            # bytes in older WAL frames go only with a checkpoint that truncates the WAL.
            if not await self._units.backend.scrub():
                raise MemoryUnavailableError(
                    "the user's records are erased, but another connection keeps the "
                    "write-ahead log in use, so erased bytes may remain in it; retry "
                    "delete_user to finish")
            return receipt

    async def purge_expired(
        self, request: PurgeExpiredRequest, ctx: OperationContext
    ) -> CleanupPage:
        """Erase expired records of one scope, a page at a time.

        Unlike a hard delete, purging leaves no idempotency tombstones: an expired record
        is gone by design rather than by anyone's request, so a retry arriving after its
        expiry is a new write, and purging is what keeps the idempotency table bounded
        for expiring data.
        """
        self._units.require_open()
        scope_hash = request.scope.scope_hash
        after = (decode_cursor(request.after, "purge", scope_hash, field="after")
                 if request.after is not None else None)

        async def unit(tx: WriteTransaction) -> CleanupPage:
            inspected = await tx.records.scan(scope_hash, after, request.limit)
            expired = [record.id for record in inspected if record.is_expired(ctx.now)]
            removed = await tx.erasure.erase(expired) if expired else Removal()
            cursor = (encode_cursor("purge", scope_hash, inspected[-1].id)
                      if len(inspected) == request.limit else None)
            return CleanupPage(deleted=removed.records, next_cursor=cursor)

        return await self._units.write(ctx, unit, request.scope.tenant_id)

    async def purge_expired_all(self, request: PurgeExpiredAllRequest,
                                ctx: OperationContext) -> ExpiredPurge:
        """Erase up to ``request.limit`` expired records of every scope, earliest expiry
        first, exactly as :meth:`purge_expired` erases them from one scope.

        The batch is found in one read (an index on ``expires_at`` serves it), then
        erased tenant by tenant, each in a unit under that tenant's writer lock (so a
        store-wide purge never stops every tenant's writers, as a global unit would on
        PostgreSQL). Each unit reads again which of its records are still there and
        still expired: another worker, in this process or another, may have erased them
        since, and a record is counted only by the unit that erased it. Each unit
        advances the revisions of the scopes it erased from, as every erasure does.
        """
        self._units.require_open()
        now = ctx.now

        async def candidates(tx: ReadTransaction) -> list[tuple[str, str]]:
            return await tx.records.expired(now, request.limit)

        found = await self._units.backend.run_read(candidates)
        by_tenant: dict[str, list[str]] = {}
        for record_id, tenant_id in found:
            by_tenant.setdefault(tenant_id, []).append(record_id)
        removed = Removal()
        scopes: set[tuple[str, str]] = set()
        for tenant_id, ids in by_tenant.items():
            batch = await self._units.write(ctx, _erase_expired(tenant_id, ids, now),
                                            tenant_id)
            removed += batch
            scopes.update((tenant_id, scope_hash) for scope_hash in batch.scope_hashes)
        return ExpiredPurge(records=removed.records, versions=removed.versions,
                            index_entries=removed.index_entries,
                            idempotency_entries=removed.idempotency_entries,
                            scopes=scopes, more=len(found) == request.limit)


def _erase_expired(tenant_id: str, record_ids: list[str],
                   now: float) -> Callable[[WriteTransaction], Awaitable[Removal]]:
    """The unit erasing what is left of one tenant's share of a purge batch."""

    async def unit(tx: WriteTransaction) -> Removal:
        still = await tx.records.expired_among(tenant_id, record_ids, now)
        return await tx.erasure.erase(still) if still else Removal()

    return unit
