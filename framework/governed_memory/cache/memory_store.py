"""``InMemoryCacheStore``: a bounded, process-local store for one process's cache.

Entries live in an LRU bounded by count and by bytes, each with a TTL on a monotonic
timer. Revisions come from one process-wide counter: a bump sets a name to the next
counter value, and a name forgotten to keep the table bounded reads as a *floor*
taken from the same counter when it was forgotten. Either way a name never reads a
value an older state's entry was stored under, which is all invalidation needs.
"""

from __future__ import annotations

import bisect
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Final

import attrs

from governed_memory.cache.store import (
    MARK_GRACE_S,
    CacheValueTooLarge,
    Lookup,
    entry_suffix,
)

DEFAULT_MAX_ENTRIES: Final = 10_000
DEFAULT_MAX_BYTES: Final = 64 * 1024 * 1024
DEFAULT_MAX_VALUE_BYTES: Final = 1024 * 1024
DEFAULT_MAX_NAMES: Final = 100_000
_SWEEP_EVERY: Final = 1024


@attrs.define(slots=True)
class _Entry:
    value: bytes
    expires_at: float


class InMemoryCacheStore:
    """Every method completes without awaiting, so each is atomic on the event loop."""

    name = "memory"
    shared = False
    """Only this process reads it: what it erases says nothing of other processes."""

    def __init__(
        self,
        *,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        max_names: int = DEFAULT_MAX_NAMES,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        if min(max_entries, max_bytes, max_value_bytes, max_names) < 1:
            raise ValueError("store bounds must be positive")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.max_value_bytes = max_value_bytes
        self.max_names = max_names
        self._timer = timer
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._bytes = 0
        self._revisions: OrderedDict[str, int] = OrderedDict()
        self._counter = 0
        self._floor = 0
        self._marks: dict[str, list[float]] = {}
        self._bumps = 0

    # -- introspection (tests, metrics) -------------------------------------------------

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size_bytes(self) -> int:
        return self._bytes

    # -- the port -----------------------------------------------------------------------

    async def lookup(self, tenant: str, names: Sequence[str], digest: str,
                     now: float) -> Lookup:
        revisions = tuple(self._revision(tenant, name) for name in names)
        horizon = self._horizon(tenant, names, now)
        key = f"{tenant}:{entry_suffix(digest, revisions)}"
        entry = self._entries.get(key)
        value: bytes | None = None
        if entry is not None:
            if entry.expires_at <= self._timer():
                self._drop(key)
            else:
                self._entries.move_to_end(key)
                value = entry.value
        return Lookup(revisions, horizon, value)

    async def fill(self, tenant: str, names: Sequence[str], revisions: Sequence[int],
                   digest: str, value: bytes, ttl_s: float) -> bool:
        if len(value) > self.max_value_bytes:
            raise CacheValueTooLarge(f"{len(value)} bytes; the bound is {self.max_value_bytes}")
        current = tuple(self._revision(tenant, name) for name in names)
        if current != tuple(revisions):
            return False
        key = f"{tenant}:{entry_suffix(digest, revisions)}"
        if key in self._entries:
            self._drop(key)
        self._entries[key] = _Entry(value, self._timer() + ttl_s)
        self._bytes += len(value)
        self._shrink()
        return True

    async def bump(self, tenant: str, names: Sequence[str], expiries: Sequence[float],
                   now: float) -> None:
        for name in names:
            full = f"{tenant}:{name}"
            self._counter += 1
            self._revisions[full] = self._counter
            self._revisions.move_to_end(full)
            if expiries:
                marks = self._marks.setdefault(full, [])
                for instant in expiries:
                    index = bisect.bisect_left(marks, instant)
                    if index == len(marks) or marks[index] != instant:
                        marks.insert(index, instant)
                del marks[: bisect.bisect_left(marks, now - MARK_GRACE_S)]
                if not marks:
                    del self._marks[full]
        self._bumps += 1
        if self._bumps % _SWEEP_EVERY == 0:
            self._sweep_marks(now)
        while len(self._revisions) > self.max_names:
            self._revisions.popitem(last=False)
            # Forgotten names read the floor, which no entry has been stored under yet.
            self._counter += 1
            self._floor = self._counter

    async def erase_tenant(self, tenant: str) -> int:
        """Remove every cached entry of one tenant now, rather than let an erased
        user's answers age out unreachable; returns how many were removed."""
        keys = [key for key in self._entries if key.startswith(tenant + ":")]
        for key in keys:
            self._drop(key)
        return len(keys)

    async def close(self) -> None:
        self._entries.clear()
        self._bytes = 0

    # -- helpers ------------------------------------------------------------------------

    def _revision(self, tenant: str, name: str) -> int:
        return self._revisions.get(f"{tenant}:{name}", self._floor)

    def _horizon(self, tenant: str, names: Sequence[str], now: float) -> float | None:
        horizon: float | None = None
        for name in names:
            marks = self._marks.get(f"{tenant}:{name}")
            if not marks:
                continue
            index = bisect.bisect_right(marks, now)
            if index < len(marks) and (horizon is None or marks[index] < horizon):
                horizon = marks[index]
        return horizon

    def _sweep_marks(self, now: float) -> None:
        """Forget names whose every mark is long past, so marks stay bounded by the
        expiries still ahead rather than by every scope ever written."""
        cutoff = now - MARK_GRACE_S
        for full in [full for full, marks in self._marks.items() if marks[-1] < cutoff]:
            del self._marks[full]

    def _drop(self, key: str) -> None:
        entry = self._entries.pop(key)
        self._bytes -= len(entry.value)

    def _shrink(self) -> None:
        while self._entries and (len(self._entries) > self.max_entries
                                 or self._bytes > self.max_bytes):
            _, entry = self._entries.popitem(last=False)
            self._bytes -= len(entry.value)
