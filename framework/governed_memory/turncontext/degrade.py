"""Degradation: a failure that must not fail the turn.

Models, searches and repositories fail. The turn goes on with what is left; the
failure is logged at WARNING (its type, never its message, which may quote stored data
or a prompt) and named in the context's ``degraded`` list, which the context event
carries too.
"""

from __future__ import annotations

import logging

log = logging.getLogger("governed_memory.turncontext")


class Degradations:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, what: str, exc: BaseException | None = None) -> None:
        if exc is None:
            log.warning("memory context degraded: %s", what)
        else:
            log.warning("memory context degraded: %s (%s)", what, type(exc).__name__)
        if what not in self.items:
            self.items.append(what)

    def extend(self, items: tuple[str, ...]) -> None:
        for item in items:
            if item not in self.items:
                self.items.append(item)

    def __bool__(self) -> bool:
        return bool(self.items)

    def as_tuple(self) -> tuple[str, ...]:
        return tuple(self.items)
