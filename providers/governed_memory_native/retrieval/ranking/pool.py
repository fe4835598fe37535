"""Lexical searches ranked in worker processes, so ranking neither waits for the
interpreter lock nor holds it against the event loop.

Why (measured, ``bench/scale.py``'s ``readers`` and ``hybrid`` sections,
``docs/retrieval.md``): the one exact top-k (:mod:`retrieval.lexical`) is Python, and Python
holds the interpreter's lock on whatever thread it runs. On SQLite, eight concurrent
searches on the reader threads were *slower* together than one after another (the
threads hand the lock back and forth at every row), and a thread ranking delayed the
event loop; on PostgreSQL the ranking ran on the event loop itself. Less work (fewer,
batched requests; bounds that prune common words) shortens each search but cannot let
two run at once; no native code ranks exactly as the other backends do. A process has
a lock of its own.

How: :class:`RankingPool` starts ``processes`` workers (:mod:`retrieval.ranking.worker`, a fresh
interpreter each: ``python -m governed_memory_native.retrieval.ranking.worker``, never a fork of
a threaded process nor a re-import of the application's main module) the first time a
search in the provider's own process examined :data:`WAKE_CANDIDATES` records or more;
small stores never start one. Each worker opens the provider's store read-only; a
search goes to the worker with the fewest searches in flight and comes back as ranked
rows, decoded here. Until a worker is ready, when none is, or when one answers
``retry``, the search runs in the provider's process as before: the pool only ever
moves work, never changes an answer.

Consistency: a lexical-only search is the worker's one read transaction, as it would be
the provider's. A hybrid search reads its vectors in the provider's unit of work; the
worker then also reads the scopes' revisions (:mod:`sql.revisions`, advanced in the
transaction of every change to a scope's records or vectors, and the tenant's epoch) in
its own transaction, and the unit compares them with its own: equal revisions mean the
two snapshots hold the same records of those scopes, so the fused answer is one
snapshot's. Otherwise the unit ranks in-process (:attr:`RankingStats.stale`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import sys
from collections.abc import Mapping
from typing import Any, Final, Protocol, runtime_checkable

import attrs
from governed_memory.records import MemoryRecord

from governed_memory_native.retrieval.ranking import wire
from governed_memory_native.retrieval.ranking.wire import ROW_COLUMNS
from governed_memory_native.storage.values import ScoredRecord, SearchPage, SearchQuery

logger = logging.getLogger("governed_memory_native.ranking")

WAKE_CANDIDATES: Final = 1_000
"""A search in the provider's process that examined this many records starts the pool.
Sending a search to a worker and back costs a fraction of a millisecond (0.7 ms more
than in-process for a search of 100 records, on 2 cores at a load of 5): a search that
examines few records is not worth moving, one that examines a thousand is."""

MAX_IN_FLIGHT: Final = 64
"""Searches one worker may hold; past it (a stuck worker), searches run in-process."""

MAX_STARTS: Final = 8
"""Worker starts over the pool's life beyond ``processes`` (replacing lost workers);
past them, a pool whose workers keep dying stops trying and searches run in-process."""

_OPEN_TIMEOUT_S: Final = 30.0
_CLOSE_TIMEOUT_S: Final = 5.0


SERVICE_WORKERS_ENV: Final = "GOVERNED_MEMORY_SERVICE_WORKERS"
"""How many ``governed-memory serve --workers`` processes share this host (the service
sets it in each worker): they already spread searches over the cores."""


def default_processes() -> int:
    """Two workers on a machine of two cores or more (each search is one core's work,
    and the provider's own process needs one too); none on one core, and none under
    several service workers, which use the cores already (N workers with two ranking
    processes each would be 3N processes on the same cores)."""
    cores = os.cpu_count() or 1
    try:
        service_workers = int(os.environ.get(SERVICE_WORKERS_ENV, "1"))
    except ValueError:
        service_workers = 1
    if cores < 2 or service_workers > 1:
        return 0
    return min(2, cores)


@runtime_checkable
class RankableBackend(Protocol):
    """A backend whose store a worker process can open (SQLite, PostgreSQL)."""

    def ranking_store(self) -> Mapping[str, Any]:
        """The store as :func:`wire.store_spec` describes it."""
        ...

    def decode_row(self, row: Mapping[str, Any]) -> MemoryRecord:
        """A ``memory_records`` row (``ROW_COLUMNS``) as this backend decodes it."""
        ...


@attrs.define
class RankingStats:
    """Counters, written on the event loop only."""

    started: int = 0
    """Workers started (and ready)."""
    searches: int = 0
    """Searches a worker ranked and the provider used."""
    retries: int = 0
    """Searches a worker gave back (it failed there), run in-process."""
    stale: int = 0
    """Hybrid searches whose worker saw other revisions than the unit, run in-process."""
    lost: int = 0
    """Workers that exited while running (their searches ran in-process)."""

    def as_dict(self) -> dict[str, int]:
        return attrs.asdict(self)


@attrs.frozen(slots=True)
class RemotePage:
    page: SearchPage
    revisions: tuple[int, ...] | None
    """The scopes' revisions and the tenant's epoch the worker's transaction saw, when
    asked for (a hybrid search)."""


class _Worker:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.pending: dict[int, asyncio.Future[tuple[Any, ...] | None]] = {}
        self.reader: asyncio.Task[None] | None = None
        self.alive = True

    async def send(self, message: tuple[Any, ...]) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        stdin.write(wire.encode(message))
        await stdin.drain()

    async def receive(self) -> tuple[Any, ...]:
        stdout = self.process.stdout
        assert stdout is not None
        header = await stdout.readexactly(wire.HEADER.size)
        (size,) = wire.HEADER.unpack(header)
        if size > wire.MAX_MESSAGE:
            raise ValueError("a ranking answer longer than any search's")
        return wire.decode(await stdout.readexactly(size))


class RankingPool:
    """Worker processes ranking lexical searches on one provider's store."""

    def __init__(self, backend: RankableBackend, processes: int) -> None:
        self._backend = backend
        self._processes = processes
        self._workers: list[_Worker] = []
        self._ids = itertools.count(1)
        self._starting: asyncio.Task[None] | None = None
        self._starts = 0
        self._closed = False
        self.stats = RankingStats()

    @property
    def processes(self) -> int:
        return self._processes

    @property
    def ready(self) -> bool:
        """Whether a worker can take a search now."""
        return any(worker.alive for worker in self._workers)

    def wake(self) -> None:
        """Start the workers (in the background) if they are not running."""
        if (self._closed or self._processes <= 0
                or (self._starting is not None and not self._starting.done())):
            return
        missing = self._processes - sum(worker.alive for worker in self._workers)
        if missing <= 0 or self._starts >= self._processes + MAX_STARTS:
            return
        self._starting = asyncio.get_running_loop().create_task(
            self._start(missing), name="gm-ranking-start")

    async def started(self) -> bool:
        """Wait for the workers being started (if any) to be ready; whether one is."""
        starting = self._starting
        if starting is not None:
            await asyncio.shield(starting)
        return self.ready

    async def _start(self, count: int) -> None:
        store = dict(self._backend.ranking_store())
        for _ in range(count):
            if self._closed or self._starts >= self._processes + MAX_STARTS:
                return
            self._starts += 1
            try:
                worker = await self._spawn(store)
            except Exception as exc:  # no worker: searches stay in-process
                logger.warning("ranking worker did not start (%s); lexical searches rank "
                               "in-process", type(exc).__name__)
                return
            if self._closed:
                await _stop(worker)
                return
            self._workers.append(worker)
            self.stats.started += 1

    async def _spawn(self, store: Mapping[str, Any]) -> _Worker:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "governed_memory_native.retrieval.ranking.worker",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL)
        worker = _Worker(process)
        try:
            await worker.send(("open", store))
            answer = await asyncio.wait_for(worker.receive(), _OPEN_TIMEOUT_S)
            if answer[0] != "ready":
                raise RuntimeError(f"the worker could not open the store: {answer[1:]}")
        except BaseException:
            await _stop(worker)
            raise
        worker.reader = asyncio.get_running_loop().create_task(
            self._read(worker), name="gm-ranking-answers")
        return worker

    async def _read(self, worker: _Worker) -> None:
        try:
            while True:
                answer = await worker.receive()
                waiting = worker.pending.pop(answer[1], None)
                if waiting is not None and not waiting.done():
                    waiting.set_result(answer)
        except (asyncio.IncompleteReadError, ConnectionError, ValueError, EOFError):
            pass
        finally:
            worker.alive = False
            for waiting in worker.pending.values():
                if not waiting.done():
                    waiting.set_result(None)
            worker.pending.clear()
            if not self._closed:
                self.stats.lost += 1
                logger.warning("a ranking worker exited (status %s); its searches run "
                               "in-process", worker.process.returncode)
                self._workers = [w for w in self._workers if w is not worker]
                self.wake()  # replace it (a bounded number of times)

    async def search(self, query: SearchQuery, tenant_id: str, *,
                     revisions: bool) -> RemotePage | None:
        """The search ranked by a worker, or ``None``: no worker can take it now, or it
        failed there (the caller then runs it in-process, where its error, if any, is
        raised as usual)."""
        workers = [w for w in self._workers if w.alive and len(w.pending) < MAX_IN_FLIGHT]
        if not workers:
            return None
        worker = min(workers, key=lambda w: len(w.pending))
        request_id = next(self._ids)
        try:
            message = ("search", request_id, tenant_id, revisions,
                       wire.query_fields(query))
            waiting: asyncio.Future[tuple[Any, ...] | None] = (
                asyncio.get_running_loop().create_future())
            worker.pending[request_id] = waiting
            await worker.send(message)
        except (ValueError, ConnectionError, RuntimeError):
            worker.pending.pop(request_id, None)
            return None
        try:
            answer = await waiting
        finally:
            worker.pending.pop(request_id, None)
        if answer is None or answer[0] != "found":
            self.stats.retries += answer is not None
            return None
        _, _, seen, candidates, ranked = answer
        decode = self._backend.decode_row
        page = SearchPage(
            matches=tuple(ScoredRecord(decode(dict(zip(ROW_COLUMNS, row, strict=True))),
                                       float(score)) for score, row in ranked),
            candidates=int(candidates))
        self.stats.searches += 1
        return RemotePage(page, None if seen is None else tuple(seen))

    async def close(self) -> None:
        """Stop every worker (each finishes the search it is ranking, if any)."""
        self._closed = True
        starting, self._starting = self._starting, None
        if starting is not None and not starting.done():
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await starting
        workers, self._workers = self._workers, []
        await asyncio.gather(*(_stop(worker) for worker in workers))


async def _stop(worker: _Worker) -> None:
    """Close the worker's stdin (it exits after its current search), wait a little,
    then kill it; its answer reader ends with it."""
    worker.alive = False
    process = worker.process
    if process.stdin is not None:
        with contextlib.suppress(Exception):
            process.stdin.close()
    try:
        await asyncio.wait_for(process.wait(), _CLOSE_TIMEOUT_S)
    except (TimeoutError, ProcessLookupError):
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
    reader = worker.reader
    if reader is not None and not reader.done():
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
    for waiting in worker.pending.values():
        if not waiting.done():
            waiting.set_result(None)
    worker.pending.clear()

