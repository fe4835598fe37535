"""Running a unit of work to its end on the calling thread, without an event loop.

The memory and SQLite backends run units on their own threads: every statement of such
a unit is synchronous, so its coroutine never really suspends and can be stepped to the
end in place. A unit that awaits anything else (a model call, a sleep) would need the
loop it is no longer on; it is stopped with an error that says to compute that first.
"""

from __future__ import annotations

from collections.abc import Awaitable, Generator
from typing import Any, TypeVar

T = TypeVar("T")


def drive(awaitable: Awaitable[T]) -> T:
    """Run a coroutine that awaits nothing but synchronous statements to its end, here."""
    steps: Generator[Any, None, T] = awaitable.__await__()
    try:
        steps.send(None)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    steps.close()
    raise RuntimeError("a storage unit of work awaited something other than its "
                       "transaction; compute it before the unit starts")
