"""Merging full lexical deltas in the background, off every caller's write.

A write on SQLite puts a record's words in its scope's delta (one row, one page) instead
of the main index (a page per word; see :mod:`sqlite.lexical`). Once a scope's delta is
full, the merge moves all of it into the main index in one write unit, where the records
share pages. Doing that inside the write that filled the delta would make that caller
pay for the batch; so the backend reports the full scopes after that write commits, and
the merger runs the merge as a write unit of its own, queued behind whatever writes are
already waiting. Until it commits, writes to a full scope index into the main tables
directly, so nothing waits for the merger and a search never reads more than the bound.

Nothing is lost if a merge never runs: a full delta is a valid index, only a slower one
to write to. So a merge that fails (storage busy with another process, say) is logged
and dropped; the next write to the scope reports it again. A crash mid-merge rolls back
(it is one transaction), and another process's merger may merge the same scope first:
the merge then finds the delta no longer full and skips it. ``close`` runs the merges
already reported, so a provider leaves its deltas merged behind it when it can.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection
from typing import Final, Protocol, runtime_checkable

logger = logging.getLogger("governed_memory_native.lexical")

SCOPES_PER_MERGE: Final = 16
"""Scopes merged by one write unit at most, so one unit never holds the write lock for
long (each scope's delta is bounded by ``lexical_delta_max``)."""


@runtime_checkable
class DeltaIndexed(Protocol):
    """A backend whose lexical index keeps per-scope deltas (SQLite)."""

    def watch_lexical_delta(self, bound: int,
                            full: Callable[[frozenset[int]], None] | None) -> None: ...

    async def merge_lexical_delta(self, scope_ids: Collection[int]) -> int: ...


class LexicalMerger:
    """Runs the merges a backend reports, one background task at a time."""

    def __init__(self, backend: DeltaIndexed) -> None:
        self._backend = backend
        self._due: set[int] = set()
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def attach(cls, backend: object, bound: int) -> LexicalMerger | None:
        """A merger fed by ``backend``'s full deltas, or ``None`` when the backend keeps
        no delta (memory, PostgreSQL) or ``bound`` is 0 (every write indexes directly)."""
        if not isinstance(backend, DeltaIndexed):
            return None
        if not bound:
            backend.watch_lexical_delta(0, None)
            return None
        merger = cls(backend)
        backend.watch_lexical_delta(bound, merger.schedule)
        return merger

    @property
    def due(self) -> frozenset[int]:
        """Scopes reported full and not merged yet."""
        return frozenset(self._due)

    def schedule(self, scope_ids: frozenset[int]) -> None:
        """Called on the event loop after a commit that left these scopes' deltas full."""
        self._due.update(scope_ids)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while self._due:
            batch = sorted(self._due)[:SCOPES_PER_MERGE]
            self._due.difference_update(batch)
            try:
                await self._backend.merge_lexical_delta(batch)
            except asyncio.CancelledError:
                self._due.update(batch)
                raise
            except Exception:
                # The delta stays valid; the next write to a full scope reports it again.
                logger.warning("lexical delta: a merge of %d scope(s) failed; their deltas "
                               "stay full until the next write reports them", len(batch),
                               exc_info=True)

    async def flush(self) -> None:
        """Run every merge reported so far (tests, ``close``)."""
        while self._due or (self._task is not None and not self._task.done()):
            task = self._task
            if task is None or task.done():
                task = self._task = asyncio.get_running_loop().create_task(self._run())
            await asyncio.shield(task)

    async def close(self) -> None:
        """Merge what was reported, then stop; a failure is logged, never raised (an
        unmerged delta is a valid index)."""
        try:
            await self.flush()
        except Exception:
            logger.warning("lexical delta: merging on close failed", exc_info=True)
        finally:
            task, self._task = self._task, None
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
