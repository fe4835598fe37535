"""A sliding-window counter per key (a tenant, a scope hash), in process.

Rates are about the recent past of this process, so they need no storage round trip;
the price is that each process enforces its own window (a deployment with N workers
admits up to N times the rate). Keys that have been idle for a whole window are swept,
so memory stays proportional to the keys active in the last window.
"""

from __future__ import annotations

from collections import deque


class SlidingWindow:
    def __init__(self, limit: int, period_s: float = 60.0) -> None:
        self.limit = limit
        self.period_s = period_s
        self._events: dict[str, deque[float]] = {}
        self._calls = 0

    def _recent(self, key: str, now: float) -> deque[float]:
        events = self._events.get(key)
        if events is None:
            return deque()
        while events and events[0] <= now - self.period_s:
            events.popleft()
        return events

    def would_admit(self, key: str, now: float) -> bool:
        return len(self._recent(key, now)) < self.limit

    def admit(self, key: str, now: float) -> None:
        """Count one event; call after ``would_admit`` said yes for every window."""
        self._events.setdefault(key, deque()).append(now)
        self._calls += 1
        if self._calls % 1024 == 0:
            self._sweep(now)

    def count(self, key: str, now: float) -> int:
        return len(self._recent(key, now))

    def _sweep(self, now: float) -> None:
        for key in [k for k, v in self._events.items() if not v or v[-1] <= now - self.period_s]:
            del self._events[key]
