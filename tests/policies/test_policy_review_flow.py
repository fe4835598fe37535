"""Write review end to end: held memories are invisible to every read until a reviewer
approves (active, a new version) or rejects (erased); each decision has its own events."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from actors import ALICE, ALICE_SCOPE, BOB_SCOPE
from governed_memory import (
    GovernedMemoryManager,
    MemoryConflictError,
    MemoryNotFoundError,
    MemoryScopeError,
    Permission,
    Principal,
    PrincipalKind,
    Provenance,
    RecordStatus,
)
from governed_memory.capabilities import Capabilities
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryCapabilityUnsupportedError
from governed_memory.events import InMemoryEventSink
from governed_memory.plugins import PluginManager
from governed_memory.records import VersionOperation
from policy_support import profile, storage_snapshot

REVIEWED = profile(write={"review_source_types": ["web", "tool"]},
                   provider={"name": "native", "config": {"backend": "memory"}},
                   policies={"enabled": ["write-review"]})
REVIEWER = Principal("svc:moderator", PrincipalKind.SERVICE, "acme",
                     permissions=[Permission.READ, Permission.REVIEW])
WEB = Provenance(source_type="web", source_id="https://example.test/page")


@pytest.fixture
def sink() -> InMemoryEventSink:
    return InMemoryEventSink()


@pytest.fixture
async def manager(sink: InMemoryEventSink) -> Any:
    built = GovernedMemoryManager.from_profile(REVIEWED, plugins=PluginManager.load(blocked=[]),
                                               clock=ManualClock(), sinks=[sink])
    async with built:
        yield built


async def held(manager: GovernedMemoryManager, content: str = "the page says tea is good"
               ) -> Any:
    record = await manager.add(ALICE, ALICE_SCOPE, content, provenance=WEB)
    assert record.status is RecordStatus.PENDING_REVIEW
    return record


async def assert_invisible(manager: GovernedMemoryManager, record_id: str) -> None:
    with pytest.raises(MemoryNotFoundError):
        await manager.get(ALICE, ALICE_SCOPE, record_id)
    assert record_id not in [r.id for r in (await manager.list(ALICE, ALICE_SCOPE)).items]
    assert record_id not in [h.record.id for h in
                             (await manager.search(ALICE, ALICE_SCOPE, "tea")).hits]


async def test_unlisted_sources_are_active_at_once(manager: GovernedMemoryManager) -> None:
    record = await manager.add(ALICE, ALICE_SCOPE, "typed by alice",
                               provenance=Provenance(source_type="user"))
    assert record.status is RecordStatus.ACTIVE


async def test_held_memories_are_invisible_to_every_read(manager: GovernedMemoryManager,
                                                         sink: InMemoryEventSink) -> None:
    record = await held(manager)
    assert sink.events[1].type == "memory.write.committed"
    assert sink.events[1].reasons == (
        "write-review: memories from source type web are reviewed before they are visible",)
    await assert_invisible(manager, record.id)


async def test_approve_makes_it_visible_as_a_new_version(manager: GovernedMemoryManager,
                                                         sink: InMemoryEventSink) -> None:
    record = await held(manager)
    sink.clear()
    approved = await manager.approve(REVIEWER, ALICE_SCOPE, record.id,
                                     expected_revision=record.revision)
    assert approved.status is RecordStatus.ACTIVE
    assert approved.version == record.version + 1
    assert approved.revision != record.revision
    assert approved.content == record.content
    assert (await manager.get(ALICE, ALICE_SCOPE, record.id)).version == approved.version
    assert [h.record.id for h in (await manager.search(ALICE, ALICE_SCOPE, "tea")).hits] == [
        record.id]
    history = await manager.history(ALICE, ALICE_SCOPE, record.id)
    assert [(v.operation, v.record.status) for v in history] == [
        (VersionOperation.ADD, RecordStatus.PENDING_REVIEW),
        (VersionOperation.APPROVE, RecordStatus.ACTIVE)]
    approve_events = [e for e in sink.events if e.operation == "approve"]
    assert [e.type for e in approve_events] == ["memory.write.requested",
                                                "memory.write.committed"]
    assert approve_events[-1].record_ids == (record.id,)
    assert approve_events[-1].versions == (approved.version,)


async def test_reject_erases_it(manager: GovernedMemoryManager,
                                sink: InMemoryEventSink) -> None:
    kept = await manager.add(ALICE, ALICE_SCOPE, "kept note")
    before = storage_snapshot(manager._provider)
    record = await held(manager)
    sink.clear()
    result = await manager.reject(REVIEWER, ALICE_SCOPE, record.id)
    assert (result.record_id, result.hard) == (record.id, True)
    await assert_invisible(manager, record.id)
    with pytest.raises(MemoryNotFoundError):
        await manager.history(ALICE, ALICE_SCOPE, record.id)
    assert storage_snapshot(manager._provider) == before  # as if it had never been written
    assert (await manager.get(ALICE, ALICE_SCOPE, kept.id)).id == kept.id
    rejected = [e for e in sink.events if e.operation == "reject"]
    assert [e.type for e in rejected] == ["memory.write.requested", "memory.write.committed"]
    assert rejected[-1].record_ids == (record.id,)


async def test_deciding_a_record_that_is_not_pending_is_a_conflict(
        manager: GovernedMemoryManager) -> None:
    active = await manager.add(ALICE, ALICE_SCOPE, "already active")
    with pytest.raises(MemoryConflictError):
        await manager.approve(REVIEWER, ALICE_SCOPE, active.id)
    with pytest.raises(MemoryConflictError):
        await manager.reject(REVIEWER, ALICE_SCOPE, active.id)
    record = await held(manager)
    await manager.approve(REVIEWER, ALICE_SCOPE, record.id)
    with pytest.raises(MemoryConflictError):
        await manager.approve(REVIEWER, ALICE_SCOPE, record.id)  # twice
    with pytest.raises(MemoryConflictError):
        await manager.reject(REVIEWER, ALICE_SCOPE, record.id)
    assert (await manager.get(ALICE, ALICE_SCOPE, active.id)).version == 1


async def test_unknown_ids_stale_revisions_and_other_scopes(
        manager: GovernedMemoryManager) -> None:
    record = await held(manager)
    with pytest.raises(MemoryNotFoundError):
        await manager.approve(REVIEWER, ALICE_SCOPE, "01ZZZZZZZZZZZZZZZZZZZZZZZZ")
    with pytest.raises(MemoryNotFoundError):
        await manager.approve(REVIEWER, BOB_SCOPE, record.id)  # exact scope
    with pytest.raises(MemoryConflictError):
        await manager.approve(REVIEWER, ALICE_SCOPE, record.id, expected_revision="rstale")
    await assert_invisible(manager, record.id)


async def test_deciding_takes_memory_review(manager: GovernedMemoryManager,
                                            sink: InMemoryEventSink) -> None:
    record = await held(manager)
    with pytest.raises(MemoryScopeError, match="principal lacks memory:review"):
        await manager.approve(ALICE, ALICE_SCOPE, record.id)  # the writer cannot wave it in
    assert sink.events[-1].type == "memory.write.rejected"
    assert sink.events[-1].operation == "approve"
    admin = Principal("svc:admin", PrincipalKind.SERVICE, "acme",
                      permissions=[Permission.ADMIN])
    assert (await manager.approve(admin, ALICE_SCOPE, record.id)).status is RecordStatus.ACTIVE


async def test_idempotent_decisions(manager: GovernedMemoryManager) -> None:
    record = await held(manager)
    first = await manager.approve(REVIEWER, ALICE_SCOPE, record.id, idempotency_key="d1")
    again = await manager.approve(REVIEWER, ALICE_SCOPE, record.id, idempotency_key="d1")
    assert again.revision == first.revision
    other = await held(manager, "another page")
    gone = await manager.reject(REVIEWER, ALICE_SCOPE, other.id, idempotency_key="d2")
    assert await manager.reject(REVIEWER, ALICE_SCOPE, other.id, idempotency_key="d2") == gone


async def test_a_provider_without_review_refuses_the_decision(sink: InMemoryEventSink) -> None:
    from governed_memory_native import build_native_provider

    class NoReview:
        def __init__(self, inner: Any) -> None:
            self._inner = inner
            self.name = inner.name

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

        def capabilities(self) -> Capabilities:
            return attrs.evolve(self._inner.capabilities(), review=False)

    clock = ManualClock()
    provider = NoReview(build_native_provider({"backend": "memory"}, clock))
    async with GovernedMemoryManager(provider, clock=clock, sinks=[sink]) as m:
        with pytest.raises(MemoryCapabilityUnsupportedError, match="capability 'review'"):
            await m.approve(REVIEWER, ALICE_SCOPE, "01ZZZZZZZZZZZZZZZZZZZZZZZZ")
    assert [e.type for e in sink.events] == ["memory.write.requested", "memory.write.rejected"]
    assert sink.events[-1].error_code == "capability_unsupported"
