"""The working-state tier: one run's scratch state, gone when the run's TTL lapses.

An agent keeps its plan, the step it is on and intermediate results here rather than
in long-term memory: nothing in it is meant to outlive the run. ``update`` merges the
given keys into the state (``replace=True`` swaps the whole state) and moves the expiry
to ``now + ttl``; a read after the expiry finds nothing, exactly as if it was cleared.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import attrs

from governed_memory.canonical import canonical_json
from governed_memory.errors import MemoryStorageError, MemoryValidationError
from governed_memory.limits import check_json_safe
from governed_memory.records import json_copy
from governed_memory.scope import Scope
from governed_memory.tiers.results import WorkingState

MAX_WORKING_STATE_BYTES = 64 * 1024
MAX_WORKING_TTL_S = 7 * 24 * 3600.0


def check_ttl(ttl_s: object) -> float:
    if (isinstance(ttl_s, bool) or not isinstance(ttl_s, int | float)
            or not math.isfinite(ttl_s) or not 0 < ttl_s <= MAX_WORKING_TTL_S):
        raise MemoryValidationError(
            f"ttl_seconds must be a number of seconds in (0, {MAX_WORKING_TTL_S:g}]",
            field="ttl_seconds")
    return float(ttl_s)


def check_state(state: Mapping[str, Any], field: str = "state") -> int:
    """JSON-safe and within the size bound; returns the canonical size in bytes."""
    if not isinstance(state, Mapping):
        raise MemoryValidationError(f"{field} must be a mapping", field=field)
    check_json_safe(state, field)
    size = len(canonical_json(json_copy(state)).encode())
    if size > MAX_WORKING_STATE_BYTES:
        raise MemoryValidationError(
            f"{field} is {size} bytes as JSON; the limit is {MAX_WORKING_STATE_BYTES}",
            field=field)
    return size


def merged(current: WorkingState | None, changes: Mapping[str, Any], *, replace: bool,
           ttl_s: float, now: float, scope: Scope) -> WorkingState:
    """The next state: shared by every store so they agree on merge and size rules."""
    base: dict[str, Any] = {} if current is None or replace else json_copy(current.state)
    base.update(json_copy(changes))
    check_state(base)
    revision = 1 if current is None else current.revision + 1
    return WorkingState(scope.scope_hash, base, now, now + ttl_s, revision)


@runtime_checkable
class WorkingStateStore(Protocol):
    """Where working state lives, per exact run scope. Stores register through
    ``register_working_state_stores``."""

    name: str
    durable: bool

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def read(self, scope: Scope, now: float) -> WorkingState | None:
        """The live state, or ``None`` (never set, cleared or expired)."""
        ...

    async def update(self, scope: Scope, changes: Mapping[str, Any], *, ttl_s: float,
                     replace: bool, now: float) -> WorkingState:
        """Merge (or replace) atomically and reset the expiry to ``now + ttl_s``."""
        ...

    async def clear(self, scope: Scope) -> bool:
        """Drop the state; ``True`` if there was one."""
        ...


@attrs.define
class _Entry:
    state: WorkingState


class InMemoryWorkingStateStore:
    """Working state in a dict, expiring by the injected clock's time (``durable =
    False``). Expired entries are dropped when touched and by ``sweep``."""

    name = "memory"
    durable = False

    def __init__(self, max_runs: int = 10_000) -> None:
        self._entries: dict[str, _Entry] = {}
        self._max_runs = max_runs

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def _live(self, scope: Scope, now: float) -> WorkingState | None:
        entry = self._entries.get(scope.scope_hash)
        if entry is None:
            return None
        if entry.state.expires_at <= now:
            del self._entries[scope.scope_hash]
            return None
        return entry.state

    async def read(self, scope: Scope, now: float) -> WorkingState | None:
        return self._live(scope, now)

    async def update(self, scope: Scope, changes: Mapping[str, Any], *, ttl_s: float,
                     replace: bool, now: float) -> WorkingState:
        state = merged(self._live(scope, now), changes, replace=replace, ttl_s=ttl_s,
                       now=now, scope=scope)
        if scope.scope_hash not in self._entries and len(self._entries) >= self._max_runs:
            self.sweep(now)
            if len(self._entries) >= self._max_runs:
                raise MemoryStorageError(
                    f"the in-memory working-state store holds at most {self._max_runs} runs")
        self._entries[scope.scope_hash] = _Entry(state)
        return state

    async def clear(self, scope: Scope) -> bool:
        return self._entries.pop(scope.scope_hash, None) is not None

    def sweep(self, now: float) -> int:
        dead = [key for key, entry in self._entries.items() if entry.state.expires_at <= now]
        for key in dead:
            del self._entries[key]
        return len(dead)
