"""Deliberately broken stores, each a built-in store with one bug, for the store suites'
meta-tests: a suite that passes a broken store proves nothing."""

from __future__ import annotations

from collections.abc import Sequence

from governed_memory import Scope
from governed_memory.cache import InMemoryCacheStore
from governed_memory.tiers import InMemoryTurnStore, InMemoryWorkingStateStore, WorkingState


class RenumberingTurnStore(InMemoryTurnStore):
    """A clear restarts the session's numbering, so a summary frontier from before the
    clear covers the turns after it."""

    async def clear(self, scope: Scope) -> int:
        removed = await super().clear(scope)
        session = self._sessions.get(scope.scope_hash)
        if session is not None:
            session.last_seq = 0
        return removed


class UserWideTurnStore(InMemoryTurnStore):
    """Keys sessions by tenant and user, so every session of a user shares one log."""

    @staticmethod
    def _user(scope: Scope) -> Scope:
        return Scope(scope.tenant_id, user_id=scope.user_id)

    async def append(self, scope, draft, now):  # type: ignore[no-untyped-def]
        turn = await super().append(self._user(scope), draft, now)
        return turn

    async def recent(self, scope, limit):  # type: ignore[no-untyped-def]
        return await super().recent(self._user(scope), limit)


class StickyWorkingStateStore(InMemoryWorkingStateStore):
    """Reads ignore the expiry: a run's state outlives its TTL."""

    async def read(self, scope: Scope, now: float) -> WorkingState | None:
        entry = self._entries.get(scope.scope_hash)
        return None if entry is None else entry.state


class BlindFillCacheStore(InMemoryCacheStore):
    """Stores every fill, whatever the revisions read now: an answer computed before a
    write lands after the write's bump and is served."""

    async def fill(self, tenant: str, names: Sequence[str], revisions: Sequence[int],
                   digest: str, value: bytes, ttl_s: float) -> bool:
        current = tuple(self._revision(tenant, name) for name in names)
        return await super().fill(tenant, names, current, digest, value, ttl_s)
