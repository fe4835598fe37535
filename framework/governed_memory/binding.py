"""Method binders: one implementation, several calling conventions.

The manager's async methods are the only implementation of each operation. A bound
handle (``manager.bind(principal, scope)``) and the sync facade
(``governed_memory.sync``) are views of them: ``bind_scope`` fixes the first two
arguments from the handle, ``bind_principal`` the first, and ``blocking`` runs the
coroutine on an event loop thread. Each keeps the method's signature for type checkers
(``ParamSpec``) and for ``help()`` and ``inspect`` (``__signature__`` without the
fixed parameters), so no view restates an operation's arguments, and a new keyword on
the manager reaches every view at once.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

from governed_memory.principal import Principal
from governed_memory.scope import Scope

__all__ = ["EventLoopThread", "bind_principal", "bind_scope", "blocking"]

P = ParamSpec("P")
R = TypeVar("R")
Source = TypeVar("Source")


def _without(method: Callable[..., Any], fixed: int) -> inspect.Signature:
    """The method's signature with ``self`` kept and the next ``fixed`` parameters gone."""
    parameters = list(inspect.signature(method).parameters.values())
    return inspect.Signature(parameters[:1] + parameters[1 + fixed:],
                             return_annotation=inspect.signature(method).return_annotation)


def _named(view: Callable[..., Any], method: Callable[..., Any], fixed: int) -> None:
    functools.update_wrapper(view, method)
    del view.__wrapped__  # type: ignore[attr-defined]  # inspect must not see the fixed ones
    view.__signature__ = _without(method, fixed)  # type: ignore[attr-defined]


def bind_scope(method: Callable[Concatenate[Source, Principal, Scope, P], Awaitable[R]]
               ) -> Callable[Concatenate[Any, P], Awaitable[R]]:
    """A method of a handle with ``manager``, ``principal`` and ``scope`` attributes."""

    async def view(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await method(self.manager, self.principal, self.scope, *args, **kwargs)

    _named(view, method, 2)
    return view


def bind_principal(method: Callable[Concatenate[Source, Principal, P], Awaitable[R]]
                   ) -> Callable[Concatenate[Any, P], Awaitable[R]]:
    """Like :func:`bind_scope` for an operation that takes no scope (``replay``)."""

    async def view(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await method(self.manager, self.principal, *args, **kwargs)

    _named(view, method, 1)
    return view


def blocking(method: Callable[Concatenate[Source, P], Awaitable[R]]
             ) -> Callable[Concatenate[Any, P], R]:
    """A sync method of a facade with ``_target`` (the async object) and ``_loop`` (an
    :class:`EventLoopThread`) attributes."""

    def view(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
        loop: EventLoopThread = self._loop
        return loop.run(method(self._target, *args, **kwargs))

    _named(view, method, 0)
    return view


class EventLoopThread:
    """An event loop on a daemon thread of its own, for sync callers of async code.

    Every coroutine of one facade runs on this one loop, so the async objects it
    reaches (connections, locks, the writer of the SQLite backend) keep the single
    loop they were made for, whichever thread calls; calls from several threads
    interleave on the loop as concurrent tasks would. Called from the loop's own thread
    (a coroutine calling back into the sync API) it refuses instead of deadlocking.
    """

    def __init__(self, name: str = "governed-memory") -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=name,
                                        daemon=True)
        self._thread.start()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def run(self, awaitable: Awaitable[R]) -> R:
        if self._closed:
            _discard(awaitable)
            raise RuntimeError("this sync facade is closed")
        if threading.current_thread() is self._thread:
            _discard(awaitable)
            raise RuntimeError("the sync API was called from its own event loop; await the "
                               "async API there instead")
        return asyncio.run_coroutine_threadsafe(_as_coroutine(awaitable), self._loop).result()

    def close(self) -> None:
        """Stop the loop and join its thread (idempotent); the caller has already closed
        what runs on it."""
        if self._closed:
            return
        self._closed = True
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


async def _as_coroutine(awaitable: Awaitable[R]) -> R:
    return await awaitable


def _discard(awaitable: Awaitable[Any]) -> None:
    """Close a coroutine that will never run, so Python does not warn it was not awaited."""
    if isinstance(awaitable, Coroutine):
        awaitable.close()
