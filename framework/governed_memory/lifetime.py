"""A manager's lifetime: started once, on first use; closed in an order that loses nothing.

Starting and closing are where a manager can leak (a connection left open by a start
that failed halfway, an event left in the outbox by a close that skipped a drain) or
double up (two first operations both starting the provider). That logic is the same
whatever the operations are, so it lives here, apart from the API whose methods are the
operations (``governed_memory.manager``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from governed_memory.errors import MemoryCapabilityUnsupportedError, MemoryUnavailableError
from governed_memory.events import EventBus
from governed_memory.outbox import OutboxDispatcher
from governed_memory.provider import MemoryProvider
from governed_memory.rates import RateWindows


class Store(Protocol):
    """What the lifetime needs of a store beside the provider."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...

log = logging.getLogger(__name__)


class ManagerLifetime:
    """Starts the provider (and the outbox and maintenance loops it is given) once,
    however many operations arrive together, and closes them with the sinks.

    ``maintain`` is one maintenance round; with ``maintenance_interval_s`` it runs in the
    background at that period, until it reports that nothing here needs maintaining.
    ``owned_windows`` are rate windows given for this manager alone, closed with it.
    """

    def __init__(self, provider: MemoryProvider, events: EventBus,
                 outbox: OutboxDispatcher | None, maintain: Callable[[], Awaitable[None]], *,
                 outbox_interval_s: float | None = None,
                 maintenance_interval_s: float | None = None,
                 owned_windows: RateWindows | None = None,
                 stores: tuple[Store, ...] = ()) -> None:
        self._provider = provider
        self._events = events
        self._outbox = outbox
        self._maintain = maintain
        self.outbox_interval_s = outbox_interval_s
        self.maintenance_interval_s = maintenance_interval_s
        self._owned_windows = owned_windows
        self._stores = stores
        """Stores beside the provider the manager owns (its memory blocks'): started
        after the provider, closed before it."""
        self._maintenance: asyncio.Task[None] | None = None
        self._started = False
        self._closed = False
        self._starting = asyncio.Lock()
        """Held while starting, so concurrent first operations start the provider once."""

    async def start(self) -> None:
        """Idempotent; after :meth:`close`, it starts everything again."""
        if self._started:
            return
        async with self._starting:
            if not self._started:
                await self._start()
                self._started, self._closed = True, False

    async def ensure_started(self) -> None:
        """Start on first use; a closed manager says what to do instead of reaching a
        closed provider."""
        if self._started:
            return
        if self._closed:
            raise MemoryUnavailableError(
                "this GovernedMemoryManager is closed (close() or the end of its `async "
                "with` block); build a new one, or call `await manager.start()` to reopen it")
        await self.start()

    async def _start(self) -> None:
        await self._provider.start()
        try:
            for store in self._stores:
                await store.start()
            outbox = self._outbox
            if outbox is not None:
                # Events a crash left between the provider's commit and the sinks.
                await outbox.drain()
                if self.outbox_interval_s is not None:
                    outbox.start(self.outbox_interval_s)
            if self.maintenance_interval_s is not None:
                self._maintenance = asyncio.create_task(
                    self._maintain_every(self.maintenance_interval_s),
                    name="governed-memory-maintenance")
        except BaseException:
            # A start that fails leaves nothing open behind it (connections, threads).
            await self._close_stores()
            try:
                await self._provider.close()
            except Exception as exc:
                log.error("closing the provider after a failed start failed: %s",
                          type(exc).__name__)
            raise

    async def _close_stores(self) -> None:
        for store in self._stores:
            try:
                await store.close()
            except Exception as exc:  # the provider and the sinks still close
                log.error("closing a store failed: %s", type(exc).__name__)

    async def _maintain_every(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self._maintain()
            except MemoryCapabilityUnsupportedError:
                return  # nothing to maintain here
            except Exception as exc:  # the loop outlives one failure; the trail has it
                log.warning("maintenance round failed: %s", type(exc).__name__)

    async def close(self) -> None:
        """Stop the background loops, deliver what the outbox holds, close the provider,
        the owned rate windows and the sinks (idempotent)."""
        self._closed = True
        task, self._maintenance = self._maintenance, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._started:
            self._started = False
            outbox = self._outbox
            if outbox is not None:
                await outbox.stop()
                try:
                    await outbox.drain()
                except Exception as exc:  # stored events wait for the next start
                    log.error("event outbox: final drain failed: %s", type(exc).__name__)
            await self._close_stores()
            await self._provider.close()
        if self._owned_windows is not None:
            try:
                await self._owned_windows.close()
            except Exception as exc:  # the provider and the sinks still close
                log.error("closing the rate windows failed: %s", type(exc).__name__)
        await self._events.close()
