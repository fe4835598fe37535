"""Add, update and delete over Mem0, with the guarantees Mem0 does not give.

Mem0 has no revisions, no idempotency and no way to tell whether a write that failed
applied. Each write here checks the ledger first (idempotency, compare-and-set, keys,
supersession links), announces itself as an intent, sends one Mem0 call, and records
the result only once Mem0 holds it; a failure of unknown outcome is looked up, never
sent again. The rules every provider shares come from ``governed_memory.provider_kit``.
"""

from __future__ import annotations

from typing import Any

import attrs
from governed_memory.errors import MemoryConflictError, MemoryUnavailableError
from governed_memory.ids import new_revision
from governed_memory.limits import check_metadata_budget
from governed_memory.operation_context import OperationContext
from governed_memory.provider_kit import (
    apply_update,
    check_fingerprint,
    check_key_holder,
    check_link,
    check_revision,
    erased_key_holder,
    idempotency_fingerprint,
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
)
from governed_memory.requests import AddRequest, DeleteRequest, UpdateRequest

from governed_memory_mem0.erasure import Erasure
from governed_memory_mem0.errors import outcome_unknown, translate
from governed_memory_mem0.ledger import IdempotencyEntry, Intent, Namespace, record_to_json
from governed_memory_mem0.reconcile import Reconciler, not_applied
from governed_memory_mem0.store import Mem0Store

__all__ = ["Writes"]


class Writes:
    """The bodies of ``add``, ``update`` and ``delete``, run under the store lock."""

    def __init__(self, store: Mem0Store, reconciler: Reconciler, erasure: Erasure) -> None:
        self._store = store
        self._reconciler = reconciler
        self._erasure = erasure

    # -- add ------------------------------------------------------------------------

    def add(self, request: AddRequest, ctx: OperationContext) -> MemoryRecord:
        store, ledger = self._store, self._store.ledger
        scope = request.scope
        sh = scope.scope_hash
        replay = self._replayed(sh, request, ctx)
        if replay is not None:
            return replay
        if request.idempotency_key is not None:
            intent = ledger.intent_for_key(sh, "add", request.idempotency_key)
            if intent is not None:
                landed = self._reconcile_add(intent, request, ctx)
                if landed is not None:
                    return landed
        provenance = stamped_provenance(request, ctx)
        if request.supersedes is not None:
            self._require_in_scope(sh, request.supersedes, "supersedes", ctx.now)
        if request.key is not None:
            holder = ledger.record_by_key(sh, request.key)
            if holder is not None and check_key_holder(holder.record, ctx.now):
                self._erasure.rows([holder], tombstone_idempotency=False)
                ctx.notes.add(erased_key_holder(holder.record.id))
        record = new_record(request, ctx, provenance)
        record_to_json(record)  # refuses what JSON cannot hold before anything is sent
        namespace = store.namespace(sh)
        fingerprint = (idempotency_fingerprint(ctx, request)
                       if request.idempotency_key is not None else None)
        intent = Intent(record.id, sh, namespace, "add", request.idempotency_key, fingerprint,
                        record)
        with ledger.transaction():
            ledger.remember_namespace(Namespace(sh, scope.tenant_id, scope.user_id, namespace))
            ledger.put_intent(intent)
        stray = False
        try:
            mem0_id = store.client.add(namespace, record.content, _marker(record, request))
        except Exception as exc:
            if not outcome_unknown(exc):
                ledger.drop_intent(record.id)
                raise translate(exc) from None
            mem0_id, stray = None, True
        if mem0_id is None:
            found = self._reconciler.find(namespace, record.id, record.revision)
            if found is None:
                raise MemoryUnavailableError(
                    "Mem0 did not confirm the write and it is not stored (yet); retrying "
                    "with the same idempotency key finishes it if it lands")
            mem0_id = found.mem0_id
            store.reconciled_writes += 1
        self._commit_new(record, mem0_id, request, ctx, stray=stray)
        return record

    def _commit_new(self, record: MemoryRecord, mem0_id: str, request: AddRequest,
                    ctx: OperationContext, *, stray: bool) -> None:
        ledger = self._store.ledger
        with ledger.transaction():
            ledger.put_record(record, mem0_id, stray=stray)
            ledger.append_version(
                MemoryVersion(record, VersionOperation.ADD, record.created_at, ctx.operation_id))
            self._remember(request, record, ctx)
            ledger.drop_intent(record.id)

    def _reconcile_add(self, intent: Intent, request: AddRequest,
                       ctx: OperationContext) -> MemoryRecord | None:
        """An earlier attempt with this key timed out: finish it if Mem0 has it."""
        if intent.fingerprint != idempotency_fingerprint(ctx, request):
            raise MemoryConflictError(
                "the idempotency key was already used for a different request")
        found = self._reconciler.find(intent.namespace, intent.record_id,
                                      intent.record.revision)
        if found is None:
            self._store.ledger.drop_intent(intent.record_id)
            return None
        self._reconciler.commit(intent, found.mem0_id, VersionOperation.ADD)
        return intent.record

    # -- update ---------------------------------------------------------------------

    def update(self, request: UpdateRequest, ctx: OperationContext) -> MemoryRecord:
        store, ledger = self._store, self._store.ledger
        sh = request.scope.scope_hash
        replay = self._replayed(sh, request, ctx)
        if replay is not None:
            return replay
        row = ledger.record(sh, request.record_id)
        if row is None or not row.record.is_visible(ctx.now):
            raise_missing(request.expected_revision)
        check_revision(row.record, request.expected_revision)
        if request.superseded_by is not None:
            self._require_in_scope(sh, request.superseded_by, "superseded_by", ctx.now)
        current = self._reconciler.merged(row)
        updated = apply_update(current, request, ctx.now)
        check_metadata_budget(updated.metadata, updated.provenance.as_dict())
        record_to_json(updated)
        fingerprint = (idempotency_fingerprint(ctx, request)
                       if request.idempotency_key is not None else None)
        ledger.put_intent(Intent(updated.id, sh, store.namespace(sh), "update",
                                 request.idempotency_key, fingerprint, updated))
        text = updated.content if updated.content != current.content else None
        try:
            store.client.update(row.mem0_id, text, _marker(updated, request))
        except Exception as exc:
            if (not outcome_unknown(exc)
                    or not self._reconciler.landed(row.mem0_id, updated.revision)):
                ledger.drop_intent(updated.id)
                raise not_applied(exc) from None
            store.reconciled_writes += 1
        with ledger.transaction():
            ledger.put_record(updated, row.mem0_id)
            ledger.append_version(
                MemoryVersion(updated, VersionOperation.UPDATE, ctx.now, ctx.operation_id))
            self._remember(request, updated, ctx)
            ledger.drop_intent(updated.id)
        return updated

    # -- delete ---------------------------------------------------------------------

    def delete(self, request: DeleteRequest, ctx: OperationContext) -> DeleteResult:
        store, ledger = self._store, self._store.ledger
        sh = request.scope.scope_hash
        fingerprint = idempotency_fingerprint(ctx, request)
        if request.idempotency_key is not None:
            entry = ledger.idempotency(sh, request.operation.value, request.idempotency_key)
            if entry is not None:
                check_fingerprint(entry, fingerprint)
                return DeleteResult(entry.record_id, sh, entry.hard, entry.version,
                                    entry.revision)
        row = ledger.record(sh, request.record_id)
        if row is None or (not request.hard and (
                row.record.status is RecordStatus.DELETED or row.record.is_expired(ctx.now))):
            raise_missing(request.expected_revision)
        check_revision(row.record, request.expected_revision)
        if request.hard:
            self._erasure.rows([row], tombstone_idempotency=True)
            result = DeleteResult(row.record.id, sh, hard=True)
            if request.idempotency_key is not None:
                ledger.put_idempotency(IdempotencyEntry(
                    sh, request.operation.value, request.idempotency_key, fingerprint,
                    result.record_id, request.scope.tenant_id, request.scope.user_id,
                    hard=True))
            return result
        current = self._reconciler.merged(row)
        tombstone = attrs.evolve(
            current, status=RecordStatus.DELETED, version=current.version + 1,
            revision=new_revision(), updated_at=ctx.now, index_state=IndexState.NOT_INDEXED)
        # The text leaves Mem0's vector store now; Mem0's history keeps it, as the
        # tombstone in ours does, until the record is erased.
        intent = Intent(tombstone.id, sh, store.namespace(sh), "delete",
                        request.idempotency_key,
                        fingerprint if request.idempotency_key is not None else None,
                        tombstone)
        ledger.put_intent(intent)
        try:
            store.client.delete(row.mem0_id)
        except Exception as exc:
            if not outcome_unknown(exc) or store.call(store.client.get, row.mem0_id):
                ledger.drop_intent(tombstone.id)
                raise not_applied(exc) from None
            store.reconciled_writes += 1
        self._reconciler.commit(intent, row.mem0_id, VersionOperation.DELETE, ctx)
        return DeleteResult(row.record.id, sh, hard=False, version=tombstone.version,
                            revision=tombstone.revision)

    # -- shared ---------------------------------------------------------------------

    def _require_in_scope(self, scope_hash: str, record_id: str, field: str,
                          now: float) -> None:
        row = self._store.ledger.record(scope_hash, record_id)
        check_link(row.record if row is not None else None, field, now)

    def _replayed(self, scope_hash: str, request: AddRequest | UpdateRequest,
                  ctx: OperationContext) -> MemoryRecord | None:
        """The first result of a keyed write seen before (the same request), or None."""
        if request.idempotency_key is None:
            return None
        ledger = self._store.ledger
        entry = ledger.idempotency(scope_hash, request.operation.value,
                                   request.idempotency_key)
        if entry is None:
            return None
        check_fingerprint(entry, idempotency_fingerprint(ctx, request))
        snapshot = (ledger.version(entry.record_id, entry.version)
                    if entry.version is not None and not entry.erased else None)
        if snapshot is None:
            verb = "created" if isinstance(request, AddRequest) else "updated"
            raise MemoryConflictError(f"the record {verb} with this idempotency key was erased")
        return snapshot.record

    def _remember(self, request: AddRequest | UpdateRequest, record: MemoryRecord,
                  ctx: OperationContext) -> None:
        if request.idempotency_key is None:
            return
        self._store.ledger.put_idempotency(IdempotencyEntry(
            record.scope_hash, request.operation.value, request.idempotency_key,
            idempotency_fingerprint(ctx, request), record.id, record.scope.tenant_id,
            record.scope.user_id, record.version, record.revision))


def _marker(record: MemoryRecord, request: AddRequest | UpdateRequest) -> dict[str, Any]:
    """What Mem0 keeps beside the text: enough to tell our writes and their revisions."""
    return {"id": record.id, "scope": record.scope.dimensions(),
            "scope_hash": record.scope_hash, "revision": record.revision,
            "version": record.version, "memory_type": record.memory_type.value,
            "idempotency_key": request.idempotency_key}
