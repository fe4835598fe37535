"""The Mem0 adapter keeps scope revisions in its ledger (issue 28, defect 1): every
write advances its scope in the ledger's transaction and ``delete_user`` the tenant
epoch, so a search cache over the adapter checks each page against the ledger instead
of trusting its own store."""

from __future__ import annotations

from pathlib import Path

from governed_memory import Permission, Principal, Scope
from governed_memory.cache import CachedMemoryProvider, InMemoryCacheStore
from governed_memory.clock import ManualClock
from governed_memory.operation_context import OperationContext
from governed_memory.requests import (
    AddRequest,
    DeleteRequest,
    DeleteUserRequest,
    SearchRequest,
    UpdateRequest,
)
from governed_memory_mem0 import build_mem0_provider
from mem0_support import local_config

SERVICE = Principal("svc:mem0", "service", "acme", permissions=[Permission.ADMIN])
ALICE = Scope("acme", user_id="alice")
BOB = Scope("acme", user_id="bob")


def ctx(clock: ManualClock) -> OperationContext:
    return OperationContext(operation_id="op_mem0_revisions", principal=SERVICE, now=clock.now())


async def test_writes_advance_their_scope_and_erasure_the_epoch(tmp_path: Path) -> None:
    clock = ManualClock()
    provider = build_mem0_provider(local_config(tmp_path), clock)
    await provider.start()
    try:
        assert provider.capabilities().scope_revisions
        revisions = provider.revisions
        assert revisions is not None
        names = [ALICE.scope_hash, BOB.scope_hash]
        assert (await revisions.read("acme", names, clock.now())).revisions == (0, 0, 0)
        record = await provider.add(AddRequest(scope=ALICE, content="green tea",
                                               expires_at=clock.now() + 60), ctx(clock))
        state = await revisions.read("acme", names, clock.now())
        assert state.revisions[0] > 0 and state.revisions[1:] == (0, 0)
        assert state.horizon == clock.now() + 60
        before = state.revisions[0]
        updated = await provider.update(UpdateRequest(scope=ALICE, record_id=record.id,
                                                      content="black tea"), ctx(clock))
        after = (await revisions.read("acme", names, clock.now())).revisions[0]
        assert after > before
        await provider.delete(DeleteRequest(scope=ALICE, record_id=updated.id), ctx(clock))
        assert (await revisions.read("acme", names, clock.now())).revisions[0] > after
        await provider.add(AddRequest(scope=BOB, content="oolong"), ctx(clock))
        await provider.delete_user(DeleteUserRequest(tenant_id="acme", user_id="alice"),
                                   ctx(clock))
        state = await revisions.read("acme", names, clock.now())
        # Alice's scope is forgotten with her; the epoch moved, Bob's scope is kept.
        assert state.revisions[0] == 0 and state.revisions[1] > 0 and state.revisions[2] == 1
    finally:
        await provider.close()


async def test_a_cache_over_the_adapter_checks_pages_against_the_ledger(
        tmp_path: Path) -> None:
    clock = ManualClock()
    cached = CachedMemoryProvider(build_mem0_provider(local_config(tmp_path), clock),
                                  InMemoryCacheStore(), clock=clock, quarantine_retry_s=None)
    await cached.start()
    try:
        assert cached.checks_provider_revisions
        await cached.add(AddRequest(scope=ALICE, content="Alice likes green tea"), ctx(clock))
        request = SearchRequest(scopes=(ALICE,), query="green tea")
        first = await cached.search(request, ctx(clock))
        assert [hit.record.content for hit in first.hits] == ["Alice likes green tea"]
        assert await cached.search(request, ctx(clock)) == first
        # A write straight to the adapter, behind the cache's back (another process):
        # the ledger's revision moved, so the cached page is not served.
        await cached.inner.delete_user(DeleteUserRequest(tenant_id="acme", user_id="alice"),
                                       ctx(clock))
        assert (await cached.search(request, ctx(clock))).hits == ()
    finally:
        await cached.close()
