"""Erasure in Mem0: a record gone from its vector store, its history database and the
ledger, or nothing gone at all from the ledger's point of view.

Mem0's own delete leaves the text in Mem0's history database, and a write that timed
out may have left a second copy in the namespace. Every path that erases (a hard
delete, a key freed from an expired holder, ``delete_all``, ``delete_user``,
``purge_expired``, ``purge_expired_all``) goes through here, so each removes the same
things in the same order and counts them for the erasure receipt.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs
from governed_memory.errors import MemoryStorageError
from governed_memory.operation_context import OperationContext

from governed_memory_mem0.ledger import LedgerRow
from governed_memory_mem0.store import Mem0Store

__all__ = ["Erased", "Erasure"]


@attrs.frozen(slots=True)
class Erased:
    """What an erasure removed, summed over its steps."""

    records: int = 0
    versions: int = 0
    idempotency_entries: int = 0
    mem0_memories: int = 0
    mem0_history_left: int = 0
    scope_hashes: frozenset[str] = frozenset()

    def __add__(self, other: Erased) -> Erased:
        return Erased(
            self.records + other.records, self.versions + other.versions,
            self.idempotency_entries + other.idempotency_entries,
            self.mem0_memories + other.mem0_memories,
            self.mem0_history_left + other.mem0_history_left,
            self.scope_hashes | other.scope_hashes)


class Erasure:
    """Removes records, scopes and users from Mem0 and the ledger (under the store lock)."""

    def __init__(self, store: Mem0Store) -> None:
        self._store = store

    def rows(self, rows: Iterable[LedgerRow], *, tombstone_idempotency: bool,
             sweep: bool = True) -> Erased:
        """Remove records from Mem0 (vector store and history) and then from the ledger.

        Mem0 goes first: if it fails, the ledger still points at what is left, so the
        erasure can simply be run again.
        """
        store, ledger = self._store, self._store.ledger
        total = Erased()
        for row in rows:
            removed = store.call(store.client.delete, row.mem0_id)
            left = store.call(store.client.erase_history, [row.mem0_id])
            extra = (self.sweep(store.namespace(row.record.scope_hash), row.record.id)
                     if row.stray and sweep else Erased())
            with ledger.transaction():
                versions, idem = ledger.erase_record(
                    row.record.id, tombstone_idempotency=tombstone_idempotency)
            total += extra + Erased(records=1, versions=versions, idempotency_entries=idem,
                                    mem0_memories=int(removed), mem0_history_left=left,
                                    scope_hashes=frozenset({row.record.scope_hash}))
        ledger.settle_erasure()
        if total.mem0_history_left:
            raise MemoryStorageError("Mem0 still serves history of an erased memory")
        return total

    def sweep(self, namespace: str, record_id: str | None) -> Erased:
        """Delete what Mem0 still holds in a namespace (all of it, or one record's copies):
        orphans of timed-out writes and anything written there behind our back."""
        store = self._store
        doomed = [item.mem0_id for item in store.call(lambda: list(store.client.items(namespace)))
                  if record_id is None or (item.marker or {}).get("id") == record_id]
        for mem0_id in doomed:
            store.call(store.client.delete, mem0_id)
        left = store.call(store.client.erase_history, doomed) if doomed else 0
        return Erased(mem0_memories=len(doomed), mem0_history_left=left)

    def scope(self, scope_hash: str) -> Erased:
        """Every record of one exact scope, then anything else left in its namespace."""
        ledger = self._store.ledger
        total = Erased()
        while True:
            rows = ledger.scan(scope_hash, None, 200)
            if not rows:
                break
            total += self.rows(rows, tombstone_idempotency=False, sweep=False)
        total += self.sweep(self._store.namespace(scope_hash), record_id=None)
        with ledger.transaction():
            removed = ledger.erase_idempotency_of_scope(scope_hash)
            for record_id in ledger.intents_in_scope(scope_hash):
                ledger.drop_intent(record_id)
        ledger.settle_erasure()
        scopes = frozenset({scope_hash}) if removed else frozenset()
        return total + Erased(idempotency_entries=removed, scope_hashes=scopes)

    def user(self, tenant_id: str, user_id: str) -> Erased:
        """Every scope the user ever wrote to, and any record of theirs left outside one;
        then every search cache of the tenant is made stale."""
        ledger = self._store.ledger
        total = Erased()
        for namespace in ledger.namespaces_of_user(tenant_id, user_id):
            total += self.scope(namespace.scope_hash)
            ledger.forget_namespace(namespace.scope_hash)
        # Records whose namespace row is missing (none expected) are still the user's.
        leftovers = [row for record_id in ledger.user_record_ids(tenant_id, user_id)
                     if (row := ledger.record_anywhere(record_id)) is not None]
        if leftovers:
            total += self.rows(leftovers, tombstone_idempotency=False)
        removed = ledger.erase_idempotency_of_user(tenant_id, user_id)
        total += Erased(idempotency_entries=removed)
        # Every search cache of the tenant, in any process, is stale from here on.
        ledger.advance_epoch(tenant_id, sorted(total.scope_hashes))
        return total

    def expired(self, scope_hash: str, after: str | None, limit: int,
                ctx: OperationContext) -> tuple[list[str], int]:
        """One page of a scope's records, the expired ones erased: the ids inspected
        (for the next cursor) and how many were erased."""
        rows = self._store.ledger.scan(scope_hash, after, limit)
        expired = [row for row in rows if row.record.is_expired(ctx.now)]
        erased = (self.rows(expired, tombstone_idempotency=False) if expired
                  else Erased())
        return [row.record.id for row in rows], erased.records

    def expired_everywhere(self, limit: int, ctx: OperationContext
                           ) -> tuple[int, Erased, frozenset[tuple[str, str]]]:
        """Up to ``limit`` expired records of every scope erased, earliest expiry first:
        how many the ledger found, what was erased, and the ``(tenant, scope hash)``
        pairs erased from. The store lock is held, so no other purge of this store runs
        meanwhile (the adapter is one process's)."""
        rows = self._store.ledger.expired(ctx.now, limit)
        if not rows:
            return 0, Erased(), frozenset()
        erased = self.rows(rows, tombstone_idempotency=False)
        scopes = frozenset((row.record.scope.tenant_id, row.record.scope_hash) for row in rows)
        return len(rows), erased, scopes
