"""Helpers for the search-cache tests: contexts, a Redis gate, stores that fail on
demand, and an event sink that counts."""

from __future__ import annotations

import collections
import itertools
from collections.abc import Sequence
from typing import Any

import attrs
from governed_memory import Permission, Principal, Scope
from governed_memory.cache import CacheStore, CacheStoreUnavailable, Lookup
from governed_memory.clock import ManualClock
from governed_memory.events import MemoryEvent
from governed_memory.operation_context import OperationContext
from redis_server import (  # noqa: F401  (the cache tests import these from here)
    REDIS_URL,
    delete_prefix,
    redis_unavailable_reason,
    require_redis,
    require_redis_package,
    unique_prefix,
)

SERVICE = Principal("svc:cache-tests", "service", "acme", permissions=[Permission.ADMIN])
ALICE = Principal("user:alice", "user", "acme", "alice",
                  [Permission.READ, Permission.WRITE, Permission.DELETE])
ALICE_SCOPE = Scope("acme", project_id="p", user_id="alice")
BOB_SCOPE = Scope("acme", project_id="p", user_id="bob")
SHARED = Scope("acme", project_id="p")

_operations = itertools.count(1)


def make_ctx(clock: ManualClock | float, principal: Principal = SERVICE,
             **fields: Any) -> OperationContext:
    now = clock if isinstance(clock, int | float) else clock.now()
    return OperationContext(operation_id=f"op_cache_{next(_operations)}", principal=principal,
                            now=now, **fields)


class CountingSink:
    """Counts event types and reasons without keeping every event."""

    name = "counting"

    def __init__(self, keep: bool = False) -> None:
        self.types: collections.Counter[str] = collections.Counter()
        self.reasons: collections.Counter[tuple[str, str]] = collections.Counter()
        self.keep = keep
        self.events: list[MemoryEvent] = []

    async def emit(self, event: MemoryEvent) -> None:
        self.types[event.type] += 1
        for reason in event.reasons:
            self.reasons[(event.type, reason)] += 1
        if self.keep:
            self.events.append(event)

    async def close(self) -> None:
        return None

    def count(self, outcome: str, reason: str | None = None) -> int:
        kind = f"memory.cache.{outcome}"
        return self.types[kind] if reason is None else self.reasons[(kind, reason)]


class FaultyStore:
    """Wraps a store; each operation can be made to fail, and a hook can run between a
    lookup and the next fill (to move a revision under a search)."""

    def __init__(self, inner: CacheStore) -> None:
        self.inner = inner
        self.name = f"faulty-{inner.name}"
        self.fail: set[str] = set()
        self.calls: collections.Counter[str] = collections.Counter()
        self.before_fill: Any = None
        self.corrupt_values = False

    def _check(self, operation: str) -> None:
        self.calls[operation] += 1
        if operation in self.fail:
            raise CacheStoreUnavailable(f"forced {operation} failure")

    async def lookup(self, tenant: str, names: Sequence[str], digest: str,
                     now: float) -> Lookup:
        self._check("lookup")
        found = await self.inner.lookup(tenant, names, digest, now)
        if self.corrupt_values and found.value is not None:
            return Lookup(found.revisions, found.horizon, b"{not json")
        return found

    async def fill(self, tenant: str, names: Sequence[str], revisions: Sequence[int],
                   digest: str, value: bytes, ttl_s: float) -> bool:
        self._check("fill")
        if self.before_fill is not None:
            await self.before_fill(tenant, names)
        return await self.inner.fill(tenant, names, revisions, digest, value, ttl_s)

    async def bump(self, tenant: str, names: Sequence[str], expiries: Sequence[float],
                   now: float) -> None:
        self._check("bump")
        await self.inner.bump(tenant, names, expiries, now)

    async def close(self) -> None:
        await self.inner.close()


class WithoutScopeRevisions:
    """``inner`` as a provider that keeps no scope revisions, so a cache over it keeps
    them in its store (bumps, guarded fills, quarantine): the protocol for providers
    without ``revisions``, which these tests exercise over the native provider."""

    revisions = None

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name

    def capabilities(self) -> Any:
        return attrs.evolve(self.inner.capabilities(), scope_revisions=False)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
