"""``SyncMemoryManager``: the manager's surface for scripts, notebooks and sync
frameworks.

It is a view of one ``GovernedMemoryManager``, not a second implementation: every
method runs the async method of the same name on an event loop thread the facade owns
(``governed_memory.binding``), so decisions, spans, events and errors are exactly the
async manager's, and a keyword added there is here at once. ``bind`` gives the sync
form of ``BoundMemory``, and ``audit`` the sync form of an auditor's reads of the trail
the manager writes (``governed_memory.audit_requests.GovernedAudit``).

    with SyncMemoryManager.from_profile("chat-assistant@1.0.0") as memory:
        alice = memory.bind(principal, Scope("acme", user_id="alice"))
        alice.add("Alice prefers window seats", memory_type="preference")
        hits = alice.search("seats").hits

``with`` is optional, as a notebook wants: the first operation starts the manager (the
async manager starts itself on first use, once, however many threads call at once),
``close()`` closes it, and a facade never closed is closed at interpreter exit, before
Python stops its worker threads, so the provider's connections and the trail are closed
cleanly and the loop's thread is joined rather than killed.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Final, ParamSpec

from governed_memory.audit_requests import GovernedAudit
from governed_memory.binding import EventLoopThread, blocking
from governed_memory.capabilities import Capabilities
from governed_memory.manager import BoundMemory, GovernedMemoryManager
from governed_memory.principal import Principal
from governed_memory.profiles.spec import MemoryProfileSpec
from governed_memory.scope import Scope

__all__ = ["SyncAudit", "SyncBoundMemory", "SyncMemoryManager"]

P = ParamSpec("P")

log = logging.getLogger(__name__)


class _Lifetime:
    """One facade's manager and loop, closed once: by ``close()``, or at exit."""

    __slots__ = ("_lock", "loop", "target")

    def __init__(self, target: GovernedMemoryManager, loop: EventLoopThread) -> None:
        self.target, self.loop = target, loop
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            _OPEN.pop(id(self), None)
            if self.loop.closed:
                return
            try:
                self.loop.run(self.target.close())
            finally:
                self.loop.close()


_OPEN: Final[dict[int, _Lifetime]] = {}
"""Facades not closed yet, oldest first. Held strongly: an unclosed facade's loop
thread runs until exit anyway, and this is how exit finds it to close it."""
_HOOKED = threading.Lock()
_hooked = False


def _close_the_open() -> None:
    """At interpreter exit: close every facade still open, newest first."""
    for lifetime in reversed(list(_OPEN.values())):
        try:
            lifetime.close()
        except Exception as exc:  # one broken close must not keep the others open
            log.error("closing a SyncMemoryManager at exit failed: %s", type(exc).__name__)


def _forget_inherited() -> None:
    """In a forked child: the parent's facades have no loop thread here, so there is
    nothing to close (waiting on their loops at the child's exit would hang it)."""
    _OPEN.clear()


def _track(lifetime: _Lifetime) -> None:
    """Register ``lifetime`` for closing at exit. The hook runs with ``threading``'s own
    exit hooks, before the interpreter joins (and stops accepting work on) thread pool
    workers, which closing a provider or a trail still uses; ``atexit`` runs after."""
    global _hooked
    with _HOOKED:
        if not _hooked:
            register = getattr(threading, "_register_atexit", None) or atexit.register
            register(_close_the_open)
            if hasattr(os, "register_at_fork"):
                os.register_at_fork(after_in_child=_forget_inherited)
            _hooked = True
        _OPEN[id(lifetime)] = lifetime


def _wrapping(factory: Callable[P, GovernedMemoryManager]
              ) -> Callable[P, SyncMemoryManager]:
    """A constructor of the async manager, returning the facade over what it built."""

    def build(*args: P.args, **kwargs: P.kwargs) -> SyncMemoryManager:
        return SyncMemoryManager(factory(*args, **kwargs))

    build.__doc__ = factory.__doc__
    return build


class SyncMemoryManager:
    """The manager's operations, blocking. Thread-safe: calls from several threads run
    as concurrent tasks on the facade's one loop.

    The first operation starts the manager (once); ``with`` or ``close()`` closes it
    and stops the loop's thread, and a facade never closed is closed at interpreter
    exit. After ``close()`` every call raises ``RuntimeError``."""

    def __init__(self, manager: GovernedMemoryManager) -> None:
        if not isinstance(manager, GovernedMemoryManager):
            raise TypeError("SyncMemoryManager wraps a GovernedMemoryManager")
        self._target = manager
        self._loop = EventLoopThread("governed-memory-sync")
        self._lifetime = _Lifetime(manager, self._loop)
        _track(self._lifetime)

    from_profile = staticmethod(_wrapping(GovernedMemoryManager.from_profile))
    from_plugins = staticmethod(_wrapping(GovernedMemoryManager.from_plugins))
    from_pack = staticmethod(_wrapping(GovernedMemoryManager.from_pack))

    @property
    def manager(self) -> GovernedMemoryManager:
        """The async manager underneath (its coroutines belong to the facade's loop)."""
        return self._target

    def capabilities(self) -> Capabilities:
        """What the provider behind this manager declares it can do."""
        return self._target.capabilities()

    @property
    def profile_spec(self) -> MemoryProfileSpec | None:
        return self._target.profile_spec

    def bind(self, principal: Principal, scope: Scope) -> SyncBoundMemory:
        return SyncBoundMemory(self._target.bind(principal, scope), self._loop)

    @functools.cached_property
    def audit(self) -> SyncAudit:
        """An auditor's reads of the trail this manager's sinks write, blocking:
        ``GovernedAudit.of(manager.activity)`` on this facade's loop, so each read is
        governed as over REST and MCP (``audit:read``, decision, ``memory.audit.*``
        events). Built on first use; closed with the facade (its calls then raise
        ``RuntimeError``)."""
        return SyncAudit(GovernedAudit.of(self._target.activity), self._loop)

    def close(self) -> None:
        """Close the manager, then stop the loop and join its thread (idempotent)."""
        self._lifetime.close()

    def __enter__(self) -> SyncMemoryManager:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    start = blocking(GovernedMemoryManager.start)
    health = blocking(GovernedMemoryManager.health)
    deliver_events = blocking(GovernedMemoryManager.deliver_events)
    add = blocking(GovernedMemoryManager.add)
    add_many = blocking(GovernedMemoryManager.add_many)
    remember = blocking(GovernedMemoryManager.remember)
    get = blocking(GovernedMemoryManager.get)
    lookup = blocking(GovernedMemoryManager.lookup)
    put = blocking(GovernedMemoryManager.put)
    list = blocking(GovernedMemoryManager.list)
    search = blocking(GovernedMemoryManager.search)
    replay = blocking(GovernedMemoryManager.replay)
    update = blocking(GovernedMemoryManager.update)
    delete = blocking(GovernedMemoryManager.delete)
    history = blocking(GovernedMemoryManager.history)
    delete_all = blocking(GovernedMemoryManager.delete_all)
    delete_user = blocking(GovernedMemoryManager.delete_user)
    purge_expired = blocking(GovernedMemoryManager.purge_expired)
    outbox_status = blocking(GovernedMemoryManager.outbox_status)
    process_index_jobs = blocking(GovernedMemoryManager.process_index_jobs)
    retry_dead_jobs = blocking(GovernedMemoryManager.retry_dead_jobs)
    reindex = blocking(GovernedMemoryManager.reindex)
    purge_snapshots = blocking(GovernedMemoryManager.purge_snapshots)
    purge_expired_all = blocking(GovernedMemoryManager.purge_expired_all)
    maintain = blocking(GovernedMemoryManager.maintain)
    list_pending = blocking(GovernedMemoryManager.list_pending)
    approve = blocking(GovernedMemoryManager.approve)
    reject = blocking(GovernedMemoryManager.reject)
    read_blocks = blocking(GovernedMemoryManager.read_blocks)
    append_block = blocking(GovernedMemoryManager.append_block)
    replace_block = blocking(GovernedMemoryManager.replace_block)
    rethink_block = blocking(GovernedMemoryManager.rethink_block)
    block_history = blocking(GovernedMemoryManager.block_history)


class SyncBoundMemory:
    """``BoundMemory``, blocking, on its facade's loop."""

    __slots__ = ("_loop", "_target")

    def __init__(self, bound: BoundMemory, loop: EventLoopThread) -> None:
        self._target = bound
        self._loop = loop

    @property
    def principal(self) -> Principal:
        return self._target.principal

    @property
    def scope(self) -> Scope:
        return self._target.scope

    def with_scope(self, scope: Scope) -> SyncBoundMemory:
        return SyncBoundMemory(self._target.with_scope(scope), self._loop)

    def __repr__(self) -> str:
        return f"Sync{self._target!r}"

    add = blocking(BoundMemory.add)
    add_many = blocking(BoundMemory.add_many)
    remember = blocking(BoundMemory.remember)
    get = blocking(BoundMemory.get)
    lookup = blocking(BoundMemory.lookup)
    put = blocking(BoundMemory.put)
    list = blocking(BoundMemory.list)
    search = blocking(BoundMemory.search)
    update = blocking(BoundMemory.update)
    delete = blocking(BoundMemory.delete)
    history = blocking(BoundMemory.history)
    delete_all = blocking(BoundMemory.delete_all)
    purge_expired = blocking(BoundMemory.purge_expired)
    list_pending = blocking(BoundMemory.list_pending)
    approve = blocking(BoundMemory.approve)
    reject = blocking(BoundMemory.reject)
    replay = blocking(BoundMemory.replay)
    read_blocks = blocking(BoundMemory.read_blocks)
    append_block = blocking(BoundMemory.append_block)
    replace_block = blocking(BoundMemory.replace_block)
    rethink_block = blocking(BoundMemory.rethink_block)
    block_history = blocking(BoundMemory.block_history)


class SyncAudit:
    """``GovernedAudit``, blocking, on its facade's loop: each method is the async one
    of the same name (the auditor first, then the tenant), not a second implementation.

    Not a bound handle: the reads are of a tenant's whole trail, not of a scope, and are
    refused to any principal bound to a user, so a handle fixing a memory scope has
    nothing to give them; the auditor is an argument on every call, as on the async
    facade."""

    __slots__ = ("_loop", "_target")

    def __init__(self, audit: GovernedAudit, loop: EventLoopThread) -> None:
        self._target = audit
        self._loop = loop

    query = blocking(GovernedAudit.query)
    summary = blocking(GovernedAudit.summary)
    report = blocking(GovernedAudit.report)
    verify = blocking(GovernedAudit.verify)
    prove = blocking(GovernedAudit.prove)
    consistency = blocking(GovernedAudit.consistency)
