"""One implementation of the store's operations, run async or blocking.

The store's logic (read the key, then add or compare-and-set update, retry on a lost
race, ...) is written once, as coroutines over a :class:`MemoryPort`: the handful of
manager operations it needs. Two ports run it:

- :class:`AsyncPort` awaits a :class:`~governed_memory.GovernedMemoryManager` on the
  caller's event loop;
- :class:`BlockingPort` calls a :class:`~governed_memory.sync.SyncMemoryManager`, whose
  methods block while the manager runs on the facade's own loop thread. Its coroutines
  never suspend, so :func:`run_blocking` drives a whole operation to its end with one
  ``send`` and no event loop in the calling thread (a sync graph node, a script).

So sync and async store calls share every decision, and the governed operations they
reach are the manager's own either way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from governed_memory import (
    DeleteResult,
    GovernedMemoryManager,
    MemoryRecord,
    MemoryType,
    Page,
    Principal,
    Provenance,
    Scope,
    SearchResult,
)
from governed_memory.errors import MemoryConfigurationError
from governed_memory.remembering import Message, RememberResult
from governed_memory.sync import SyncMemoryManager

__all__ = ["AsyncPort", "BlockingPort", "MemoryPort", "Runner", "run_blocking"]

R = TypeVar("R")


class MemoryPort(Protocol):
    """The manager operations the store uses, with the arguments it passes."""

    def now(self) -> float: ...

    async def lookup(self, principal: Principal, scope: Scope, *,
                     key: str) -> MemoryRecord | None: ...

    async def add(self, principal: Principal, scope: Scope, content: str, *,
                  memory_type: MemoryType, key: str | None, metadata: Mapping[str, Any],
                  expires_at: float | None, provenance: Provenance) -> MemoryRecord: ...

    async def update(self, principal: Principal, scope: Scope, record_id: str, *,
                     expected_revision: str, content: str, memory_type: MemoryType,
                     metadata: Mapping[str, Any], expires_at: float | None,
                     clear_expires_at: bool) -> MemoryRecord: ...

    async def delete(self, principal: Principal, scope: Scope, record_id: str, *,
                     expected_revision: str | None) -> DeleteResult: ...

    async def list(self, principal: Principal, scope: Scope, *, limit: int,
                   cursor: str | None) -> Page[MemoryRecord]: ...

    async def search(self, principal: Principal, scopes: Sequence[Scope], query: str, *,
                     limit: int | None, metadata_filter: Mapping[str, Any],
                     memory_types: Sequence[MemoryType | str] = ()) -> SearchResult: ...

    async def remember(self, principal: Principal, scope: Scope,
                       messages: Sequence[Message], *, window: int,
                       confidence_floor: float) -> RememberResult: ...


class AsyncPort:
    """The async manager, awaited on the caller's loop."""

    __slots__ = ("_manager",)

    def __init__(self, manager: GovernedMemoryManager) -> None:
        self._manager = manager

    def now(self) -> float:
        return self._manager.clock.now()

    async def lookup(self, principal: Principal, scope: Scope, *,
                     key: str) -> MemoryRecord | None:
        return await self._manager.lookup(principal, scope, key=key)

    async def add(self, principal: Principal, scope: Scope, content: str, *,
                  memory_type: MemoryType, key: str | None, metadata: Mapping[str, Any],
                  expires_at: float | None, provenance: Provenance) -> MemoryRecord:
        return await self._manager.add(principal, scope, content, memory_type=memory_type,
                                       key=key, metadata=metadata, expires_at=expires_at,
                                       provenance=provenance)

    async def update(self, principal: Principal, scope: Scope, record_id: str, *,
                     expected_revision: str, content: str, memory_type: MemoryType,
                     metadata: Mapping[str, Any], expires_at: float | None,
                     clear_expires_at: bool) -> MemoryRecord:
        return await self._manager.update(
            principal, scope, record_id, expected_revision=expected_revision,
            content=content, memory_type=memory_type, metadata=metadata,
            expires_at=expires_at, clear_expires_at=clear_expires_at)

    async def delete(self, principal: Principal, scope: Scope, record_id: str, *,
                     expected_revision: str | None) -> DeleteResult:
        return await self._manager.delete(principal, scope, record_id,
                                          expected_revision=expected_revision)

    async def list(self, principal: Principal, scope: Scope, *, limit: int,
                   cursor: str | None) -> Page[MemoryRecord]:
        return await self._manager.list(principal, scope, limit=limit, cursor=cursor)

    async def search(self, principal: Principal, scopes: Sequence[Scope], query: str, *,
                     limit: int | None, metadata_filter: Mapping[str, Any],
                     memory_types: Sequence[MemoryType | str] = ()) -> SearchResult:
        return await self._manager.search(principal, list(scopes), query, limit=limit,
                                          metadata_filter=metadata_filter,
                                          memory_types=memory_types)

    async def remember(self, principal: Principal, scope: Scope,
                       messages: Sequence[Message], *, window: int,
                       confidence_floor: float) -> RememberResult:
        return await self._manager.remember(principal, scope, messages, window=window,
                                            confidence_floor=confidence_floor)


class BlockingPort:
    """The sync facade: each coroutine calls one blocking method and never suspends."""

    __slots__ = ("_manager",)

    def __init__(self, manager: SyncMemoryManager) -> None:
        self._manager = manager

    def now(self) -> float:
        return self._manager.manager.clock.now()

    async def lookup(self, principal: Principal, scope: Scope, *,
                     key: str) -> MemoryRecord | None:
        return self._manager.lookup(principal, scope, key=key)

    async def add(self, principal: Principal, scope: Scope, content: str, *,
                  memory_type: MemoryType, key: str | None, metadata: Mapping[str, Any],
                  expires_at: float | None, provenance: Provenance) -> MemoryRecord:
        return self._manager.add(principal, scope, content, memory_type=memory_type, key=key,
                                 metadata=metadata, expires_at=expires_at,
                                 provenance=provenance)

    async def update(self, principal: Principal, scope: Scope, record_id: str, *,
                     expected_revision: str, content: str, memory_type: MemoryType,
                     metadata: Mapping[str, Any], expires_at: float | None,
                     clear_expires_at: bool) -> MemoryRecord:
        return self._manager.update(
            principal, scope, record_id, expected_revision=expected_revision,
            content=content, memory_type=memory_type, metadata=metadata,
            expires_at=expires_at, clear_expires_at=clear_expires_at)

    async def delete(self, principal: Principal, scope: Scope, record_id: str, *,
                     expected_revision: str | None) -> DeleteResult:
        return self._manager.delete(principal, scope, record_id,
                                    expected_revision=expected_revision)

    async def list(self, principal: Principal, scope: Scope, *, limit: int,
                   cursor: str | None) -> Page[MemoryRecord]:
        return self._manager.list(principal, scope, limit=limit, cursor=cursor)

    async def search(self, principal: Principal, scopes: Sequence[Scope], query: str, *,
                     limit: int | None, metadata_filter: Mapping[str, Any],
                     memory_types: Sequence[MemoryType | str] = ()) -> SearchResult:
        return self._manager.search(principal, list(scopes), query, limit=limit,
                                    metadata_filter=metadata_filter,
                                    memory_types=memory_types)

    async def remember(self, principal: Principal, scope: Scope,
                       messages: Sequence[Message], *, window: int,
                       confidence_floor: float) -> RememberResult:
        return self._manager.remember(principal, scope, messages, window=window,
                                      confidence_floor=confidence_floor)


def run_blocking(operation: Coroutine[Any, Any, R]) -> R:
    """Run a coroutine over a :class:`BlockingPort` to its end, in this thread.

    It never suspends (every await reaches a blocking call), so one ``send`` finishes
    it; one that does suspend was given something else to await, which is a bug here,
    refused rather than left hanging.
    """
    try:
        operation.send(None)
    except StopIteration as done:
        result: R = done.value
        return result
    operation.close()
    raise RuntimeError("a blocking store operation awaited something that suspends")


Operation = Callable[[MemoryPort], Coroutine[Any, Any, R]]
"""One store (or tool) operation, written once over whichever port runs it."""


class Runner:
    """Runs operations over one manager from sync and async callers alike.

    Over the sync facade, a sync call runs in the caller's thread (:func:`run_blocking`)
    and an async one in a worker thread, so the caller's loop is never blocked. Over
    the async manager, an async call runs on the caller's loop, which the runner
    remembers; a sync call is then sent to that loop from another thread (a sync node
    of an async graph run, which LangGraph runs in a worker thread), the way
    LangGraph's own async stores serve their sync methods. A sync call from the loop's
    own thread would deadlock and is refused.
    """

    __slots__ = ("_async", "_loop", "_sync")

    def __init__(self, manager: GovernedMemoryManager | SyncMemoryManager) -> None:
        self._sync: SyncMemoryManager | None = None
        self._async: GovernedMemoryManager | None = None
        if isinstance(manager, SyncMemoryManager):
            self._sync = manager
        elif isinstance(manager, GovernedMemoryManager):
            self._async = manager
        else:
            raise MemoryConfigurationError(
                "expected a GovernedMemoryManager or a governed_memory.sync.SyncMemoryManager")
        self._loop: asyncio.AbstractEventLoop | None = _running_loop()

    def call(self, operation: Operation[R]) -> R:
        if self._sync is not None:
            return run_blocking(operation(BlockingPort(self._sync)))
        assert self._async is not None
        loop = self._loop
        if loop is None or loop.is_closed() or not loop.is_running():
            raise MemoryConfigurationError(
                "a sync call over the async GovernedMemoryManager needs the event loop it "
                "serves running in another thread; in sync code use "
                "governed_memory.sync.SyncMemoryManager")
        if _running_loop() is loop:
            raise RuntimeError("a sync call from the manager's own event loop would "
                               "deadlock: use the async API there")
        return asyncio.run_coroutine_threadsafe(operation(AsyncPort(self._async)),
                                                loop).result()

    async def acall(self, operation: Operation[R]) -> R:
        if self._sync is not None:
            sync = self._sync
            return await asyncio.to_thread(lambda: run_blocking(operation(BlockingPort(sync))))
        assert self._async is not None
        self._loop = asyncio.get_running_loop()
        return await operation(AsyncPort(self._async))


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
