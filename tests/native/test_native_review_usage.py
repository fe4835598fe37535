"""Native review (approve, reject) and usage reports, on both backends."""

from __future__ import annotations

from pathlib import Path

import pytest
from governed_memory import MemoryConflictError, MemoryNotFoundError, RecordStatus
from governed_memory.clock import ManualClock
from governed_memory.records import VersionOperation
from governed_memory.requests import (
    AddRequest,
    ApproveRequest,
    DeleteRequest,
    GetRequest,
    HistoryRequest,
    RejectRequest,
)
from governed_memory.usage import Usage, UsageQuery
from governed_memory_native import NativeMemoryProvider
from native_support import OTHER_TENANT, OTHER_USER, USER_SCOPE, build, make_ctx, note


def pending(content: str = "from a web page", **fields: object) -> AddRequest:
    return note(content, status=RecordStatus.PENDING_REVIEW, **fields)


async def test_capabilities(provider: NativeMemoryProvider) -> None:
    caps = provider.capabilities()
    assert caps.review is True and caps.usage is True


async def test_approve_is_a_new_active_version(provider: NativeMemoryProvider,
                                               clock: ManualClock) -> None:
    held = await provider.add(pending(key="k"), make_ctx(clock))
    clock.advance(3)
    ctx = make_ctx(clock)
    approved = await provider.approve(ApproveRequest(scope=USER_SCOPE, record_id=held.id,
                                                     expected_revision=held.revision), ctx)
    assert (approved.status, approved.version) == (RecordStatus.ACTIVE, 2)
    assert approved.updated_at == held.created_at + 3
    assert (await provider.get(GetRequest(scope=USER_SCOPE, key="k"),
                               make_ctx(clock))).id == held.id
    history = await provider.history(HistoryRequest(scope=USER_SCOPE, record_id=held.id),
                                     make_ctx(clock))
    assert [(v.operation, v.operation_id) for v in history][-1] == (VersionOperation.APPROVE,
                                                                     ctx.operation_id)


async def test_reject_erases_record_history_and_frees_the_key(provider: NativeMemoryProvider,
                                                              clock: ManualClock) -> None:
    held = await provider.add(pending(key="k"), make_ctx(clock))
    result = await provider.reject(RejectRequest(scope=USER_SCOPE, record_id=held.id),
                                   make_ctx(clock))
    assert (result.record_id, result.hard, result.version) == (held.id, True, None)
    with pytest.raises(MemoryNotFoundError):
        await provider.history(HistoryRequest(scope=USER_SCOPE, record_id=held.id), make_ctx(clock))
    again = await provider.add(note("successor", key="k"), make_ctx(clock))
    assert again.id != held.id


async def test_a_rejected_adds_retry_is_refused(provider: NativeMemoryProvider,
                                                clock: ManualClock) -> None:
    request = pending(idempotency_key="add-1")
    held = await provider.add(request, make_ctx(clock))
    await provider.reject(RejectRequest(scope=USER_SCOPE, record_id=held.id), make_ctx(clock))
    with pytest.raises(MemoryConflictError, match="erased"):
        await provider.add(request, make_ctx(clock))


async def test_decisions_need_a_live_pending_record(provider: NativeMemoryProvider,
                                                    clock: ManualClock) -> None:
    active = await provider.add(note("active"), make_ctx(clock))
    held = await provider.add(pending(expires_at=clock.now() + 10), make_ctx(clock))
    deleted = await provider.add(pending("soon deleted"), make_ctx(clock))
    await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=deleted.id), make_ctx(clock))
    for decide, kind in ((provider.approve, ApproveRequest), (provider.reject, RejectRequest)):
        with pytest.raises(MemoryConflictError, match="active, not pending review"):
            await decide(kind(scope=USER_SCOPE, record_id=active.id), make_ctx(clock))  # type: ignore[operator]
        with pytest.raises(MemoryNotFoundError):
            await decide(kind(scope=OTHER_USER, record_id=held.id), make_ctx(clock))  # type: ignore[operator]
        with pytest.raises(MemoryNotFoundError):
            await decide(kind(scope=USER_SCOPE, record_id=deleted.id), make_ctx(clock))  # type: ignore[operator]
        with pytest.raises(MemoryConflictError, match="stale"):
            await decide(kind(scope=USER_SCOPE, record_id=held.id, expected_revision="rstale"),
                         make_ctx(clock))  # type: ignore[operator]
    clock.advance(10)
    with pytest.raises(MemoryNotFoundError):
        await provider.approve(ApproveRequest(scope=USER_SCOPE, record_id=held.id), make_ctx(clock))


async def test_decisions_replay_by_idempotency_key(provider: NativeMemoryProvider,
                                                   clock: ManualClock) -> None:
    one = await provider.add(pending("one"), make_ctx(clock))
    first = await provider.approve(ApproveRequest(scope=USER_SCOPE, record_id=one.id,
                                                  idempotency_key="a"),
                                   make_ctx(clock))
    assert await provider.approve(ApproveRequest(scope=USER_SCOPE, record_id=one.id,
                                                 idempotency_key="a"),
                                  make_ctx(clock)) == first
    two = await provider.add(pending("two"), make_ctx(clock))
    gone = await provider.reject(RejectRequest(scope=USER_SCOPE, record_id=two.id,
                                               idempotency_key="r"),
                                 make_ctx(clock))
    assert await provider.reject(RejectRequest(scope=USER_SCOPE, record_id=two.id,
                                               idempotency_key="r"),
                                 make_ctx(clock)) == gone
    with pytest.raises(MemoryConflictError, match="different request"):
        await provider.reject(RejectRequest(scope=USER_SCOPE, record_id=one.id,
                                            idempotency_key="r"),
                              make_ctx(clock))


async def test_usage_counts_what_a_quota_counts(provider: NativeMemoryProvider,
                                                clock: ManualClock) -> None:
    await provider.add(note("plain"), make_ctx(clock))
    await provider.add(note("café"), make_ctx(clock))  # 5 bytes in UTF-8
    await provider.add(pending("held"), make_ctx(clock))
    gone = await provider.add(note("deleted"), make_ctx(clock))
    await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=gone.id), make_ctx(clock))
    await provider.add(note("expiring", expires_at=clock.now() + 1), make_ctx(clock))
    await provider.add(note("neighbour", scope=OTHER_USER), make_ctx(clock))
    await provider.add(note("elsewhere", scope=OTHER_TENANT), make_ctx(clock, "globex"))
    clock.advance(1)
    ctx = make_ctx(clock)
    meter = provider.usage_meter  # how the activity port reads usage
    assert meter is not None
    assert await meter.usage(UsageQuery("acme", USER_SCOPE), ctx) == Usage(3, 5 + 5 + 4)
    assert await meter.usage(UsageQuery("acme"), ctx) == Usage(4, 5 + 5 + 4 + 9)
    assert await meter.usage(UsageQuery("nobody"), ctx) == Usage(0, 0)


async def test_usage_is_offered_through_the_usage_meter_accessor(
        provider: NativeMemoryProvider, clock: ManualClock) -> None:
    """``usage_meter`` is the accessor the port asks (like ``review``); a wrapper answers
    with the provider's own meter, so a quota never counts from a cache."""
    from governed_memory.cache import CachedMemoryProvider, InMemoryCacheStore
    from governed_memory.usage import UsageMeter

    assert provider.usage_meter is provider
    assert isinstance(provider.usage_meter, UsageMeter)
    cached = CachedMemoryProvider(provider, InMemoryCacheStore(), clock=clock)
    assert cached.usage_meter is provider
    await provider.add(note("plain"), make_ctx(clock))
    assert await cached.usage(UsageQuery("acme", USER_SCOPE), make_ctx(clock)) == Usage(1, 5)


async def test_the_port_reads_quota_usage_through_the_accessor(tmp_path: Path,
                                                              clock: ManualClock) -> None:
    """A policy's usage probe reads the provider's ``usage_meter``, whatever object it
    is (here one apart from the provider, which has no ``usage`` of its own); a provider
    that declares ``usage`` but offers no meter gives the policy no probe (a quota then
    denies: it never guesses)."""
    import attrs
    from governed_memory import GovernedMemoryManager
    from governed_memory.capabilities import Capabilities
    from governed_memory.operation_context import OperationContext
    from governed_memory.policy import PolicyCheck, PolicyVerdict
    from governed_memory.principal import Principal

    alice = Principal(principal_id="alice", kind="user", tenant_id="acme", user_id="alice",
                      permissions=["memory:read", "memory:write"])

    class Meter:
        def __init__(self, provider: NativeMemoryProvider) -> None:
            self.provider = provider
            self.queries: list[UsageQuery] = []

        async def usage(self, query: UsageQuery, ctx: OperationContext) -> Usage:
            self.queries.append(query)
            return await NativeMemoryProvider.usage(self.provider, query, ctx)

    class Metered(NativeMemoryProvider):
        """Usage only through the accessor: ``usage`` itself is not there."""

        meter: Meter | None = None

        @property
        def usage_meter(self) -> Meter | None:  # type: ignore[override]
            return self.meter

        def __getattribute__(self, name: str) -> object:
            if name == "usage":
                raise AttributeError(name)
            return super().__getattribute__(name)

        def capabilities(self) -> Capabilities:
            return attrs.evolve(super().capabilities(), usage=True)

    seen: list[Usage | None] = []

    class Peek:
        name, revision = "peek", "1"

        async def evaluate(self, check: PolicyCheck) -> PolicyVerdict:
            seen.append(None if check.usage is None
                        else await check.usage(UsageQuery("acme", USER_SCOPE)))
            return PolicyVerdict.allow()

    provider = Metered(build("memory", tmp_path, clock).backend, clock)
    meter = provider.meter = Meter(provider)
    async with GovernedMemoryManager(provider, clock=clock, policies=[Peek()]) as manager:
        await manager.add(alice, USER_SCOPE, "plain")
        await manager.add(alice, USER_SCOPE, "café")
    assert seen == [Usage(0, 0), Usage(1, 5)]
    assert meter.queries == [UsageQuery("acme", USER_SCOPE)] * 2

    seen.clear()
    blind = Metered(build("memory", tmp_path, clock).backend, clock)
    async with GovernedMemoryManager(blind, clock=clock, policies=[Peek()]) as manager:
        await manager.add(alice, USER_SCOPE, "plain")
    assert seen == [None], "a provider without a meter gave the policy a usage probe"


async def test_sqlite_keeps_approvals_across_reopen(tmp_path: Path, clock: ManualClock) -> None:
    first = build("sqlite", tmp_path, clock)
    await first.start()
    held = await first.add(pending(), make_ctx(clock))
    await first.approve(ApproveRequest(scope=USER_SCOPE, record_id=held.id), make_ctx(clock))
    await first.close()
    second = build("sqlite", tmp_path, clock)
    await second.start()
    try:
        history = await second.history(HistoryRequest(scope=USER_SCOPE, record_id=held.id),
                                       make_ctx(clock))
        assert [v.operation for v in history] == [VersionOperation.ADD, VersionOperation.APPROVE]
        assert [v.record.status for v in history] == [RecordStatus.PENDING_REVIEW,
                                                      RecordStatus.ACTIVE]
    finally:
        await second.close()
