"""Settling Mem0 writes whose outcome was not known when they were sent.

Mem0 and the ledger commit separately, and a Mem0 write can time out after it applied.
Each write is therefore announced in the ledger first (an intent) and recorded only
once Mem0 shows it landed; whoever meets an unconfirmed one settles it the same way,
here: a read of the record, a retry with its idempotency key, or the next start. A
write is never blindly replayed.
"""

from __future__ import annotations

import attrs
from governed_memory.errors import (
    GovernedMemoryError,
    MemoryNotFoundError,
    MemoryStorageError,
    MemoryUnavailableError,
)
from governed_memory.operation_context import OperationContext
from governed_memory.records import (
    MemoryRecord,
    MemoryVersion,
    RecordStatus,
    VersionOperation,
    content_hash,
)

from governed_memory_mem0.clients import Item
from governed_memory_mem0.errors import translate
from governed_memory_mem0.ledger import IdempotencyEntry, Intent, LedgerRow
from governed_memory_mem0.store import Mem0Store, log

__all__ = ["Reconciler", "not_applied"]


class Reconciler:
    """Reads a record as Mem0 and the ledger agree on it, and records the writes that
    turn out to have landed."""

    def __init__(self, store: Mem0Store) -> None:
        self._store = store

    def recover(self) -> None:
        """Settle writes a crash or a timeout left unconfirmed.

        A write Mem0 holds is recorded (the record becomes visible, its idempotency key
        answers with it); one it does not hold is forgotten. If Mem0 cannot be asked,
        the intent stays for the next start or the next retry with its key.
        """
        ledger = self._store.ledger
        for intent in ledger.intents():
            try:
                if intent.operation == "add":
                    found = self.find(intent.namespace, intent.record_id,
                                      intent.record.revision)
                    if found is not None:
                        self.commit(intent, found.mem0_id, VersionOperation.ADD)
                        continue
                else:
                    row = ledger.record(intent.scope_hash, intent.record_id)
                    item = (None if row is None
                            else self._store.call(self._store.client.get, row.mem0_id))
                    if row is not None and self.adopt(row, item):
                        continue
                ledger.drop_intent(intent.record_id)
            except GovernedMemoryError as exc:
                log.warning("an unconfirmed mem0 write stays pending: %s", exc.code)

    def merged(self, row: LedgerRow, item: Item | None = None) -> MemoryRecord:
        """The record: ledger fields plus Mem0's text, after checking they belong together."""
        if item is None:
            item = self._store.call(self._store.client.get, row.mem0_id)
        record = row.record
        marker = None if item is None else item.marker
        if item is None or (marker is not None and marker.get("id") == record.id
                            and marker.get("revision") != record.revision):
            adopted = self.adopt(row, item)
            if adopted is not None and adopted.status is RecordStatus.DELETED:
                raise MemoryNotFoundError("no live record with that id in this scope")
            if adopted is not None:
                return adopted
        if (item is None or marker is None or marker.get("id") != record.id
                or marker.get("scope_hash") != record.scope_hash
                or marker.get("revision") != record.revision
                or content_hash(item.text) != record.content_hash):
            raise MemoryStorageError(
                "Mem0 and the adapter's ledger disagree about a record; it is withheld")
        return attrs.evolve(record, content=item.text)

    def adopt(self, row: LedgerRow, item: Item | None) -> MemoryRecord | None:
        """An update or soft delete that was not confirmed did land after all: record it
        now. Mem0 shows which: the update's revision in the marker, or no memory left."""
        intent = self._store.ledger.intent_of(row.record.id)
        if intent is None or row.record.status is RecordStatus.DELETED:
            return None
        pending = intent.record
        if intent.operation == "delete":
            if item is not None:
                return None
            self.commit(intent, row.mem0_id, VersionOperation.DELETE)
            return pending
        if intent.operation != "update" or item is None:
            return None
        marker = item.marker or {}
        if (pending.revision != marker.get("revision")
                or content_hash(item.text) != pending.content_hash):
            return None
        self.commit(intent, row.mem0_id, VersionOperation.UPDATE)
        return pending

    def commit(self, intent: Intent, mem0_id: str, operation: VersionOperation,
               ctx: OperationContext | None = None) -> None:
        """Record a write Mem0 applied: at once (``ctx`` given), or when it is found
        applied after its caller was told it was not confirmed, or after a crash."""
        ledger = self._store.ledger
        record = intent.record
        operation_id = ctx.operation_id if ctx is not None else None
        with ledger.transaction():
            ledger.put_record(record, mem0_id, stray=(
                ctx is None and operation is VersionOperation.ADD))
            ledger.append_version(MemoryVersion(
                record, operation, record.updated_at, operation_id))
            if intent.idempotency_key is not None and intent.fingerprint is not None:
                ledger.put_idempotency(IdempotencyEntry(
                    record.scope_hash, intent.operation, intent.idempotency_key,
                    intent.fingerprint, record.id, record.scope.tenant_id,
                    record.scope.user_id, record.version, record.revision))
            ledger.drop_intent(record.id)
        if ctx is None:
            self._store.reconciled_writes += 1

    def find(self, namespace: str, record_id: str, revision: str) -> Item | None:
        """Look for a write's marker in Mem0 (reconciliation after an unknown outcome)."""
        try:
            for item in self._store.client.items(namespace):
                marker = item.marker or {}
                if marker.get("id") == record_id and marker.get("revision") == revision:
                    return item
        except Exception:
            raise MemoryUnavailableError(
                "Mem0 did not confirm the write and could not be asked whether it landed; "
                "retrying with the same idempotency key finishes it if it did") from None
        return None

    def landed(self, mem0_id: str, revision: str) -> bool:
        """Whether an update whose outcome was unknown shows in Mem0."""
        try:
            item = self._store.client.get(mem0_id)
        except Exception:
            raise MemoryUnavailableError(
                "Mem0 did not confirm the update and could not be asked whether it landed"
            ) from None
        return item is not None and (item.marker or {}).get("revision") == revision


def not_applied(exc: BaseException) -> GovernedMemoryError:
    """A failed Mem0 write that reconciliation showed did not apply."""
    error = translate(exc)
    if isinstance(error, MemoryUnavailableError):
        return MemoryUnavailableError(
            "Mem0 did not complete the write; it was checked and nothing changed")
    return error
