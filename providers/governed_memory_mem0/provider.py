"""``Mem0MemoryProvider``: the governed contract over Mem0, in-process or hosted.

Mem0 keeps each record's text, vector and a small marker (record id, scope and its hash,
revision, version, idempotency key); the ledger (``ledger.py``) keeps what Mem0 cannot.
Every rule a caller observes is enforced here, never delegated to Mem0:

- **scope**: each exact scope is one Mem0 namespace, ``<prefix>:<scope hash>``, sent as
  Mem0's ``user_id``; no scope value (so no ``"*"``) ever reaches Mem0, and every item
  Mem0 returns is checked against the ledger and its own marker;
- **ownership by id**: a get, update, delete or history goes through the ledger row of
  the requested scope first, so another scope's id is simply "not found";
- **revisions and compare-and-set**: checked against the ledger under the store lock,
  which serializes every operation on one Mem0 store in this process; they hold for
  one process (``multi_process`` is not declared);
- **idempotency**, **expiry** (on every read and by ``purge_expired``), **bounded and
  cursor-stable lists** (ordered by our time-sortable ids in the ledger, never by
  Mem0's truncating ``get_all``);
- **erasure**: a hard delete, ``delete_all`` and ``delete_user`` remove the memory from
  Mem0's vector store *and* the rows Mem0's history database keeps of it;
- **no blind retries**: a Mem0 write that fails in a way that may have applied it is
  reconciled by looking for its marker; a retry with the same idempotency key first
  finishes a write that did land.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, TypeVar

import attrs
from governed_memory.capabilities import Capabilities, HealthStatus
from governed_memory.clock import Clock
from governed_memory.cursor import decode_cursor, encode_cursor
from governed_memory.errors import (
    GovernedMemoryError,
    MemoryCapabilityUnsupportedError,
    MemoryConflictError,
    MemoryNotFoundError,
    MemoryStorageError,
    MemoryUnavailableError,
)
from governed_memory.ids import new_revision
from governed_memory.limits import check_metadata_budget
from governed_memory.operation_context import OperationContext
from governed_memory.provider_kit import (
    NoOptionalFeatures,
    check_key_holder,
    check_link,
    erased_key_holder,
    new_record,
    stamped_provenance,
)
from governed_memory.provider_kit import apply_update as _apply_update
from governed_memory.provider_kit import check_fingerprint as _check_fingerprint
from governed_memory.provider_kit import check_revision as _check_revision
from governed_memory.provider_kit import idempotency_fingerprint as _fingerprint
from governed_memory.provider_kit import matches_filters as _matches
from governed_memory.provider_kit import raise_missing as _raise_missing
from governed_memory.records import (
    CleanupPage,
    DeleteResult,
    ErasureReceipt,
    HitExplanation,
    IndexState,
    MemoryRecord,
    MemoryType,
    MemoryVersion,
    Page,
    RecordStatus,
    SearchHit,
    SearchResult,
    SignalScore,
    VersionOperation,
    content_hash,
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
from governed_memory.scope import Scope
from governed_memory.scope_revisions import ScopeRevisions, ScopeState
from governed_memory.usage import Usage, UsageMeter, UsageQuery

from governed_memory_mem0.clients import Item, Mem0Client
from governed_memory_mem0.config import Mem0Config
from governed_memory_mem0.embedding import Mem0EmbedderBridge
from governed_memory_mem0.errors import outcome_unknown, translate
from governed_memory_mem0.ledger import (
    IdempotencyEntry,
    Intent,
    Ledger,
    LedgerRow,
    Namespace,
    record_to_json,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

_TIE_BREAK: Final = "score desc, id asc"

_store_locks: dict[tuple[str, ...], threading.Lock] = {}
_store_locks_guard = threading.Lock()


def store_lock(identity: tuple[str, ...]) -> threading.Lock:
    """One lock per Mem0 store in this process, shared by every provider on it: Mem0's
    embedded stores lose writes under concurrency (the notes, hazard 5)."""
    with _store_locks_guard:
        return _store_locks.setdefault(identity, threading.Lock())


@attrs.frozen(slots=True)
class _Erased:
    records: int = 0
    versions: int = 0
    idempotency_entries: int = 0
    mem0_memories: int = 0
    mem0_history_left: int = 0
    scope_hashes: frozenset[str] = frozenset()

    def __add__(self, other: _Erased) -> _Erased:
        return _Erased(
            self.records + other.records, self.versions + other.versions,
            self.idempotency_entries + other.idempotency_entries,
            self.mem0_memories + other.mem0_memories,
            self.mem0_history_left + other.mem0_history_left,
            self.scope_hashes | other.scope_hashes)


class _LedgerRevisions:
    """The ledger's scope revisions, read off the event loop (one indexed read each)."""

    __slots__ = ("_provider",)

    def __init__(self, provider: Mem0MemoryProvider) -> None:
        self._provider = provider

    async def read(self, tenant_id: str, scope_hashes: Sequence[str],
                   now: float) -> ScopeState:
        self._provider._require_open()
        return await asyncio.to_thread(self._provider.ledger.scope_state, tenant_id,
                                       scope_hashes, now)


class Mem0MemoryProvider(NoOptionalFeatures):
    """The Mem0 adapter; ``client`` decides whether Mem0 runs here or on a Platform host."""

    name = "mem0"

    def __init__(self, config: Mem0Config, clock: Clock, client: Mem0Client,
                 bridge: Mem0EmbedderBridge | None, lock_identity: tuple[str, ...]) -> None:
        self._config = config
        self._clock = clock
        self._client = client
        self._bridge = bridge
        self._ledger = Ledger(config.ledger_path)
        self._lock = store_lock(lock_identity)
        self._open = False
        self.reconciled_writes = 0
        """Writes whose outcome was unknown and that reconciliation found applied."""
        self.foreign_items = 0
        """Items Mem0 returned for a namespace that the ledger does not place there."""

    @property
    def client(self) -> Mem0Client:
        return self._client

    @property
    def ledger(self) -> Ledger:
        return self._ledger

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
            delete_all=True,
            delete_user=True,
            scope_revisions=True,
            usage=True,  # counted in the ledger, from each record's current version
        )

    @property
    def usage_meter(self) -> UsageMeter | None:
        return self

    async def usage(self, query: UsageQuery, ctx: OperationContext) -> Usage:
        """Records neither deleted nor expired (pending included) and their content
        bytes, for quotas: read from the ledger under the store lock."""
        self._require_open()
        scope_hash = None if query.scope is None else query.scope.scope_hash
        records, size = await self._locked(self._ledger.usage, query.tenant_id, scope_hash,
                                           ctx.now)
        return Usage(records=records, bytes=size)

    @property
    def revisions(self) -> ScopeRevisions | None:
        """Kept by the ledger, which decides what a search may return."""
        return _LedgerRevisions(self)

    # -- lifecycle ----------------------------------------------------------------

    async def start(self) -> None:
        if self._open:
            return
        await self._locked(self._start)
        self._open = True

    def _start(self) -> None:
        self._ledger.open()
        try:
            self._client.start()
        except GovernedMemoryError:
            self._ledger.close()
            raise
        except Exception as exc:
            self._ledger.close()
            raise translate(exc) from None
        self._recover()

    def _recover(self) -> None:
        """Settle writes a crash or a timeout left unconfirmed.

        A write Mem0 holds is recorded (the record becomes visible, its idempotency key
        answers with it); one it does not hold is forgotten. If Mem0 cannot be asked,
        the intent stays for the next start or the next retry with its key.
        """
        for intent in self._ledger.intents():
            try:
                if intent.operation == "add":
                    found = self._find(intent.namespace, intent.record_id,
                                       intent.record.revision)
                    if found is not None:
                        self._commit_intent(intent, found.mem0_id, VersionOperation.ADD)
                        continue
                else:
                    row = self._ledger.record(intent.scope_hash, intent.record_id)
                    item = None if row is None else self._call(self._client.get, row.mem0_id)
                    if row is not None and self._adopt_intent(row, item):
                        continue
                self._ledger.drop_intent(intent.record_id)
            except GovernedMemoryError as exc:
                log.warning("an unconfirmed mem0 write stays pending: %s", exc.code)

    async def close(self) -> None:
        if not self._open:
            return
        self._open = False
        await self._locked(self._close)

    def _close(self) -> None:
        try:
            self._client.close()
        finally:
            self._ledger.close()

    async def health(self) -> HealthStatus:
        if not self._open:
            return HealthStatus(ok=False, provider=self.name, detail="not started")
        began = time.perf_counter()
        try:
            detail = await self._locked(self._client.check)
        except Exception as exc:  # health reports failure, it never raises
            code = translate(exc).code
            return HealthStatus(ok=False, provider=self.name, detail=f"check failed: {code}",
                                latency_ms=_elapsed_ms(began))
        return HealthStatus(ok=True, provider=self.name, detail=detail,
                            latency_ms=_elapsed_ms(began))

    # -- running --------------------------------------------------------------------

    async def _locked(self, body: Callable[..., T], *args: Any) -> T:
        """Run ``body`` in a worker thread holding the store lock.

        If the caller is cancelled (a manager timeout), the thread still finishes what
        it started: a Mem0 write is never abandoned half-way or replayed.
        """
        loop = asyncio.get_running_loop()

        def run() -> T:
            with self._lock:
                if self._bridge is not None:
                    self._bridge.bind(loop)
                error: GovernedMemoryError
                try:
                    return body(*args)
                except GovernedMemoryError as exc:
                    error = exc
                except Exception as exc:
                    log.warning("mem0 adapter failure: %s", type(exc).__name__)
                    error = translate(exc)
            # Raised outside the handler, with the chain cut: a Mem0 exception carries
            # the host, the server's text and sometimes the payload.
            error.__cause__ = error.__context__ = None
            raise error

        return await asyncio.to_thread(run)

    def _require_open(self) -> None:
        if not self._open:
            raise MemoryUnavailableError("the mem0 provider is not started (or was closed)")

    def _namespace(self, scope_hash: str) -> str:
        return f"{self._config.namespace_prefix}:{scope_hash}"

    def _call(self, body: Callable[..., T], *args: Any) -> T:
        """A Mem0 call whose failure is translated (reads, and writes known not to apply)."""
        try:
            return body(*args)
        except GovernedMemoryError:
            raise
        except Exception as exc:
            raise translate(exc) from None

    # -- writes ---------------------------------------------------------------------

    async def add(self, request: AddRequest, ctx: OperationContext) -> MemoryRecord:
        request.validate()
        self._require_open()
        return await self._locked(self._add, request, ctx)

    def _add(self, request: AddRequest, ctx: OperationContext) -> MemoryRecord:
        scope = request.scope
        sh = scope.scope_hash
        replay = self._replayed(sh, request, ctx)
        if replay is not None:
            return replay
        if request.idempotency_key is not None:
            intent = self._ledger.intent_for_key(sh, "add", request.idempotency_key)
            if intent is not None:
                landed = self._reconcile_add(intent, request, ctx)
                if landed is not None:
                    return landed
        provenance = stamped_provenance(request, ctx)
        if request.supersedes is not None:
            self._require_in_scope(sh, request.supersedes, "supersedes", ctx.now)
        if request.key is not None:
            holder = self._ledger.record_by_key(sh, request.key)
            if holder is not None and check_key_holder(holder.record, ctx.now):
                self._erase_rows([holder], tombstone_idempotency=False)
                ctx.notes.add(erased_key_holder(holder.record.id))
        record = new_record(request, ctx, provenance)
        record_to_json(record)  # refuses what JSON cannot hold before anything is sent
        namespace = self._namespace(sh)
        fingerprint = (_fingerprint(ctx, request) if request.idempotency_key is not None
                       else None)
        intent = Intent(record.id, sh, namespace, "add", request.idempotency_key, fingerprint,
                        record)
        with self._ledger.transaction():
            self._ledger.remember_namespace(
                Namespace(sh, scope.tenant_id, scope.user_id, namespace))
            self._ledger.put_intent(intent)
        stray = False
        try:
            mem0_id = self._client.add(namespace, record.content, self._marker(record, request))
        except Exception as exc:
            if not outcome_unknown(exc):
                self._ledger.drop_intent(record.id)
                raise translate(exc) from None
            mem0_id, stray = None, True
        if mem0_id is None:
            found = self._find(namespace, record.id, record.revision)
            if found is None:
                raise MemoryUnavailableError(
                    "Mem0 did not confirm the write and it is not stored (yet); retrying "
                    "with the same idempotency key finishes it if it lands")
            mem0_id = found.mem0_id
            self.reconciled_writes += 1
        self._commit_new(record, mem0_id, request, ctx, stray=stray)
        return record

    def _commit_new(self, record: MemoryRecord, mem0_id: str, request: AddRequest,
                    ctx: OperationContext, *, stray: bool) -> None:
        with self._ledger.transaction():
            self._ledger.put_record(record, mem0_id, stray=stray)
            self._ledger.append_version(
                MemoryVersion(record, VersionOperation.ADD, record.created_at, ctx.operation_id))
            self._remember(request, record, ctx)
            self._ledger.drop_intent(record.id)

    def _reconcile_add(self, intent: Intent, request: AddRequest,
                       ctx: OperationContext) -> MemoryRecord | None:
        """An earlier attempt with this key timed out: finish it if Mem0 has it."""
        if intent.fingerprint != _fingerprint(ctx, request):
            raise MemoryConflictError(
                "the idempotency key was already used for a different request")
        found = self._find(intent.namespace, intent.record_id, intent.record.revision)
        if found is None:
            self._ledger.drop_intent(intent.record_id)
            return None
        self._commit_intent(intent, found.mem0_id, VersionOperation.ADD)
        return intent.record

    async def update(self, request: UpdateRequest, ctx: OperationContext) -> MemoryRecord:
        request.validate()
        self._require_open()
        return await self._locked(self._update, request, ctx)

    def _require_in_scope(self, scope_hash: str, record_id: str, field: str,
                          now: float) -> None:
        row = self._ledger.record(scope_hash, record_id)
        check_link(row.record if row is not None else None, field, now)

    def _update(self, request: UpdateRequest, ctx: OperationContext) -> MemoryRecord:
        sh = request.scope.scope_hash
        replay = self._replayed(sh, request, ctx)
        if replay is not None:
            return replay
        row = self._ledger.record(sh, request.record_id)
        if row is None or not row.record.is_visible(ctx.now):
            _raise_missing(request.expected_revision)
        _check_revision(row.record, request.expected_revision)
        if request.superseded_by is not None:
            self._require_in_scope(sh, request.superseded_by, "superseded_by", ctx.now)
        current = self._merged(row)
        updated = _apply_update(current, request, ctx.now)
        check_metadata_budget(updated.metadata, updated.provenance.as_dict())
        record_to_json(updated)
        fingerprint = (_fingerprint(ctx, request) if request.idempotency_key is not None
                       else None)
        self._ledger.put_intent(Intent(updated.id, sh, self._namespace(sh), "update",
                                       request.idempotency_key, fingerprint, updated))
        text = updated.content if updated.content != current.content else None
        try:
            self._client.update(row.mem0_id, text, self._marker(updated, request))
        except Exception as exc:
            if not outcome_unknown(exc) or not self._landed(row.mem0_id, updated.revision):
                self._ledger.drop_intent(updated.id)
                raise _not_applied(exc) from None
            self.reconciled_writes += 1
        with self._ledger.transaction():
            self._ledger.put_record(updated, row.mem0_id)
            self._ledger.append_version(
                MemoryVersion(updated, VersionOperation.UPDATE, ctx.now, ctx.operation_id))
            self._remember(request, updated, ctx)
            self._ledger.drop_intent(updated.id)
        return updated

    async def delete(self, request: DeleteRequest, ctx: OperationContext) -> DeleteResult:
        request.validate()
        self._require_open()
        return await self._locked(self._delete, request, ctx)

    def _delete(self, request: DeleteRequest, ctx: OperationContext) -> DeleteResult:
        sh = request.scope.scope_hash
        fingerprint = _fingerprint(ctx, request)
        if request.idempotency_key is not None:
            entry = self._ledger.idempotency(sh, request.operation.value,
                                             request.idempotency_key)
            if entry is not None:
                _check_fingerprint(entry, fingerprint)
                return DeleteResult(entry.record_id, sh, entry.hard, entry.version,
                                    entry.revision)
        row = self._ledger.record(sh, request.record_id)
        if row is None or (not request.hard and (
                row.record.status is RecordStatus.DELETED or row.record.is_expired(ctx.now))):
            _raise_missing(request.expected_revision)
        _check_revision(row.record, request.expected_revision)
        if request.hard:
            self._erase_rows([row], tombstone_idempotency=True)
            result = DeleteResult(row.record.id, sh, hard=True)
            if request.idempotency_key is not None:
                self._ledger.put_idempotency(IdempotencyEntry(
                    sh, request.operation.value, request.idempotency_key, fingerprint,
                    result.record_id, request.scope.tenant_id, request.scope.user_id,
                    hard=True))
            return result
        current = self._merged(row)
        tombstone = attrs.evolve(
            current, status=RecordStatus.DELETED, version=current.version + 1,
            revision=new_revision(), updated_at=ctx.now, index_state=IndexState.NOT_INDEXED)
        # The text leaves Mem0's vector store now; Mem0's history keeps it, as the
        # tombstone in ours does, until the record is erased.
        intent = Intent(tombstone.id, sh, self._namespace(sh), "delete",
                        request.idempotency_key,
                        fingerprint if request.idempotency_key is not None else None,
                        tombstone)
        self._ledger.put_intent(intent)
        try:
            self._client.delete(row.mem0_id)
        except Exception as exc:
            if not outcome_unknown(exc) or self._call(self._client.get, row.mem0_id):
                self._ledger.drop_intent(tombstone.id)
                raise _not_applied(exc) from None
            self.reconciled_writes += 1
        self._commit_intent(intent, row.mem0_id, VersionOperation.DELETE, ctx)
        return DeleteResult(row.record.id, sh, hard=False, version=tombstone.version,
                            revision=tombstone.revision)

    # -- reads ----------------------------------------------------------------------

    async def get(self, request: GetRequest, ctx: OperationContext) -> MemoryRecord:
        request.validate()
        self._require_open()
        return await self._locked(self._get, request, ctx)

    def _get(self, request: GetRequest, ctx: OperationContext) -> MemoryRecord:
        sh = request.scope.scope_hash
        if request.record_id is not None:
            row = self._ledger.record(sh, request.record_id)
        else:
            assert request.key is not None  # validate() guarantees exactly one
            row = self._ledger.record_by_key(sh, request.key)
        if row is None or not row.record.is_visible(ctx.now):
            raise MemoryNotFoundError("no live record with that id or key in this scope")
        return self._merged(row)

    async def list(self, request: ListRequest, ctx: OperationContext) -> Page[MemoryRecord]:
        request.validate()
        self._require_open()
        sh = request.scope.scope_hash
        after = (decode_cursor(request.cursor, "list", sh)
                 if request.cursor is not None else None)
        items = await self._locked(self._list, request, after, ctx)
        cursor = (encode_cursor("list", sh, items[-1].id)
                  if len(items) == request.limit else None)
        return Page(items=items, next_cursor=cursor)

    def _list(self, request: ListRequest, after: str | None,
              ctx: OperationContext) -> tuple[MemoryRecord, ...]:
        rows = self._ledger.visible_page(request.scope.scope_hash, after, request.limit,
                                         request.memory_types, ctx.now)
        return tuple(self._merged(row) for row in rows)

    async def search(self, request: SearchRequest, ctx: OperationContext) -> SearchResult:
        request.validate()
        self._require_open()
        if request.ranking is not None:
            raise MemoryCapabilityUnsupportedError(
                "mem0 ranks by its own similarity; a search's ranking options are not "
                "supported")
        if not request.query.strip():
            return SearchResult(hits=(), candidates=0)
        return await self._locked(self._search, request, ctx)

    def _search(self, request: SearchRequest, ctx: OperationContext) -> SearchResult:
        """Mem0 ranks each scope's namespace; the ledger decides what may be shown.

        Each scope contributes its best ``limit`` visible matches, so the merged top
        ``limit`` is exact; the merge orders by score, then id.
        """
        found: builtins.list[tuple[float, MemoryRecord]] = []
        candidates = 0
        for scope in {s.scope_hash: s for s in request.scopes}.values():
            matches, screened = self._search_scope(scope.scope_hash, request, ctx)
            found.extend(matches)
            candidates += screened
        found.sort(key=lambda pair: (-pair[0], pair[1].id))
        hits = tuple(
            SearchHit(record=record, score=score, rank=rank, explanation=HitExplanation(
                signals=(SignalScore(name="mem0_vector", value=score, rank=rank),),
                tie_break=_TIE_BREAK))
            for rank, (score, record) in enumerate(found[: request.limit], start=1))
        return SearchResult(hits=hits, candidates=candidates)

    def _search_scope(self, sh: str, request: SearchRequest, ctx: OperationContext
                      ) -> tuple[builtins.list[tuple[float, MemoryRecord]], int]:
        """The scope's best ``limit`` visible matches and how many candidates were screened.

        Mem0 is asked for ``limit`` plus the scope's hidden records first, since hidden
        ones (pending, expired) may outrank visible ones; if filters thin the answer out,
        or an unseen item could still tie the last match, the request doubles, up to
        everything the namespace holds. Candidates are screened on the ledger's plain
        columns and only read in full while the limit still needs them.
        """
        held, hidden = self._ledger.held_in_scope(sh, ctx.now)
        if held == 0:
            return [], 0
        cover = self._client.full_cover(held)
        top_k = max(1, min(cover, request.limit + hidden))
        types = {t.value for t in request.memory_types}
        seen: dict[str, MemoryRecord | None] = {}  # read once, even if the request doubles
        while True:
            items = self._call(self._client.search, self._namespace(sh), request.query, top_k)
            index = self._ledger.screen([item.mem0_id for item in items])
            screened: builtins.list[tuple[float, str, Item]] = []
            found: builtins.list[tuple[float, MemoryRecord]] = []
            for item in items:
                score = float(item.score or 0.0)
                entry = index.get(item.mem0_id)
                if entry is None or entry.scope_hash != sh:
                    stranger = self._foreign(item, sh)
                    if stranger is not None:
                        found.append((score, stranger))
                    continue
                if (entry.status == RecordStatus.ACTIVE.value
                        and (entry.expires_at is None or entry.expires_at > ctx.now)
                        and (not types or entry.memory_type in types)):
                    screened.append((score, entry.record_id, item))
            screened.sort(key=lambda c: (-c[0], c[1]))
            kept = 0
            for score, record_id, item in screened:
                if kept == request.limit:
                    break
                if record_id not in seen:
                    row = self._ledger.record(sh, record_id)
                    seen[record_id] = None if row is None else self._merged(row, item)
                record = seen[record_id]
                if record is not None and _matches(record, request, ctx.now):
                    found.append((score, record))
                    kept += 1
            # A store that filters before ranking is done once it answers short; faiss
            # (filtering after) only once the request covers the whole collection.
            exhausted = (len(items) < top_k if self._client.exact_filters
                         else top_k >= cover)
            last = min((float(item.score or 0.0) for item in items), default=0.0)
            settled = kept == request.limit and min(
                score for score, record in found if record.scope_hash == sh) > last
            if exhausted or settled:
                return found, len(screened)
            top_k = top_k * 2 if self._client.exact_filters else min(cover, top_k * 2)

    def _foreign(self, item: Item, scope_hash: str) -> MemoryRecord | None:
        """An item Mem0 returned for a namespace that the ledger does not place there.

        An orphan of a timed-out write (its marker names this scope) is skipped. One whose
        marker names another scope is handed on *with that scope*, so the manager drops
        it and records ``memory.read.scope_violation``; it is never relabelled as ours.
        """
        self.foreign_items += 1
        marker = item.marker
        if marker is None or marker.get("scope_hash") == scope_hash:
            log.warning("mem0 returned an item the adapter did not write in this namespace")
            return None
        try:
            scope = Scope.from_dimensions(dict(marker.get("scope") or {}))
            now = self._clock.now()
            return MemoryRecord(
                id=str(marker.get("id") or item.mem0_id), scope=scope,
                scope_hash=scope.scope_hash, content=item.text,
                memory_type=MemoryType(marker.get("memory_type", "note")),
                version=int(marker["version"]),
                revision=str(marker["revision"]), content_hash=content_hash(item.text),
                status=RecordStatus.ACTIVE, created_at=now, updated_at=now)
        except (GovernedMemoryError, KeyError, TypeError, ValueError):
            log.warning("mem0 returned an item with an unreadable marker; dropped")
            return None

    async def history(self, request: HistoryRequest,
                      ctx: OperationContext) -> tuple[MemoryVersion, ...]:
        request.validate()
        self._require_open()
        return await self._locked(self._history, request, ctx)

    def _history(self, request: HistoryRequest,
                 ctx: OperationContext) -> tuple[MemoryVersion, ...]:
        row = self._ledger.record(request.scope.scope_hash, request.record_id)
        # A tombstone's history stays readable; an expired record is gone for every read.
        if row is None or row.record.is_expired(ctx.now):
            raise MemoryNotFoundError("no record with that id in this scope")
        return tuple(self._ledger.versions(row.record.id))

    # -- maintenance ----------------------------------------------------------------

    async def delete_all(self, request: DeleteAllRequest, ctx: OperationContext) -> int:
        request.validate()
        self._require_open()
        erased = await self._locked(self._erase_scope, request.scope.scope_hash)
        return erased.records

    def _erase_scope(self, scope_hash: str) -> _Erased:
        """Every record of one exact scope, then anything else left in its namespace."""
        total = _Erased()
        while True:
            rows = self._ledger.scan(scope_hash, None, 200)
            if not rows:
                break
            total += self._erase_rows(rows, tombstone_idempotency=False, sweep=False)
        total += self._sweep(self._namespace(scope_hash), record_id=None)
        with self._ledger.transaction():
            removed = self._ledger.erase_idempotency_of_scope(scope_hash)
            for record_id in self._ledger.intents_in_scope(scope_hash):
                self._ledger.drop_intent(record_id)
        self._ledger.settle_erasure()
        scopes = frozenset({scope_hash}) if removed else frozenset()
        return total + _Erased(idempotency_entries=removed, scope_hashes=scopes)

    async def delete_user(self, request: DeleteUserRequest,
                          ctx: OperationContext) -> ErasureReceipt:
        request.validate()
        self._require_open()
        erased = await self._locked(self._erase_user, request.tenant_id, request.user_id)
        counts = {"records": erased.records, "versions": erased.versions,
                  "idempotency_entries": erased.idempotency_entries,
                  "mem0_memories": erased.mem0_memories,
                  "mem0_history_entries_left": erased.mem0_history_left}
        return ErasureReceipt(
            request_id=ctx.operation_id, tenant_id=request.tenant_id, user_id=request.user_id,
            counts=counts, scope_hashes=tuple(sorted(erased.scope_hashes)),
            started_at=ctx.now, completed_at=max(ctx.now, self._clock.now()),
        ).sealed()

    def _erase_user(self, tenant_id: str, user_id: str) -> _Erased:
        total = _Erased()
        for namespace in self._ledger.namespaces_of_user(tenant_id, user_id):
            total += self._erase_scope(namespace.scope_hash)
            self._ledger.forget_namespace(namespace.scope_hash)
        # Records whose namespace row is missing (none expected) are still the user's.
        leftovers = [row for record_id in self._ledger.user_record_ids(tenant_id, user_id)
                     for row in self._rows_by_id(record_id)]
        if leftovers:
            total += self._erase_rows(leftovers, tombstone_idempotency=False)
        removed = self._ledger.erase_idempotency_of_user(tenant_id, user_id)
        total += _Erased(idempotency_entries=removed)
        # Every search cache of the tenant, in any process, is stale from here on.
        self._ledger.advance_epoch(tenant_id, sorted(total.scope_hashes))
        return total

    def _rows_by_id(self, record_id: str) -> builtins.list[LedgerRow]:
        row = self._ledger.db.execute("SELECT scope_hash FROM records WHERE id = ?",
                                      (record_id,)).fetchone()
        found = None if row is None else self._ledger.record(row[0], record_id)
        return [] if found is None else [found]

    async def purge_expired(self, request: PurgeExpiredRequest,
                            ctx: OperationContext) -> CleanupPage:
        request.validate()
        self._require_open()
        sh = request.scope.scope_hash
        after = (decode_cursor(request.after, "purge", sh, field="after")
                 if request.after is not None else None)
        inspected, deleted = await self._locked(self._purge, sh, after, request.limit, ctx)
        cursor = (encode_cursor("purge", sh, inspected[-1])
                  if len(inspected) == request.limit else None)
        return CleanupPage(deleted=deleted, next_cursor=cursor)

    def _purge(self, scope_hash: str, after: str | None, limit: int,
               ctx: OperationContext) -> tuple[builtins.list[str], int]:
        rows = self._ledger.scan(scope_hash, after, limit)
        expired = [row for row in rows if row.record.is_expired(ctx.now)]
        erased = self._erase_rows(expired, tombstone_idempotency=False) if expired else _Erased()
        return [row.record.id for row in rows], erased.records

    # -- erasure --------------------------------------------------------------------

    def _erase_rows(self, rows: Iterable[LedgerRow], *, tombstone_idempotency: bool,
                    sweep: bool = True) -> _Erased:
        """Remove records from Mem0 (vector store and history) and then from the ledger.

        Mem0 goes first: if it fails, the ledger still points at what is left, so the
        erasure can simply be run again.
        """
        total = _Erased()
        for row in rows:
            removed = self._call(self._client.delete, row.mem0_id)
            left = self._call(self._client.erase_history, [row.mem0_id])
            extra = (self._sweep(self._namespace(row.record.scope_hash), row.record.id)
                     if row.stray and sweep else _Erased())
            with self._ledger.transaction():
                versions, idem = self._ledger.erase_record(
                    row.record.id, tombstone_idempotency=tombstone_idempotency)
            total += extra + _Erased(records=1, versions=versions, idempotency_entries=idem,
                                     mem0_memories=int(removed), mem0_history_left=left,
                                     scope_hashes=frozenset({row.record.scope_hash}))
        self._ledger.settle_erasure()
        if total.mem0_history_left:
            raise MemoryStorageError("Mem0 still serves history of an erased memory")
        return total

    def _sweep(self, namespace: str, record_id: str | None) -> _Erased:
        """Delete what Mem0 still holds in a namespace (all of it, or one record's copies):
        orphans of timed-out writes and anything written there behind our back."""
        doomed = [item.mem0_id for item in self._call(lambda: list(self._client.items(namespace)))
                  if record_id is None or (item.marker or {}).get("id") == record_id]
        for mem0_id in doomed:
            self._call(self._client.delete, mem0_id)
        left = self._call(self._client.erase_history, doomed) if doomed else 0
        return _Erased(mem0_memories=len(doomed), mem0_history_left=left)

    # -- helpers --------------------------------------------------------------------

    def _marker(self, record: MemoryRecord,
                request: AddRequest | UpdateRequest) -> dict[str, Any]:
        return {"id": record.id, "scope": record.scope.dimensions(),
                "scope_hash": record.scope_hash, "revision": record.revision,
                "version": record.version, "memory_type": record.memory_type.value,
                "idempotency_key": request.idempotency_key}

    def _merged(self, row: LedgerRow, item: Item | None = None) -> MemoryRecord:
        """The record: ledger fields plus Mem0's text, after checking they belong together."""
        if item is None:
            item = self._call(self._client.get, row.mem0_id)
        record = row.record
        marker = None if item is None else item.marker
        if item is None or (marker is not None and marker.get("id") == record.id
                            and marker.get("revision") != record.revision):
            adopted = self._adopt_intent(row, item)
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

    def _adopt_intent(self, row: LedgerRow, item: Item | None) -> MemoryRecord | None:
        """An update or soft delete that was not confirmed did land after all: record it
        now. Mem0 shows which: the update's revision in the marker, or no memory left."""
        intent = self._ledger.intent_of(row.record.id)
        if intent is None or row.record.status is RecordStatus.DELETED:
            return None
        pending = intent.record
        if intent.operation == "delete":
            if item is not None:
                return None
            self._commit_intent(intent, row.mem0_id, VersionOperation.DELETE)
            return pending
        if intent.operation != "update" or item is None:
            return None
        marker = item.marker or {}
        if (pending.revision != marker.get("revision")
                or content_hash(item.text) != pending.content_hash):
            return None
        self._commit_intent(intent, row.mem0_id, VersionOperation.UPDATE)
        return pending

    def _commit_intent(self, intent: Intent, mem0_id: str, operation: VersionOperation,
                       ctx: OperationContext | None = None) -> None:
        """Record a write Mem0 applied: at once (``ctx`` given), or when it is found
        applied after its caller was told it was not confirmed, or after a crash."""
        record = intent.record
        operation_id = ctx.operation_id if ctx is not None else None
        with self._ledger.transaction():
            self._ledger.put_record(record, mem0_id, stray=(
                ctx is None and operation is VersionOperation.ADD))
            self._ledger.append_version(MemoryVersion(
                record, operation, record.updated_at, operation_id))
            if intent.idempotency_key is not None and intent.fingerprint is not None:
                self._ledger.put_idempotency(IdempotencyEntry(
                    record.scope_hash, intent.operation, intent.idempotency_key,
                    intent.fingerprint, record.id, record.scope.tenant_id,
                    record.scope.user_id, record.version, record.revision))
            self._ledger.drop_intent(record.id)
        if ctx is None:
            self.reconciled_writes += 1

    def _find(self, namespace: str, record_id: str, revision: str) -> Item | None:
        """Look for a write's marker in Mem0 (reconciliation after an unknown outcome)."""
        try:
            for item in self._client.items(namespace):
                marker = item.marker or {}
                if marker.get("id") == record_id and marker.get("revision") == revision:
                    return item
        except Exception:
            raise MemoryUnavailableError(
                "Mem0 did not confirm the write and could not be asked whether it landed; "
                "retrying with the same idempotency key finishes it if it did") from None
        return None

    def _landed(self, mem0_id: str, revision: str) -> bool:
        try:
            item = self._client.get(mem0_id)
        except Exception:
            raise MemoryUnavailableError(
                "Mem0 did not confirm the update and could not be asked whether it landed"
            ) from None
        return item is not None and (item.marker or {}).get("revision") == revision

    def _replayed(self, scope_hash: str, request: AddRequest | UpdateRequest,
                  ctx: OperationContext) -> MemoryRecord | None:
        if request.idempotency_key is None:
            return None
        entry = self._ledger.idempotency(scope_hash, request.operation.value,
                                         request.idempotency_key)
        if entry is None:
            return None
        _check_fingerprint(entry, _fingerprint(ctx, request))
        snapshot = (self._ledger.version(entry.record_id, entry.version)
                    if entry.version is not None and not entry.erased else None)
        if snapshot is None:
            verb = "created" if isinstance(request, AddRequest) else "updated"
            raise MemoryConflictError(f"the record {verb} with this idempotency key was erased")
        return snapshot.record

    def _remember(self, request: AddRequest | UpdateRequest, record: MemoryRecord,
                  ctx: OperationContext) -> None:
        if request.idempotency_key is None:
            return
        self._ledger.put_idempotency(IdempotencyEntry(
            record.scope_hash, request.operation.value, request.idempotency_key,
            _fingerprint(ctx, request), record.id, record.scope.tenant_id,
            record.scope.user_id, record.version, record.revision))


def _not_applied(exc: BaseException) -> GovernedMemoryError:
    """A failed Mem0 write that reconciliation showed did not apply."""
    error = translate(exc)
    if isinstance(error, MemoryUnavailableError):
        return MemoryUnavailableError(
            "Mem0 did not complete the write; it was checked and nothing changed")
    return error


def _elapsed_ms(began: float) -> float:
    return (time.perf_counter() - began) * 1000.0
