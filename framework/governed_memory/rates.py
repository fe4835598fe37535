"""Write-rate windows: how many writes a tenant or a scope made in the last period.

A rate limit means something only if every process that admits writes counts them in
the same place: windows kept in each process's memory let N worker processes (or N
nodes) admit N times the limit. So the windows live where the writes are, like scope
revisions: a provider whose storage every process shares offers windows kept there
(its ``rate_windows`` accessor), a plugin can register a shared store of its own (the
``register_rate_stores`` hook; Redis is built in), and :class:`ProcessRateWindows`,
counting in this process only, is what is left when neither is at hand.

One :meth:`RateWindows.admit` counts one event against several limits at once (a
tenant's and a scope's), atomically: every limit admits it and it is counted in every
window, or one refuses and nothing is counted anywhere. Concurrent admits, from any
process, never let a window hold more events than its limit.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections import deque
from collections.abc import Sequence
from typing import Final, Protocol, runtime_checkable

import attrs

__all__ = ["ProcessRateWindows", "RateLimit", "RateWindows", "check_limits",
           "default_rate_windows", "stored_key", "tenant_tag"]

log = logging.getLogger(__name__)

SWEEP_EVERY: Final = 1024
"""Admits between two sweeps of keys idle for a whole period (process windows, and the
shared stores that sweep from the caller's side)."""


@attrs.frozen(slots=True)
class RateLimit:
    """One window an event is counted against.

    ``key`` names the window (``"tenant:acme"``, ``"scope:sh1:…"``): every process that
    uses the same key counts into the same window. ``limit`` events at most in any
    ``period_s`` seconds; an event at ``t`` leaves the window at ``t + period_s``.
    ``label`` is what a refusal names (``"tenant"``, ``"scope"``). ``tenant_id`` is the
    tenant the window belongs to: a shared store keeps one tenant's windows together
    (one Redis Cluster slot), so an admit over a tenant's and a scope's window is one
    atomic step there.
    """

    key: str
    limit: int
    period_s: float
    label: str
    tenant_id: str | None = None

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key:
            raise ValueError("a rate limit needs a key")
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < 1:
            raise ValueError(f"a rate limit is a positive integer, got {self.limit!r}")
        if not (isinstance(self.period_s, int | float) and math.isfinite(self.period_s)
                and self.period_s > 0):
            raise ValueError(f"a rate period is a positive number of seconds, "
                             f"got {self.period_s!r}")


@runtime_checkable
class RateWindows(Protocol):
    """Sliding windows of recent events, per key.

    Contract (every implementation; ``tests/framework/test_rate_windows.py`` holds the
    built-in ones to it):

    - ``admit(limits, now)`` counts one event at ``now`` in the window of every limit if
      each window holds fewer than its ``limit`` events in ``(now - period_s, now]``,
      and returns ``None``; otherwise it counts nothing anywhere and returns the first
      limit, in the order given, whose window is full. Atomic across every process that
      uses the same store: concurrent admits never leave a window holding more than its
      limit.
    - An admit that cannot be decided (the store is down, a lock wait ran out) raises;
      it never answers ``None`` for an event it did not count. Callers deny on it.
    - ``shared`` is true when every process and node using the same configuration
      counts into the same windows, false when they are this process's only.
    - ``close`` releases connections and files; a later ``admit`` may reopen them.
    """

    @property
    def shared(self) -> bool: ...

    async def admit(self, limits: Sequence[RateLimit], now: float) -> RateLimit | None: ...

    async def close(self) -> None: ...


def check_limits(limits: Sequence[RateLimit], now: float) -> None:
    """What every store refuses before it counts: a time that is not a finite number,
    and one key twice in one admit (its window would be counted twice)."""
    if isinstance(now, bool) or not isinstance(now, int | float) or not math.isfinite(now):
        raise ValueError(f"an admit needs a finite time, got {now!r}")
    keys = [limit.key for limit in limits]
    if len(set(keys)) != len(keys):
        raise ValueError("one admit names a window twice")


def stored_key(key: str) -> str:
    """The name a shared store keeps a window under: a hash, so no store holds a tenant
    id or a scope hash in the clear, and every name has one length."""
    return "rk1:" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:40]


def tenant_tag(limit: RateLimit) -> str:
    """What keeps one tenant's windows together in a store that partitions keys (a
    hash of the tenant, or of the key when the limit names no tenant)."""
    basis = limit.tenant_id if limit.tenant_id is not None else limit.key
    return hashlib.sha256(basis.encode("utf-8")).hexdigest()[:16]


_WARNED: set[str] = set()
"""Reasons already logged: the warning of process windows is given once per process."""


class ProcessRateWindows:
    """Sliding windows in this process's memory: exact, free, and not shared.

    Each process counts only its own events, so a deployment with N processes admits up
    to N times a limit. It is the memory backend's (one process anyway), what a profile
    chooses with ``[quotas] rate_store = "process"``, and the fallback when the
    provider keeps no windows, in which case ``reason`` says why, in a warning logged
    once per process at the first admit. Keys idle for a whole period are swept every
    :data:`SWEEP_EVERY` admits, so memory follows the keys active in the last period.
    """

    shared = False

    def __init__(self, *, reason: str | None = None) -> None:
        self.reason = reason
        self._events: dict[str, tuple[float, deque[float]]] = {}
        self._admits = 0

    async def admit(self, limits: Sequence[RateLimit], now: float) -> RateLimit | None:
        check_limits(limits, now)
        if self.reason is not None and self.reason not in _WARNED:
            _WARNED.add(self.reason)
            log.warning("write-rate windows are counted in this process only: %s",
                        self.reason)
        for limit in limits:
            if len(self._recent(limit, now)) >= limit.limit:
                return limit
        # No await between the check and the count: one event loop, so atomic.
        for limit in limits:
            self._events.setdefault(limit.key, (limit.period_s, deque()))[1].append(now)
        self._admits += 1
        if self._admits % SWEEP_EVERY == 0:
            self._sweep(now)
        return None

    def count(self, key: str, now: float, period_s: float) -> int:
        """Events of ``key`` in ``(now - period_s, now]`` (tests and tooling)."""
        held = self._events.get(key)
        if held is None:
            return 0
        return sum(1 for at in held[1] if now - period_s < at <= now)

    def _recent(self, limit: RateLimit, now: float) -> deque[float]:
        held = self._events.get(limit.key)
        if held is None:
            return deque()
        events = held[1]
        while events and events[0] <= now - limit.period_s:
            events.popleft()
        return events

    def _sweep(self, now: float) -> None:
        idle = [key for key, (period, events) in self._events.items()
                if not events or events[-1] <= now - period]
        for key in idle:
            del self._events[key]

    async def close(self) -> None:
        """Nothing to release: the windows stay counted if the owner starts again."""


class KeepsRateWindows(Protocol):
    """What :func:`default_rate_windows` asks of a provider: its ``rate_windows``
    accessor (``MemoryProvider`` has it), so the windows need not know the providers."""

    @property
    def rate_windows(self) -> RateWindows | None: ...


def default_rate_windows(provider: KeepsRateWindows) -> RateWindows:
    """The provider's own windows (its ``rate_windows`` accessor; a wrapper answers with
    its inner provider's), else windows in this process that say why, once, when first
    used: a limit then holds per process, not per deployment."""
    offered = provider.rate_windows
    if offered is not None:
        return offered
    name = getattr(provider, "name", type(provider).__name__)
    return ProcessRateWindows(reason=(
        f"provider {name} keeps no rate windows (its rate_windows accessor is None), so "
        "N processes admit up to N times a writes-per-minute limit; for one window per "
        "deployment set [quotas] rate_store to a shared store (\"redis\") or use a "
        "provider that keeps them (the native provider on SQLite or PostgreSQL)"))
