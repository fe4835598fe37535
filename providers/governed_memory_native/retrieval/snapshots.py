"""Retrieval snapshots: what one search returned, stored so it can be replayed exactly, and
written in batches off the request path.

A snapshot holds ids, versions, scores and each hit's explanation, the searched scopes,
the profile and policy revisions, the decision id and the ranking configuration. It
holds no content and no query text (a hash of the query, filters and limit instead):
replay reads each record at its stored version from the version history, so what it
shows is exactly what the search showed, and nothing a later erasure removed.

A search is a read: making it wait for a write transaction and an fsync to store what it
returned would make every search pay for a durability that only ``replay`` needs. In
``batched`` mode a search hands its snapshot to the writer here and returns; the
snapshots of all searches in a short window are stored by one write unit (one fsync per
batch, none per search). A crash before a batch is written loses its snapshots: their ids
carry the tenant and the time they were taken, so ``replay`` can tell such a loss (the id
is one this tenant was given, recently enough that retention would have kept it) from an
id that never existed, and report it as lost rather than silently as missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs
from governed_memory.canonical import canonical_json
from governed_memory.converter import structure, unstructure
from governed_memory.errors import MemoryNotFoundError, MemoryStorageError, MemoryValidationError
from governed_memory.ids import new_id
from governed_memory.indexing import RankingConfig
from governed_memory.operation_context import OperationContext, ProfileRef
from governed_memory.read_filters import VALUE_FILTERS
from governed_memory.records import HitExplanation, SearchHit, SignalScore
from governed_memory.replay import ReplayResult, SnapshotHeader, SnapshotLostError
from governed_memory.requests import SearchRequest
from governed_memory.scope import Scope

from governed_memory_native.storage.copies import detach
from governed_memory_native.storage.port import ReadTransaction, StorageBackend, WriteTransaction

FORMAT: Final = 1


def _digest(value: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical_json(value).encode()).hexdigest()


def _hashed_request(request: SearchRequest) -> dict[str, Any]:
    """What the request hash covers. The time and read filters count only when set, so
    a search without them hashes as it did before they existed."""
    hashed: dict[str, Any] = {"query": request.query, "limit": request.limit,
                              "memory_types": [t.value for t in request.memory_types],
                              "entity_ids": list(request.entity_ids),
                              "metadata_filter": dict(request.metadata_filter)}
    for name in ("occurred_since", "occurred_before", "as_of"):
        if getattr(request, name) is not None:
            hashed[name] = getattr(request, name)
    if request.visibility is not None:
        hashed["visibility"] = request.visibility.value
    for name in VALUE_FILTERS:
        if getattr(request, name):
            hashed[name] = list(getattr(request, name))
    return hashed


def snapshot_body(snapshot_id: str, request: SearchRequest, ctx: OperationContext,
                  ranking: RankingConfig, embedder: str | None, signals: Sequence[str],
                  hits: Sequence[SearchHit], candidates: int) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "snapshot_id": snapshot_id,
        "created_at": ctx.now,
        "operation_id": ctx.operation_id,
        "principal_id": ctx.principal.principal_id,
        "tenant_id": request.scopes[0].tenant_id,
        "scopes": [scope.dimensions() for scope in request.scopes],
        "request_hash": _digest(_hashed_request(request)),
        "profile": {"id": ctx.profile.id, "version": ctx.profile.version,
                    "revision": ctx.profile.revision},
        "decision_id": ctx.decision_id,
        "policy_revision": ctx.policy_revision,
        "ranking": {**ranking.as_dict(), "revision": ranking.revision, "embedder": embedder,
                    "signals": list(signals)},
        "candidates": candidates,
        "hits": [{"record_id": hit.record.id, "version": hit.record.version,
                  "score": hit.score, "rank": hit.rank,
                  "signals": [unstructure(signal) for signal in hit.explanation.signals],
                  "tie_break": hit.explanation.tie_break}
                 for hit in hits],
    }


def tombstone(tenant_id: str, erased_at: float, operation_id: str) -> dict[str, Any]:
    """What is left of a snapshot that named an erased user: that it existed."""
    return {"format": FORMAT, "erased": True, "tenant_id": tenant_id,
            "erased_at": erased_at, "erased_by": operation_id}


def header(snapshot_id: str, body: Mapping[str, Any] | None, tenant_id: str) -> SnapshotHeader:
    if body is None or body.get("tenant_id") != tenant_id:
        # Another tenant's snapshot is indistinguishable from a missing one.
        raise MemoryNotFoundError("no retrieval snapshot with that id")
    if body.get("erased"):
        return SnapshotHeader(snapshot_id, tenant_id, (), erased=True)
    try:
        scopes = tuple(Scope.from_dimensions(dims) for dims in body["scopes"])
    except (KeyError, TypeError, MemoryValidationError):
        raise MemoryStorageError("a stored retrieval snapshot could not be read") from None
    return SnapshotHeader(snapshot_id, tenant_id, scopes)


async def replay(tx: ReadTransaction, snapshot_id: str,
                 body: Mapping[str, Any]) -> ReplayResult:
    """Every hit at its stored version; versions erased since are listed, not shown."""
    hits: list[SearchHit] = []
    erased: list[str] = []
    try:
        for hit in body["hits"]:
            version = await tx.versions.get(hit["record_id"], int(hit["version"]))
            if version is None:
                erased.append(str(hit["record_id"]))
                continue
            signals = tuple(structure(signal, SignalScore) for signal in hit["signals"])
            hits.append(SearchHit(record=detach(version.record), score=float(hit["score"]),
                                  rank=int(hit["rank"]),
                                  explanation=HitExplanation(signals, str(hit["tie_break"]))))
        profile = body["profile"]
        return ReplayResult(
            snapshot_id=snapshot_id, created_at=float(body["created_at"]), hits=tuple(hits),
            erased_record_ids=tuple(erased), candidates=int(body["candidates"]),
            profile=ProfileRef(profile["id"], profile["version"], profile["revision"]),
            policy_revision=body["policy_revision"], decision_id=body["decision_id"],
            ranking=body["ranking"])
    except (KeyError, TypeError, ValueError):
        raise MemoryStorageError("a stored retrieval snapshot could not be read") from None

logger = logging.getLogger("governed_memory_native.record_copies")  # its name before the rooms

FLUSH_DELAY_S: Final = 0.05
"""How long a snapshot may wait for others to share its write."""

MAX_BATCH: Final = 256
"""Snapshots per write unit; a fuller queue is written at once."""

MAX_QUEUED: Final = 10_000
"""Past this many unwritten snapshots (storage down for writes), the oldest are dropped,
and ``replay`` reports them lost."""

_PREFIX: Final = "snap_"
_BATCHED: Final = "b"


def sync_snapshot_id() -> str:
    return _PREFIX + new_id()


def batched_snapshot_id(tenant_id: str, now: float) -> str:
    """``snap_<ulid>_b<tenant tag><taken at, hex seconds>``: enough for ``replay`` to
    tell a batched snapshot lost in a crash from an id that never existed."""
    return f"{_PREFIX}{new_id()}_{_BATCHED}{_tenant_tag(tenant_id)}{int(now):x}"


def raise_missing(snapshot_id: str, tenant_id: str, now: float, retention_s: float) -> None:
    """No stored snapshot has this id: lost, if it is a batched id this tenant was given
    within the retention window; otherwise not found (also for another tenant's ids)."""
    _, _, suffix = snapshot_id.partition("_b")
    tag, taken = suffix[:8], suffix[8:]
    if snapshot_id.startswith(_PREFIX) and tag == _tenant_tag(tenant_id) and taken:
        try:
            taken_at = int(taken, 16)
        except ValueError:
            taken_at = None
        if taken_at is not None and now - taken_at < retention_s:
            raise SnapshotLostError(
                "the snapshot was taken but never stored (its batch was lost, e.g. in a "
                "crash): the search cannot be replayed")
    raise MemoryNotFoundError("no retrieval snapshot with that id")


def _tenant_tag(tenant_id: str) -> str:
    return hashlib.sha256(tenant_id.encode()).hexdigest()[:8]


@attrs.frozen(slots=True)
class PendingSnapshot:
    snapshot_id: str
    tenant_id: str
    body: Mapping[str, Any]
    created_at: float
    subjects: Sequence[str]


async def store(tx: WriteTransaction, items: Sequence[PendingSnapshot]) -> None:
    """Store ``items`` in the caller's transaction. Retention is not enforced here: the
    governed maintenance round (``purge_snapshots``) removes expired snapshots, so no
    removal ever happens without a decision and an event."""
    for item in items:
        await tx.snapshots.put(item.snapshot_id, item.tenant_id, item.body,
                              created_at=item.created_at, subjects=item.subjects)


class SnapshotWriter:
    """Queues snapshots and stores them in batches, one write unit per batch."""

    def __init__(self, backend: StorageBackend) -> None:
        self._backend = backend
        self._queue: list[PendingSnapshot] = []
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    @property
    def queued(self) -> int:
        return len(self._queue)

    def submit(self, item: PendingSnapshot) -> None:
        """Queue ``item``; a flush is scheduled, and the caller does not wait for it."""
        self._queue.append(item)
        if len(self._queue) > MAX_QUEUED:
            dropped = len(self._queue) - MAX_QUEUED
            del self._queue[:dropped]
            logger.warning("retrieval snapshots: storage is not taking writes; %d unwritten "
                           "snapshots dropped (replay reports them lost)", dropped)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._flush_soon())

    async def _flush_soon(self) -> None:
        if len(self._queue) < MAX_BATCH:
            await asyncio.sleep(FLUSH_DELAY_S)
        try:
            await self.flush()
        except Exception:
            logger.warning("retrieval snapshots: a batch could not be stored; it is retried "
                           "with the next one", exc_info=True)

    async def flush(self) -> None:
        """Store everything queued now (``replay`` and ``close`` call it first)."""
        async with self._lock:
            while self._queue:
                items = self._queue[:MAX_BATCH]
                del self._queue[:len(items)]

                async def unit(tx: WriteTransaction,
                               items: Sequence[PendingSnapshot] = items) -> None:
                    await store(tx, items)

                try:
                    await self._backend.run_write(unit)
                except BaseException:
                    self._queue[:0] = items
                    raise

    async def close(self) -> None:
        """Write what is queued; the scheduled flush, if any, has nothing left to do."""
        task, self._task = self._task, None
        try:
            await self.flush()
        finally:
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
