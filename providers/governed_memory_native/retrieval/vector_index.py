"""Vector candidates for large scopes from an in-process index, kept current by storage's
vector change log; small scopes, and backends without the log, are searched exactly.

Why it is built this way:

- **Candidates only.** An index (one per embedder identity and scope, see
  :mod:`retrieval.vector_engines`) proposes record ids in order of its approximate score; storage
  then applies every hard filter to them (scope, status, expiry, validity, types,
  entities, metadata, visibility, current content hash) and returns their stored
  vectors, which :func:`vectors.cosine_ranking` scores exactly. So a record of another
  scope, an erased, deleted, expired or rewritten one is never returned whatever the
  index holds, and every score is the one exact search gives.
- **As good as exact.** The index's scores are within :data:`SCORE_ERROR` of the exact
  ones. Candidates are verified in the index's order until the next one could not reach
  the ``want``-th best verified exact score (nor a positive one) even with that error:
  nothing later, in the index's answer or beyond it, can then enter the result. So the
  result is exact search's result, ties and order included. When too few candidates
  survive the filters, the index is asked for more (``k`` grows); when the filter is so
  selective that a great many had to be verified, the scope is searched exactly.
- **Kept current.** Every change to a stored vector bumps its (identity, scope)'s
  sequence in the same transaction and logs the record id (SQL triggers), so
  writes in sync mode, the outbox worker, reindexing, erasure and other processes all
  feed it. A search reads the searched scopes' sequences first (one read): an index at
  that sequence is current; one behind reads the changed ids and their stored vectors
  and applies them; one whose changes the log no longer holds (or that is missing,
  after a start or a crash: nothing of it is persisted) is rebuilt from the stored
  vectors. An index may run ahead of a reader's snapshot (another reader caught it up
  further), never behind it.
- **Off the event loop.** The index's CPU work goes through ``tx.compute``, which runs
  it on the unit's storage thread (on a worker thread for PostgreSQL, whose units run
  on the event loop).
- **Bounded memory.** Indexes hold at most ``vector_index_max_vectors`` vectors
  together; the least recently searched are wiped beyond it.
"""

from __future__ import annotations

import heapq
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING, Final, Protocol, TypeGuard, TypeVar

import attrs
from governed_memory.embedding import EmbedderIdentity

from governed_memory_native.config import IndexingConfig
from governed_memory_native.retrieval.cosine import decode
from governed_memory_native.retrieval.numeric import deferred
from governed_memory_native.retrieval.vector_engines import (
    SCORE_ERROR,
    VectorEngine,
    engine_name,
    faiss_module,
    matrix_of,
    new_engine,
)
from governed_memory_native.storage.port import (
    ReadTransaction,
    VectorChangeLog,
    VectorQuery,
    VectorScopeState,
)
from governed_memory_native.storage.repositories import VectorReads

if TYPE_CHECKING:
    import numpy as np
else:
    np = deferred(globals())

log = logging.getLogger("governed_memory_native.vector_index")

T = TypeVar("T")


class _LoggedVectors(VectorReads, VectorChangeLog, Protocol):
    pass


class _Logged(Protocol):
    """A read transaction whose vectors keep a change log: what an index is kept with."""

    @property
    def vectors(self) -> _LoggedVectors: ...

    async def compute(self, work: Callable[[], T]) -> T: ...


def _logged(tx: ReadTransaction) -> TypeGuard[_Logged]:
    return isinstance(tx.vectors, VectorChangeLog)

PAGE: Final = 5_000
"""Stored vectors read per statement while building an index."""
CATCH_UP_LIMIT: Final = 10_000
"""Changes an index applies in one catch-up; further behind, it is rebuilt."""
FIRST_K: Final = 256
"""Candidates asked of an index first (at least 4 x ``want``)."""
GROWTH: Final = 4
REFRESH_S: Final = 1.0
"""How often the provider catches held indexes up without a search (see ``refresh``)."""
VERIFY_BUDGET: Final = 4_096
"""Candidates verified in storage (at least 32 x ``want``) at most: a filter that would
need more to let ``want`` through counts as very selective, and the scope is searched
exactly instead."""


class ScopeIndex:
    """One (identity, scope)'s vectors in an engine, and which record each row is.

    Every method is called with :attr:`lock` held; rows are only ever added, moved or
    removed under it, so a search never sees a half-applied change.
    """

    def __init__(self, identity: EmbedderIdentity, seq: int) -> None:
        self.lock = threading.Lock()
        self.identity = identity
        self.dimension = identity.dimension
        self.seq = seq
        """The change sequence this index reflects."""
        self._engine: VectorEngine = new_engine(self.dimension)
        self._ids: list[str] = []
        self._positions: dict[str, int] = {}
        self.dead = False
        """Wiped (dropped, or a change failed half way): a search still holding it
        searches exactly instead, and the next one builds a new index."""

    @property
    def size(self) -> int:
        return len(self._ids)

    def add(self, rows: Sequence[tuple[str, bytes]]) -> None:
        if not rows:
            return
        matrix = matrix_of([blob for _, blob in rows], self.dimension)
        self._engine.add(matrix)
        matrix[:] = 0
        for record_id, _ in rows:
            self._positions[record_id] = len(self._ids)
            self._ids.append(record_id)

    def apply(self, changed: Sequence[str], rows: Sequence[tuple[str, bytes]]) -> None:
        """Bring the ``changed`` records to ``rows`` (their stored vectors now; a changed
        record without a row has none any more): each is removed, then re-added."""
        held = [record_id for record_id in dict.fromkeys(changed)
                if record_id in self._positions]
        moves = self._engine.remove([self._positions[record_id] for record_id in held])
        for record_id in held:
            del self._positions[record_id]
        for source, target in moves:
            record_id = self._ids[source]
            self._ids[target] = record_id
            self._positions[record_id] = target
        del self._ids[len(self._ids) - len(held):]
        self.add(rows)

    def search(self, query: np.ndarray, k: int) -> tuple[list[str], list[float]]:
        positions, scores = self._engine.search(query, k)
        return [self._ids[int(p)] for p in positions], [float(s) for s in scores]

    def record_ids(self) -> list[str]:
        """The records held, by position (inspection and tests)."""
        return list(self._ids)

    def rows(self) -> np.ndarray:
        """A float32 copy of the rows held (inspection and tests)."""
        return self._engine.rows()

    def wipe(self) -> None:
        self.dead = True
        self._engine.wipe()
        self._ids.clear()
        self._positions.clear()


@attrs.frozen(slots=True)
class IndexStats:
    """What the indexes did, for benchmarks and tests (``VectorIndexes.stats``)."""

    builds: int = 0
    catch_ups: int = 0
    searches: int = 0
    exact_scopes: int = 0
    fallbacks: int = 0
    verified: int = 0
    evictions: int = 0


class VectorIndexes:
    """The provider's indexes, by (identity, scope): built, caught up, searched, dropped."""

    def __init__(self, config: IndexingConfig) -> None:
        self._min_vectors = config.vector_index_min_vectors
        self._max_vectors = config.vector_index_max_vectors
        self._indexes: OrderedDict[tuple[str, str], ScopeIndex] = OrderedDict()
        self._lock = threading.Lock()
        self._stats: dict[str, int] = dict.fromkeys(attrs.fields_dict(IndexStats), 0)
        self._executor: ThreadPoolExecutor | None = None

    @property
    def stats(self) -> IndexStats:
        with self._lock:
            return IndexStats(**self._stats)

    def describe(self) -> str:
        """A short status: which engine, and from which scope size it is used."""
        note = "" if faiss_module() is not None else (
            " (faiss-cpu not installed: large scopes are scanned exactly with numpy;"
            " install governed-memory[ann])")
        return (f"vector index {engine_name()} from {self._min_vectors:,} vectors per scope,"
                f" holding at most {self._max_vectors:,}{note}")

    def held(self) -> dict[tuple[str, str], ScopeIndex]:
        """The live index of each (identity, scope) held now (inspection and tests: take
        an index's ``lock`` to read it)."""
        with self._lock:
            return dict(self._indexes)

    def clear(self) -> None:
        """Wipe every index and stop the scan threads (the provider is closing)."""
        with self._lock:
            doomed = list(self._indexes.values())
            self._indexes.clear()
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)
        for index in doomed:
            with index.lock:
                index.wipe()

    def _count(self, name: str, amount: int = 1) -> None:
        with self._lock:
            self._stats[name] += amount

    # -- the search -----------------------------------------------------------------

    async def prepare(self, tx: ReadTransaction, query: VectorQuery, vector: bytes,
                      want: int) -> Prepared:
        """Everything before the rows: which scopes are indexed, their indexes brought
        current, and each index's first scan started on a scan thread, so it runs while
        the unit does other work (the lexical search: faiss releases the GIL)."""
        prepared = Prepared(query, want)
        if not _logged(tx) or want <= 0:
            prepared.exact = list(query.filters.scope_hashes)
            return prepared
        filters, identity = query.filters, query.identity
        states = await tx.vectors.scope_states(identity, filters.scope_hashes)
        empty = VectorScopeState()
        held = self.held()
        target = decode(vector, identity.dimension).astype(np.float32)
        prepared.target = target
        k = max(4 * want, FIRST_K)
        for scope_hash in filters.scope_hashes:
            state = states.get(scope_hash, empty)
            if not self._indexable(state):
                prepared.exact.append(scope_hash)
                stale = held.get((str(identity), scope_hash))
                if stale is not None:  # shrank below the threshold: its index goes
                    self._drop((str(identity), scope_hash), stale)
                continue
            index = await self._current(tx, identity, scope_hash, state)
            first = None if index is None else self._scanner().submit(_scan, index, target, k)
            prepared.indexed.append((scope_hash, index, first))
        return prepared

    async def candidates(self, tx: ReadTransaction, prepared: Prepared
                         ) -> list[tuple[str, bytes]]:
        """``(record id, stored vector)`` of records passing every hard filter, holding
        every one among them that exact search would rank in its best ``want`` (with a
        positive score), for :func:`vectors.cosine_ranking` to rank."""
        query, want = prepared.query, prepared.want
        rows: list[tuple[str, bytes]] = []
        if prepared.exact:
            self._count("exact_scopes", len(prepared.exact))
            rows += await tx.vectors.candidates(_within(query, prepared.exact))
        for scope_hash, index, first in prepared.indexed:
            scoped = _within(query, [scope_hash])
            found = None
            if index is not None and first is not None and prepared.target is not None:
                assert _logged(tx)
                found = await self._search(tx, index, scoped, prepared.target, want, first)
            if found is None:
                self._count("fallbacks")
                found = await tx.vectors.candidates(scoped)
            rows += found
        return rows

    def _scanner(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(2, thread_name_prefix="gm-vector-scan")
            return self._executor

    async def _search(self, tx: _Logged, index: ScopeIndex, query: VectorQuery,
                      target: np.ndarray, want: int, first: Future[Scan | None]
                      ) -> list[tuple[str, bytes]] | None:
        """The verified candidates of one scope's index (see the module docstring), or
        ``None`` when the filters are too selective for it."""
        exact = target.astype(np.float64)
        verified: set[str] = set()
        rows: list[tuple[str, bytes]] = []
        best: list[float] = []  # the ``want`` best verified exact scores (a min-heap)
        step = max(want + want // 4, 32)
        budget = max(32 * want, VERIFY_BUDGET)
        k = max(4 * want, FIRST_K)
        reads = 0
        pending: Future[Scan | None] | None = first  # started by prepare, with this k
        while True:
            if pending is not None:
                scanned = await tx.compute(pending.result)
                pending = None
            else:
                scanned = await tx.compute(partial(_scan, index, target, k))
            if scanned is None:
                return None
            ids, approx, size = scanned
            self._count("searches")
            position = 0
            while position < len(ids):
                bound = max(best[0], 0.0) if len(best) >= want else 0.0
                if approx[position] + SCORE_ERROR < bound:
                    self._count("verified", reads)
                    return rows  # nothing from here on (nor beyond k) can enter
                batch = [record_id for record_id in ids[position:position + step]
                         if record_id not in verified]
                position += step
                if not batch:
                    continue
                verified.update(batch)
                reads += len(batch)
                found = await tx.vectors.candidates(attrs.evolve(query, among=tuple(batch)))
                rows += found
                if found:
                    scores = matrix_of([blob for _, blob in found],
                                       index.dimension).astype(np.float64) @ exact
                    for score in scores.tolist():
                        if len(best) < want:
                            heapq.heappush(best, score)
                        elif score > best[0]:
                            heapq.heapreplace(best, score)
                short = len(best) < want
                if reads > budget or (short and reads >= 2 * step and want * reads
                                      > budget * (len(rows) + 1)):
                    # Very selective (at the survival rate so far, ``want`` survivors
                    # would take more than the budget), or scores too close to tell
                    # apart: exact search of the scope is cheaper.
                    self._count("verified", reads)
                    return None
            if len(ids) < k or k >= size:
                self._count("verified", reads)
                return rows  # every row of the index was considered
            k = min(size, k * GROWTH)

    # -- keeping indexes current ----------------------------------------------------

    async def _current(self, tx: _Logged, identity: EmbedderIdentity,
                       scope_hash: str, state: VectorScopeState) -> ScopeIndex | None:
        """The scope's index, at least at ``state.seq`` (``None`` if it cannot be held)."""
        key = (str(identity), scope_hash)
        with self._lock:
            index = self._indexes.get(key)
            if index is not None:
                self._indexes.move_to_end(key)
        if index is not None and await self._caught_up(tx, identity, scope_hash, index,
                                                       state):
            return index
        return await self._build(tx, identity, scope_hash, state)

    async def _caught_up(self, tx: _Logged, identity: EmbedderIdentity,
                         scope_hash: str, index: ScopeIndex, state: VectorScopeState) -> bool:
        """Bring ``index`` to ``state.seq`` from the change log; ``False`` when it cannot
        (dropped meanwhile, or the log no longer reaches back to it).

        ``seq`` and ``dead`` are read without the index's lock: a scan on another thread
        may hold it for milliseconds, and on PostgreSQL this runs on the event loop. A
        value read just before another thread moved it only makes this read a few
        changes more than needed; ``_catch_up`` applies under the lock only those past
        the index's seq then, and a search of an index wiped meanwhile goes exact."""
        applied = -1 if index.dead else index.seq
        if applied < 0:
            return False
        if applied >= state.seq:
            return True
        behind = state.seq - applied
        if behind > CATCH_UP_LIMIT:
            return False
        changes = await tx.vectors.changes(identity, scope_hash, applied, behind)
        # Contiguous from the next change to this snapshot's: the log reaches back.
        if not changes or changes[0][0] != applied + 1 or changes[-1][0] != state.seq:
            return False
        await self._catch_up(tx, identity, scope_hash, index, state, changes)
        return not index.dead

    async def refresh(self, tx: ReadTransaction) -> int:
        """Catch every held index up with what storage holds now, and drop those that
        cannot be (their scope shrank below the threshold, or the log no longer reaches
        back); returns how many were dropped.

        The provider runs this every :data:`REFRESH_S` seconds while indexes are held, so
        an erasure committed by any process leaves this process's memory within that
        time even if the scope is never searched again (a search catches up first
        anyway, so it never returns an erased record).
        """
        if not _logged(tx):
            return 0
        dropped = 0
        by_identity: dict[str, list[tuple[str, ScopeIndex]]] = {}
        for (identity_key, scope_hash), index in self.held().items():
            by_identity.setdefault(identity_key, []).append((scope_hash, index))
        for entries in by_identity.values():
            identity = entries[0][1].identity
            states = await tx.vectors.scope_states(identity, [scope for scope, _ in entries])
            for scope_hash, index in entries:
                state = states.get(scope_hash, VectorScopeState())
                if not (self._indexable(state) and await self._caught_up(
                        tx, identity, scope_hash, index, state)):
                    self._drop((str(identity), scope_hash), index)
                    dropped += 1
        return dropped

    def _indexable(self, state: VectorScopeState) -> bool:
        return max(self._min_vectors, 1) <= state.vectors <= self._max_vectors

    def _drop(self, key: tuple[str, str], index: ScopeIndex) -> None:
        with self._lock:
            if self._indexes.get(key) is index:
                del self._indexes[key]
        with index.lock:
            index.wipe()

    async def _catch_up(self, tx: _Logged, identity: EmbedderIdentity,
                        scope_hash: str, index: ScopeIndex, state: VectorScopeState,
                        changes: Sequence[tuple[int, str]]) -> None:
        rows = await tx.vectors.by_ids(identity, scope_hash,
                                       [record_id for _, record_id in changes])

        def apply() -> None:
            with index.lock:
                if index.dead or index.seq >= state.seq:
                    return  # dropped, or another reader brought it further meanwhile
                # Only changes past what the index reflects; the rows are this snapshot's,
                # which is later than every one of them.
                changed = [record_id for seq, record_id in changes if seq > index.seq]
                wanted = set(changed)
                try:
                    index.apply(changed, [row for row in rows if row[0] in wanted])
                except BaseException:
                    index.wipe()  # half applied: never searched again, rebuilt next time
                    raise
                index.seq = state.seq

        await tx.compute(apply)
        self._count("catch_ups")

    async def _build(self, tx: _Logged, identity: EmbedderIdentity,
                     scope_hash: str, state: VectorScopeState) -> ScopeIndex | None:
        """A new index from the scope's stored vectors, installed unless one at least as
        current was installed meanwhile."""
        if state.vectors > self._max_vectors:
            return None
        key = (str(identity), scope_hash)
        index = ScopeIndex(identity, state.seq)
        after: str | None = None
        try:
            while True:
                page = await tx.vectors.in_scope(identity, scope_hash, after, PAGE)

                def fill(page: list[tuple[str, bytes]] = page) -> None:
                    with index.lock:
                        index.add(page)

                await tx.compute(fill)
                if len(page) < PAGE:
                    break
                after = page[-1][0]
        except BaseException:
            with index.lock:
                index.wipe()
            raise
        self._count("builds")
        return self._install(key, index)

    def _install(self, key: tuple[str, str], index: ScopeIndex) -> ScopeIndex:
        doomed: list[ScopeIndex] = []
        with self._lock:
            current = self._indexes.get(key)
            if current is not None and not current.dead and current.seq >= index.seq:
                doomed.append(index)
                index = current
            else:
                if current is not None:
                    doomed.append(current)
                self._indexes[key] = index
            self._indexes.move_to_end(key)
            held = sum(other.size for other in self._indexes.values())
            for other_key in list(self._indexes):
                if held <= self._max_vectors or other_key == key:
                    break
                other = self._indexes.pop(other_key)
                held -= other.size
                doomed.append(other)
                self._stats["evictions"] += 1
        for old in doomed:
            with old.lock:
                old.wipe()
        return index


Scan = tuple[list[str], list[float], int]
"""Record ids and approximate scores of an index's best rows, and its size then."""


def _scan(index: ScopeIndex, target: np.ndarray, k: int) -> Scan | None:
    with index.lock:
        return None if index.dead else (*index.search(target, k), index.size)


@attrs.define
class Prepared:
    """A vector search between :meth:`VectorIndexes.prepare` and ``candidates``."""

    query: VectorQuery
    want: int
    target: np.ndarray | None = None
    exact: list[str] = attrs.field(factory=list)
    """Scopes ranked exactly over storage's vectors (small, or no change log)."""
    indexed: list[tuple[str, ScopeIndex | None, Future[Scan | None] | None]] = attrs.field(
        factory=list)
    """Scopes searched through their index, with the first scan already running."""


def _within(query: VectorQuery, scope_hashes: Sequence[str]) -> VectorQuery:
    return attrs.evolve(query, filters=attrs.evolve(query.filters,
                                                    scope_hashes=tuple(scope_hashes)))
