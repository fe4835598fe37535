"""The record writes: add, update and delete, each one unit of work with its version,
its idempotency entry, its index upkeep and its ``committed`` event.

What a write decides before it takes the write lock (its vector, a similar record for
similarity dedup) is computed outside the transaction; everything it checks against
stored state (a replay, a duplicate, the key's holder, a link, the expected revision) is
checked inside it, so two writers racing on one scope cannot both win.
"""

from __future__ import annotations

import attrs
from governed_memory.ids import new_revision
from governed_memory.limits import check_metadata_budget
from governed_memory.operation_context import OperationContext
from governed_memory.provider_kit import (
    apply_update,
    check_key_holder,
    check_revision,
    erased_key_holder,
    new_record,
    raise_missing,
    stamped_provenance,
)
from governed_memory.records import (
    DeleteResult,
    IndexState,
    MemoryRecord,
    MemoryVersion,
    RecordStatus,
    VersionOperation,
    content_hash,
)
from governed_memory.requests import AddRequest, DedupMode, DeleteRequest, UpdateRequest

from governed_memory_native.retrieval.indexer import Indexer
from governed_memory_native.searching import NativeSearch
from governed_memory_native.storage.port import WriteTransaction
from governed_memory_native.units import Units, commit_version, require_in_scope


class RecordWrites:
    """Add, update and delete over the provider's units of work."""

    def __init__(self, units: Units, indexer: Indexer, search: NativeSearch) -> None:
        self._units = units
        self._indexer = indexer
        self._search = search

    async def add(self, request: AddRequest, ctx: OperationContext) -> MemoryRecord:
        self._units.require_open()
        scope = request.scope
        digest = content_hash(request.content)
        prepared = await self._indexer.prepare(request.content)  # outside the write lock
        similar = (await self._search.nearest(scope.scope_hash, prepared, ctx.now)
                   if request.dedup is DedupMode.SIMILARITY and prepared is not None
                   else None)

        async def unit(tx: WriteTransaction) -> MemoryRecord:
            replay = await self._units.replayed_record(tx, scope.scope_hash, request, ctx)
            if replay is not None:
                return replay
            duplicate = await self._duplicate_of(tx, request, digest, similar, ctx)
            if duplicate is not None:
                await self._units.remember(tx, request, scope, duplicate, ctx)
                return duplicate
            provenance = stamped_provenance(request, ctx)
            if request.supersedes is not None:
                await require_in_scope(tx, scope.scope_hash, request.supersedes, "supersedes",
                                        ctx.now)
            if request.key is not None:
                holder = await tx.records.by_key(scope.scope_hash, request.key)
                if check_key_holder(holder, ctx.now):
                    await tx.erasure.erase([holder.id])
                    ctx.notes.add(erased_key_holder(holder.id))
            record = new_record(request, ctx, provenance, digest=digest,
                                index_state=self._indexer.state_after_write(None, digest))
            # One copy, made here: storage keeps it (the request's values are the
            # caller's), and the caller gets ``record``, which storage does not hold.
            stored = self._units.owned(record)
            await tx.records.insert(stored)
            await tx.versions.append(
                MemoryVersion(stored, VersionOperation.ADD, ctx.now, ctx.operation_id)
            )
            await self._indexer.after_write(tx, stored, None, prepared, ctx.now)
            await self._units.remember(tx, request, scope, record, ctx)
            return record

        # A replay and a duplicate are copies already (``Units.replayed_record``,
        # ``_duplicate_of``).
        return await self._units.write(ctx, unit, request.scope.tenant_id)

    async def _duplicate_of(self, tx: WriteTransaction, request: AddRequest, digest: str,
                            similar: tuple[str, float] | None,
                            ctx: OperationContext) -> MemoryRecord | None:
        """The live record this add would duplicate under the profile's ``[write]
        dedup`` (same key, or both without one), noted for the trail; else ``None``."""
        if request.dedup is DedupMode.OFF:
            return None
        scope_hash = request.scope.scope_hash
        found = await tx.records.canonical(scope_hash, digest, request.key, ctx.now)
        reason = "same content"
        if found is None and similar is not None and similar[1] >= request.dedup_threshold:
            candidate = await tx.records.get(scope_hash, similar[0])
            if candidate is not None and candidate.is_visible(ctx.now):
                found, reason = candidate, f"similarity {similar[1]:.3f}"
        if found is None or found.key != request.key:
            return None
        ctx.notes.add(f"deduplicated: {reason} as record {found.id}")
        return self._units.owned(found)

    async def update(self, request: UpdateRequest, ctx: OperationContext) -> MemoryRecord:
        self._units.require_open()
        scope_hash = request.scope.scope_hash
        prepared = await self._indexer.prepare(request.content)  # outside the write lock

        async def unit(tx: WriteTransaction) -> MemoryRecord:
            replay = await self._units.replayed_record(tx, scope_hash, request, ctx)
            if replay is not None:
                return replay
            current = await tx.records.get(scope_hash, request.record_id)
            if current is None or not current.is_visible(ctx.now):
                raise_missing(request.expected_revision)
            check_revision(current, request.expected_revision)
            if request.superseded_by is not None:
                await require_in_scope(tx, scope_hash, request.superseded_by, "superseded_by",
                                        ctx.now)
            updated = apply_update(current, request, ctx.now)
            updated = self._units.owned(attrs.evolve(
                updated, index_state=self._indexer.state_after_write(current,
                                                                     updated.content_hash)))
            # The request alone cannot see the stored provenance that shares the budget.
            check_metadata_budget(updated.metadata, updated.provenance.as_dict())
            await commit_version(tx, current, updated, VersionOperation.UPDATE, ctx)
            await self._indexer.after_write(tx, updated, current, prepared, ctx.now)
            await self._units.remember(tx, request, request.scope, updated, ctx)
            return updated

        return self._units.owned(await self._units.write(ctx, unit, request.scope.tenant_id))

    async def delete(self, request: DeleteRequest, ctx: OperationContext) -> DeleteResult:
        self._units.require_open()
        scope_hash = request.scope.scope_hash

        async def unit(tx: WriteTransaction) -> DeleteResult:
            replay = await self._units.replayed_removal(tx, scope_hash, request, ctx)
            if replay is not None:
                return replay
            current = await tx.records.get(scope_hash, request.record_id)
            # A tombstone or an expired record stays erasable (a hard delete removes it for
            # good), but a soft delete treats both as gone, exactly like update does.
            if current is None or (not request.hard and (
                    current.status is RecordStatus.DELETED or current.is_expired(ctx.now))):
                raise_missing(request.expected_revision)
            check_revision(current, request.expected_revision)
            if request.hard:
                # Keep the record's idempotency entries as tombstones (ids and hashes, no
                # content): a late retry of the add must not quietly write it back.
                await tx.erasure.erase([current.id], tombstone_idempotency=True)
                result = DeleteResult(current.id, scope_hash, hard=True)
            else:
                tombstone = attrs.evolve(
                    current, status=RecordStatus.DELETED, version=current.version + 1,
                    revision=new_revision(), updated_at=ctx.now,
                    index_state=IndexState.NOT_INDEXED,
                )
                await commit_version(tx, current, tombstone, VersionOperation.DELETE, ctx)
                await self._indexer.after_soft_delete(tx, tombstone, ctx.now)
                result = DeleteResult(current.id, scope_hash, hard=False,
                                      version=tombstone.version, revision=tombstone.revision)
            await self._units.remember_removal(tx, request, result, ctx)
            return result

        return await self._units.write(ctx, unit, request.scope.tenant_id)
