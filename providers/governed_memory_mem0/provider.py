"""``Mem0MemoryProvider``: the governed contract over Mem0, in-process or hosted.

Mem0 keeps each record's text, vector and a small marker (record id, scope and its hash,
revision, version, idempotency key); the ledger (``ledger.py``) keeps what Mem0 cannot.
Every rule a caller observes is enforced by this adapter, never delegated to Mem0:

- **scope**: each exact scope is one Mem0 namespace, ``<prefix>:<scope hash>``, sent as
  Mem0's ``user_id``; no scope value (so no ``"*"``) ever reaches Mem0, and every item
  Mem0 returns is checked against the ledger and its own marker (``reads.py``);
- **ownership by id**: a get, update, delete or history goes through the ledger row of
  the requested scope first, so another scope's id is simply "not found";
- **revisions and compare-and-set**: checked against the ledger under the store lock
  (``store.py``), which serializes every operation on one Mem0 store in this process;
  they hold for one process (``multi_process`` is not declared);
- **idempotency**, **expiry** (on every read, by ``purge_expired`` and, in every
  scope, by ``purge_expired_all`` from the ledger's expiry index), **bounded and
  cursor-stable lists** (ordered by our time-sortable ids in the ledger, never by
  Mem0's truncating ``get_all``);
- **erasure** (``erasure.py``): a hard delete, ``delete_all`` and ``delete_user``
  remove the memory from Mem0's vector store *and* the rows Mem0's history database
  keeps of it;
- **no blind retries** (``writes.py``, ``reconcile.py``): a Mem0 write that fails in a
  way that may have applied it is reconciled by looking for its marker; a retry with
  the same idempotency key first finishes a write that did land.

This class is the table of contents: it checks the provider is open and runs the
operation's body (one of the modules above) under the store lock; the request is one the
activity port has validated.
"""

from __future__ import annotations

import threading
import time

from governed_memory.capabilities import Capabilities, HealthStatus
from governed_memory.clock import Clock
from governed_memory.cursor import decode_cursor, encode_cursor
from governed_memory.errors import MemoryCapabilityUnsupportedError
from governed_memory.maintenance import ExpiredPurge, PurgeExpiredAllRequest
from governed_memory.operation_context import OperationContext
from governed_memory.provider_kit import NoOptionalFeatures
from governed_memory.records import (
    CleanupPage,
    DeleteResult,
    ErasureReceipt,
    MemoryRecord,
    MemoryVersion,
    Page,
    SearchResult,
)
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
from governed_memory.scope_revisions import ScopeRevisions
from governed_memory.usage import UsageMeter

from governed_memory_mem0.clients import Mem0Client
from governed_memory_mem0.config import Mem0Config
from governed_memory_mem0.embedding import Mem0EmbedderBridge
from governed_memory_mem0.erasure import Erasure
from governed_memory_mem0.errors import translate
from governed_memory_mem0.ledger import Ledger
from governed_memory_mem0.reads import Reads
from governed_memory_mem0.reconcile import Reconciler
from governed_memory_mem0.revisions import LedgerRevisions
from governed_memory_mem0.store import Mem0Store, store_lock
from governed_memory_mem0.usage import LedgerUsage
from governed_memory_mem0.writes import Writes

__all__ = ["Mem0MemoryProvider", "store_lock"]
"""``store_lock`` lives in ``store.py``; it is named here too, where it was first."""


class Mem0MemoryProvider(NoOptionalFeatures):
    """The Mem0 adapter; ``client`` decides whether Mem0 runs here or on a Platform host."""

    name = "mem0"

    def __init__(self, config: Mem0Config, clock: Clock, client: Mem0Client,
                 bridge: Mem0EmbedderBridge | None, lock_identity: tuple[str, ...]) -> None:
        self._config = config
        self._store = store = Mem0Store(config, clock, client, bridge, lock_identity)
        self._reconciler = Reconciler(store)
        self._erasure = Erasure(store)
        self._writes = Writes(store, self._reconciler, self._erasure)
        self._reads = Reads(store, self._reconciler)
        self._usage = LedgerUsage(store)
        self._revisions = LedgerRevisions(store)

    @property
    def client(self) -> Mem0Client:
        return self._store.client

    @property
    def ledger(self) -> Ledger:
        return self._store.ledger

    @property
    def _lock(self) -> threading.Lock:
        """The store lock, shared by every provider on the same Mem0 store."""
        return self._store.lock

    @property
    def reconciled_writes(self) -> int:
        """Writes whose outcome was unknown and that reconciliation found applied."""
        return self._store.reconciled_writes

    @property
    def foreign_items(self) -> int:
        """Items Mem0 returned for a namespace that the ledger does not place there."""
        return self._store.foreign_items

    def capabilities(self) -> Capabilities:
        return Capabilities(
            durable=self._config.durable,
            transactional=False,  # Mem0 and the ledger commit separately
            multi_process=False,  # revisions and serialization hold within one process
            compare_and_set=True,
            idempotency=True,
            history=True,
            soft_delete=True,
            hard_delete=True,
            lexical_search=False,  # Mem0 ranks by vector similarity, not by terms
            vector_search=True,
            metadata_filters=True,
            expiry=True,
            purge_expired=True,
            purge_expired_all=True,  # the ledger knows every record's expiry
            delete_all=True,
            delete_user=True,
            scope_revisions=True,
            usage=True,  # counted in the ledger, from each record's current version
        )

    # -- optional features --------------------------------------------------------

    @property
    def usage_meter(self) -> UsageMeter | None:
        return self._usage

    @property
    def revisions(self) -> ScopeRevisions | None:
        """Kept by the ledger, which decides what a search may return."""
        return self._revisions

    # -- lifecycle ----------------------------------------------------------------

    async def start(self) -> None:
        if self._store.is_open:
            return
        await self._store.locked(self._start)
        self._store.is_open = True

    def _start(self) -> None:
        self._store.connect()
        self._reconciler.recover()

    async def close(self) -> None:
        if not self._store.is_open:
            return
        self._store.is_open = False
        await self._store.locked(self._store.disconnect)

    async def health(self) -> HealthStatus:
        if not self._store.is_open:
            return HealthStatus(ok=False, provider=self.name, detail="not started")
        began = time.perf_counter()
        try:
            detail = await self._store.locked(self._store.client.check)
        except Exception as exc:  # health reports failure, it never raises
            code = translate(exc).code
            return HealthStatus(ok=False, provider=self.name, detail=f"check failed: {code}",
                                latency_ms=_elapsed_ms(began))
        return HealthStatus(ok=True, provider=self.name, detail=detail,
                            latency_ms=_elapsed_ms(began))

    # -- writes ---------------------------------------------------------------------

    async def add(self, request: AddRequest, ctx: OperationContext) -> MemoryRecord:
        self._store.require_open()
        return await self._store.locked(self._writes.add, request, ctx)

    async def update(self, request: UpdateRequest, ctx: OperationContext) -> MemoryRecord:
        self._store.require_open()
        return await self._store.locked(self._writes.update, request, ctx)

    async def delete(self, request: DeleteRequest, ctx: OperationContext) -> DeleteResult:
        self._store.require_open()
        return await self._store.locked(self._writes.delete, request, ctx)

    # -- reads ----------------------------------------------------------------------

    async def get(self, request: GetRequest, ctx: OperationContext) -> MemoryRecord:
        self._store.require_open()
        return await self._store.locked(self._reads.get, request, ctx)

    async def list(self, request: ListRequest, ctx: OperationContext) -> Page[MemoryRecord]:
        self._store.require_open()
        sh = request.scope.scope_hash
        after = (decode_cursor(request.cursor, "list", sh)
                 if request.cursor is not None else None)
        items = await self._store.locked(self._reads.page, request, after, ctx)
        cursor = (encode_cursor("list", sh, items[-1].id)
                  if len(items) == request.limit else None)
        return Page(items=items, next_cursor=cursor)

    async def search(self, request: SearchRequest, ctx: OperationContext) -> SearchResult:
        self._store.require_open()
        if request.ranking is not None:
            raise MemoryCapabilityUnsupportedError(
                "mem0 ranks by its own similarity; a search's ranking options are not "
                "supported")
        if not request.query.strip():
            return SearchResult(hits=(), candidates=0)
        return await self._store.locked(self._reads.search, request, ctx)

    async def history(self, request: HistoryRequest,
                      ctx: OperationContext) -> tuple[MemoryVersion, ...]:
        self._store.require_open()
        return await self._store.locked(self._reads.history, request, ctx)

    # -- maintenance ----------------------------------------------------------------

    async def delete_all(self, request: DeleteAllRequest, ctx: OperationContext) -> int:
        self._store.require_open()
        erased = await self._store.locked(self._erasure.scope, request.scope.scope_hash)
        return erased.records

    async def delete_user(self, request: DeleteUserRequest,
                          ctx: OperationContext) -> ErasureReceipt:
        self._store.require_open()
        erased = await self._store.locked(self._erasure.user, request.tenant_id,
                                          request.user_id)
        counts = {"records": erased.records, "versions": erased.versions,
                  "idempotency_entries": erased.idempotency_entries,
                  "mem0_memories": erased.mem0_memories,
                  "mem0_history_entries_left": erased.mem0_history_left}
        return ErasureReceipt(
            request_id=ctx.operation_id, tenant_id=request.tenant_id, user_id=request.user_id,
            counts=counts, scope_hashes=tuple(sorted(erased.scope_hashes)),
            started_at=ctx.now, completed_at=max(ctx.now, self._store.clock.now()),
        ).sealed()

    async def purge_expired(self, request: PurgeExpiredRequest,
                            ctx: OperationContext) -> CleanupPage:
        self._store.require_open()
        sh = request.scope.scope_hash
        after = (decode_cursor(request.after, "purge", sh, field="after")
                 if request.after is not None else None)
        inspected, deleted = await self._store.locked(self._erasure.expired, sh, after,
                                                      request.limit, ctx)
        cursor = (encode_cursor("purge", sh, inspected[-1])
                  if len(inspected) == request.limit else None)
        return CleanupPage(deleted=deleted, next_cursor=cursor)

    async def purge_expired_all(self, request: PurgeExpiredAllRequest,
                                ctx: OperationContext) -> ExpiredPurge:
        self._store.require_open()
        found, erased, scopes = await self._store.locked(self._erasure.expired_everywhere,
                                                         request.limit, ctx)
        return ExpiredPurge(records=erased.records, versions=erased.versions,
                            idempotency_entries=erased.idempotency_entries, scopes=scopes,
                            more=found == request.limit)


def _elapsed_ms(began: float) -> float:
    return (time.perf_counter() - began) * 1000.0
