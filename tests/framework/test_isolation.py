"""Scope isolation through the whole governed pipeline, as a property.

Records written under random scopes (drawn from tiny alphabets so that scopes share
tenants, users and sessions, and differ by one dimension) are never returned to
another scope by get, list or search — on both native backends.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import pytest
from governed_memory import (
    GovernedMemoryManager,
    MemoryNotFoundError,
    Permission,
    Principal,
    PrincipalKind,
    Scope,
)
from governed_memory.clock import ManualClock
from hypothesis import given, settings
from hypothesis import strategies as st

WORDS = ["apple", "river", "stone", "cloud"]

scopes = st.builds(
    Scope,
    tenant_id=st.sampled_from(["t1", "t2"]),
    project_id=st.sampled_from([None, "p1"]),
    user_id=st.sampled_from([None, "u1", "u2"]),
    session_id=st.sampled_from([None, "s1"]),
)
writes = st.lists(st.tuples(scopes, st.lists(st.sampled_from(WORDS), min_size=1, max_size=3)),
                  min_size=1, max_size=12)


def admin(tenant: str) -> Principal:
    return Principal(f"svc:{tenant}", PrincipalKind.SERVICE, tenant,
                     permissions=frozenset(Permission))


async def check_isolation(backend: str, plan: list[tuple[Scope, list[str]]]) -> None:
    from governed_memory_native import build_native_provider

    with tempfile.TemporaryDirectory() as tmp:
        config = {"backend": backend}
        if backend == "sqlite":
            config["path"] = str(Path(tmp) / "m.db")
        clock = ManualClock()
        manager = GovernedMemoryManager(build_native_provider(config, clock), clock=clock)
        async with manager:
            written: dict[str, set[str]] = {}
            by_id: dict[str, str] = {}
            for scope, words in plan:
                record = await manager.add(admin(scope.tenant_id), scope, " ".join(words))
                written.setdefault(scope.scope_hash, set()).add(record.id)
                by_id[record.id] = scope.scope_hash
            distinct = {scope.scope_hash: scope for scope, _ in plan}
            for scope in distinct.values():
                who = admin(scope.tenant_id)
                mine = written[scope.scope_hash]
                listed = (await manager.list(who, scope, limit=100)).items
                assert {r.id for r in listed} == mine
                for word in WORDS:
                    hits = (await manager.search(who, scope, word, limit=100)).hits
                    assert {h.record.id for h in hits} <= mine
                    assert all(h.record.scope_hash == scope.scope_hash for h in hits)
                for record_id, owner in by_id.items():
                    if owner == scope.scope_hash:
                        assert (await manager.get(who, scope, record_id)).id == record_id
                    else:
                        with pytest.raises(MemoryNotFoundError):
                            await manager.get(who, scope, record_id)


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
@settings(max_examples=30)
@given(plan=writes)
def test_records_never_cross_scopes(backend: str, plan: list[tuple[Scope, list[str]]]) -> None:
    asyncio.run(check_isolation(backend, plan))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["memory", "sqlite"])
@settings(max_examples=10_000, deadline=None)
@given(plan=writes)
def test_records_never_cross_scopes_thorough(backend: str,
                                             plan: list[tuple[Scope, list[str]]]) -> None:
    asyncio.run(check_isolation(backend, plan))
