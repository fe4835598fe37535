"""The Mem0 store a provider works on: its client, its ledger and the lock they share.

Every part of the provider (writes, reads, erasure, reconciliation, usage, revisions)
reaches Mem0 and the ledger the same way: in a worker thread holding the one lock of
that Mem0 store, with every failure translated so no Mem0 detail (host, server text,
payload) leaks. Keeping that one way here lets each part live in its own module without
reaching into the provider.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from governed_memory.clock import Clock
from governed_memory.errors import GovernedMemoryError, MemoryUnavailableError

from governed_memory_mem0.clients import Mem0Client
from governed_memory_mem0.config import Mem0Config
from governed_memory_mem0.embedding import Mem0EmbedderBridge
from governed_memory_mem0.errors import translate
from governed_memory_mem0.ledger import Ledger

__all__ = ["Mem0Store", "store_lock"]

log = logging.getLogger("governed_memory_mem0.provider")
"""The provider's logger: the adapter's warnings keep the name operators filter on."""

T = TypeVar("T")

_store_locks: dict[tuple[str, ...], threading.Lock] = {}
_store_locks_guard = threading.Lock()


def store_lock(identity: tuple[str, ...]) -> threading.Lock:
    """One lock per Mem0 store in this process, shared by every provider on it: Mem0's
    embedded stores lose writes under concurrency (the notes, hazard 5)."""
    with _store_locks_guard:
        return _store_locks.setdefault(identity, threading.Lock())


class Mem0Store:
    """One provider's Mem0 client and ledger, and how to run work on them."""

    def __init__(self, config: Mem0Config, clock: Clock, client: Mem0Client,
                 bridge: Mem0EmbedderBridge | None, lock_identity: tuple[str, ...]) -> None:
        self.config = config
        self.clock = clock
        self.client = client
        self._bridge = bridge
        self.ledger = Ledger(config.ledger_path)
        self.lock = store_lock(lock_identity)
        self.is_open = False
        self.reconciled_writes = 0
        """Writes whose outcome was unknown and that reconciliation found applied."""
        self.foreign_items = 0
        """Items Mem0 returned for a namespace that the ledger does not place there."""

    def connect(self) -> None:
        """Open the ledger, then start the client (closing the ledger if that fails)."""
        self.ledger.open()
        try:
            self.client.start()
        except GovernedMemoryError:
            self.ledger.close()
            raise
        except Exception as exc:
            self.ledger.close()
            raise translate(exc) from None

    def disconnect(self) -> None:
        try:
            self.client.close()
        finally:
            self.ledger.close()

    async def locked(self, body: Callable[..., T], *args: Any) -> T:
        """Run ``body`` in a worker thread holding the store lock.

        If the caller is cancelled (a manager timeout), the thread still finishes what
        it started: a Mem0 write is never abandoned half-way or replayed.
        """
        loop = asyncio.get_running_loop()

        def run() -> T:
            with self.lock:
                if self._bridge is not None:
                    self._bridge.bind(loop)
                error: GovernedMemoryError
                try:
                    return body(*args)
                except GovernedMemoryError as exc:
                    error = exc
                except Exception as exc:
                    log.warning("mem0 adapter failure: %s", type(exc).__name__)
                    error = translate(exc)
            # Raised outside the handler, with the chain cut: a Mem0 exception carries
            # the host, the server's text and sometimes the payload.
            error.__cause__ = error.__context__ = None
            raise error

        return await asyncio.to_thread(run)

    def require_open(self) -> None:
        if not self.is_open:
            raise MemoryUnavailableError("the mem0 provider is not started (or was closed)")

    def namespace(self, scope_hash: str) -> str:
        """The Mem0 namespace (``user_id``) of one exact scope."""
        return f"{self.config.namespace_prefix}:{scope_hash}"

    def call(self, body: Callable[..., T], *args: Any) -> T:
        """A Mem0 call whose failure is translated (reads, and writes known not to apply)."""
        try:
            return body(*args)
        except GovernedMemoryError:
            raise
        except Exception as exc:
            raise translate(exc) from None
