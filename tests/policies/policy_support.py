"""Helpers for the policy tests: profiles from plain data, checks, and storage snapshots."""

from __future__ import annotations

from typing import Any

from actors import ADMIN
from governed_memory.operations import Operation
from governed_memory.policy import PolicyCheck
from governed_memory.principal import Principal
from governed_memory.profiles import MemoryProfileSpec, parse_profile
from governed_memory.requests import MemoryRequest
from governed_memory.usage import Usage, UsageProbe, UsageQuery

NOW = 1_000_000.0


def profile(**sections: Any) -> MemoryProfileSpec:
    return parse_profile({"id": "test", "version": "1.0.0", **sections})


def check(request: MemoryRequest, principal: Principal = ADMIN, *, now: float = NOW,
          usage: UsageProbe | None = None, operation: Operation | None = None) -> PolicyCheck:
    return PolicyCheck(operation or request.operation, principal, request, "op_01TEST", now,
                       usage=usage)


def fixed_usage(tenant: Usage, scope: Usage) -> UsageProbe:
    async def probe(query: UsageQuery) -> Usage:
        return scope if query.scope is not None else tenant

    return probe


def storage_snapshot(provider: Any) -> tuple[Any, ...]:
    """Everything the native in-memory backend holds: records (with their lexical index
    entries), keys, version history and idempotency entries."""
    state = provider.backend._state
    return (dict(state.rows), dict(state.keys),
            {k: tuple(v) for k, v in state.versions.items()}, dict(state.idempotency))
