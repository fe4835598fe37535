"""Retrieval snapshots written in batches, off the request path.

A search is a read: making it wait for a write transaction and an fsync to store what it
returned would make every search pay for a durability that only ``replay`` needs. In
``batched`` mode a search hands its snapshot here and returns; the snapshots of all
searches in a short window are stored by one write unit (one fsync per batch, none per
search). A crash before a batch is written loses its snapshots: their ids carry the
tenant and the time they were taken, so ``replay`` can tell such a loss (the id is one
this tenant was given, recently enough that retention would have kept it) from an id
that never existed, and report it as lost rather than silently as missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs
from governed_memory.errors import MemoryNotFoundError
from governed_memory.ids import new_id
from governed_memory.replay import SnapshotLostError

from governed_memory_native.port import StorageBackend, WriteTransaction

logger = logging.getLogger("governed_memory_native.record_copies")

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
