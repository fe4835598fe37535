"""Property: a record is only ever returned to its own exact scope, on every backend.

A small alphabet of tenants, users and sessions makes partial-dimension collisions
(same tenant and user, different session; same user id in another tenant) the norm.
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
from pathlib import Path

import pytest
from governed_memory import MemoryConflictError, MemoryNotFoundError, MemoryRecord, Principal, Scope
from governed_memory.clock import ManualClock
from governed_memory.operation_context import OperationContext
from governed_memory.requests import AddRequest, GetRequest, ListRequest, SearchRequest
from governed_memory_native import build_native_provider
from hypothesis import given
from hypothesis import strategies as st
from native_support import config_for, examples, require_backend

TENANTS = ("t1", "t2")
USERS = (None, "u1", "u2")
SESSIONS = (None, "s1")
WORDS = ("tea", "coffee", "hike", "green")
ALL_SCOPES = tuple(Scope(tenant_id=t, user_id=u, session_id=s)
                   for t, u, s in itertools.product(TENANTS, USERS, SESSIONS))

writes = st.lists(
    st.tuples(
        st.sampled_from(ALL_SCOPES),
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join),
        st.sampled_from((None, "k1", "k2")),
    ),
    min_size=1, max_size=12,
)


def _ctx(clock: ManualClock, scope: Scope) -> OperationContext:
    return OperationContext(
        operation_id="prop",
        principal=Principal(principal_id="svc", kind="service", tenant_id=scope.tenant_id,
                            permissions=["memory:admin"]),
        now=clock.now(),
    )


async def _scenario(backend: str, directory: Path,
                    plan: list[tuple[Scope, str, str | None]]) -> None:
    clock = ManualClock()
    provider = build_native_provider(config_for(backend, directory), clock)
    await provider.start()
    try:
        written: list[MemoryRecord] = []
        for scope, content, key in plan:
            try:
                written.append(await provider.add(
                    AddRequest(scope=scope, content=content, key=key), _ctx(clock, scope)))
            except MemoryConflictError:
                assert key is not None and any(
                    r.key == key and r.scope_hash == scope.scope_hash for r in written)
        for scope in ALL_SCOPES:
            ctx = _ctx(clock, scope)
            own = sorted(r.id for r in written if r.scope_hash == scope.scope_hash)
            page = await provider.list(ListRequest(scope=scope, limit=100), ctx)
            assert [r.id for r in page.items] == own
            for record in written:
                request = GetRequest(scope=scope, record_id=record.id)
                if record.scope_hash == scope.scope_hash:
                    assert (await provider.get(request, ctx)).id == record.id
                else:
                    with pytest.raises(MemoryNotFoundError):
                        await provider.get(request, ctx)
            for key in ("k1", "k2"):
                holder = [r for r in written
                          if r.key == key and r.scope_hash == scope.scope_hash]
                if holder:
                    got = await provider.get(GetRequest(scope=scope, key=key), ctx)
                    assert got.id == holder[0].id
                else:
                    with pytest.raises(MemoryNotFoundError):
                        await provider.get(GetRequest(scope=scope, key=key), ctx)
            for word in WORDS:
                result = await provider.search(
                    SearchRequest(scopes=(scope,), query=word, limit=100), ctx)
                assert all(hit.record.scope_hash == scope.scope_hash for hit in result.hits)
                expected = {r.id for r in written
                            if r.scope_hash == scope.scope_hash and word in r.content.split()}
                assert {hit.record.id for hit in result.hits} == expected
    finally:
        await provider.close()


def test_records_never_leak_to_another_scope(backend: str) -> None:
    require_backend(backend)

    @examples(backend, memory=50, sqlite=50, postgres=15)
    @given(plan=writes)
    def never_leaks(plan: list[tuple[Scope, str, str | None]]) -> None:
        with tempfile.TemporaryDirectory() as directory:
            asyncio.run(_scenario(backend, Path(directory), plan))

    never_leaks()
