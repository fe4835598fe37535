"""Get, list, history and search: the ledger decides what may be shown, Mem0 the text.

Mem0 would answer a read with whatever its namespace holds, ordered as it likes and
truncated by ``get_all``. Here every read starts from the ledger row of the requested
scope (so another scope's id is simply "not found"), pages by our time-sortable ids,
and checks each item Mem0 returns against the ledger and its own marker before it is
handed on.
"""

from __future__ import annotations

from typing import Final

from governed_memory.errors import GovernedMemoryError, MemoryNotFoundError
from governed_memory.operation_context import OperationContext
from governed_memory.provider_kit import matches_filters
from governed_memory.records import (
    HitExplanation,
    MemoryRecord,
    MemoryType,
    MemoryVersion,
    RecordStatus,
    SearchHit,
    SearchResult,
    SignalScore,
    content_hash,
)
from governed_memory.requests import GetRequest, HistoryRequest, ListRequest, SearchRequest
from governed_memory.scope import Scope

from governed_memory_mem0.clients import Item
from governed_memory_mem0.reconcile import Reconciler
from governed_memory_mem0.store import Mem0Store, log

__all__ = ["Reads"]

_TIE_BREAK: Final = "score desc, id asc"


class Reads:
    """The bodies of ``get``, ``list``, ``history`` and ``search``, under the store lock."""

    def __init__(self, store: Mem0Store, reconciler: Reconciler) -> None:
        self._store = store
        self._reconciler = reconciler

    def get(self, request: GetRequest, ctx: OperationContext) -> MemoryRecord:
        ledger = self._store.ledger
        sh = request.scope.scope_hash
        if request.record_id is not None:
            row = ledger.record(sh, request.record_id)
        else:
            assert request.key is not None  # validate() guarantees exactly one
            row = ledger.record_by_key(sh, request.key)
        if row is None or not row.record.is_visible(ctx.now):
            raise MemoryNotFoundError("no live record with that id or key in this scope")
        return self._reconciler.merged(row)

    def page(self, request: ListRequest, after: str | None,
             ctx: OperationContext) -> tuple[MemoryRecord, ...]:
        """One ``list`` page after the cursor's id, ascending by id."""
        rows = self._store.ledger.visible_page(request.scope.scope_hash, after, request.limit,
                                               request.memory_types, ctx.now)
        return tuple(self._reconciler.merged(row) for row in rows)

    def history(self, request: HistoryRequest,
                ctx: OperationContext) -> tuple[MemoryVersion, ...]:
        row = self._store.ledger.record(request.scope.scope_hash, request.record_id)
        # A tombstone's history stays readable; an expired record is gone for every read.
        if row is None or row.record.is_expired(ctx.now):
            raise MemoryNotFoundError("no record with that id in this scope")
        return tuple(self._store.ledger.versions(row.record.id))

    def search(self, request: SearchRequest, ctx: OperationContext) -> SearchResult:
        """Mem0 ranks each scope's namespace; the ledger decides what may be shown.

        Each scope contributes its best ``limit`` visible matches, so the merged top
        ``limit`` is exact; the merge orders by score, then id.
        """
        found: list[tuple[float, MemoryRecord]] = []
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
                      ) -> tuple[list[tuple[float, MemoryRecord]], int]:
        """The scope's best ``limit`` visible matches and how many candidates were screened.

        Mem0 is asked for ``limit`` plus the scope's hidden records first, since hidden
        ones (pending, expired) may outrank visible ones; if filters thin the answer out
        (types, entities, metadata, event time, visibility, source, sensitivity), or an
        unseen item could still tie the last match, the request doubles, up to
        everything the namespace holds: a filter never leaves the answer short while a
        matching record is left unread. Candidates are screened on the ledger's plain
        columns and only read in full while the limit still needs them.
        """
        store, ledger, client = self._store, self._store.ledger, self._store.client
        held, hidden = ledger.held_in_scope(sh, ctx.now)
        if held == 0:
            return [], 0
        cover = client.full_cover(held)
        top_k = max(1, min(cover, request.limit + hidden))
        types = {t.value for t in request.memory_types}
        seen: dict[str, MemoryRecord | None] = {}  # read once, even if the request doubles
        while True:
            items = store.call(client.search, store.namespace(sh), request.query, top_k)
            index = ledger.screen([item.mem0_id for item in items])
            screened: list[tuple[float, str, Item]] = []
            found: list[tuple[float, MemoryRecord]] = []
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
                    row = ledger.record(sh, record_id)
                    seen[record_id] = (None if row is None
                                       else self._reconciler.merged(row, item))
                record = seen[record_id]
                if (record is not None and matches_filters(record, request, ctx.now)
                        and request.admits(record)):
                    found.append((score, record))
                    kept += 1
            # A store that filters before ranking is done once it answers short; faiss
            # (filtering after) only once the request covers the whole collection.
            exhausted = len(items) < top_k if client.exact_filters else top_k >= cover
            last = min((float(item.score or 0.0) for item in items), default=0.0)
            settled = kept == request.limit and min(
                score for score, record in found if record.scope_hash == sh) > last
            if exhausted or settled:
                return found, len(screened)
            top_k = top_k * 2 if client.exact_filters else min(cover, top_k * 2)

    def _foreign(self, item: Item, scope_hash: str) -> MemoryRecord | None:
        """An item Mem0 returned for a namespace that the ledger does not place there.

        An orphan of a timed-out write (its marker names this scope) is skipped. One whose
        marker names another scope is handed on *with that scope*, so the manager drops
        it and records ``memory.read.scope_violation``; it is never relabelled as ours.
        """
        self._store.foreign_items += 1
        marker = item.marker
        if marker is None or marker.get("scope_hash") == scope_hash:
            log.warning("mem0 returned an item the adapter did not write in this namespace")
            return None
        try:
            scope = Scope.from_dimensions(dict(marker.get("scope") or {}))
            now = self._store.clock.now()
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
