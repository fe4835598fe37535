"""The wrapper over the native provider on SQLite, where retrieval snapshots, the event
outbox and the indexing outbox live: every operation that is not part of the provider
contract, reached through the cache the way a profile's ``[cache] enabled`` builds it.

Issue 14: defect 9 (``outbox_status()``, ``process_index_jobs()`` and ``reindex()``
raised ``TypeError`` through the cache), defect 7 (a hit carried the first search's
``snapshot_id``), and cache events on a bus of their own, outside ``fail_closed``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from cache_support import CountingSink, make_ctx
from governed_memory import GovernedMemoryManager, Permission, Principal, RecordStatus, Scope
from governed_memory.cache import CachedMemoryProvider, InMemoryCacheStore, attach_cache_events
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryConfigurationError
from governed_memory.events import AuditUnavailableError, EventBus, InMemoryEventSink, MemoryEvent
from governed_memory.indexing import (
    IndexingMode,
    IndexingSettings,
    JobState,
    OutboxStatus,
    SnapshotMode,
)
from governed_memory.requests import AddRequest, ApproveRequest, RejectRequest, SearchRequest
from governed_memory.usage import UsageQuery
from governed_memory_embedders.hashing import HashingEmbedder
from governed_memory_native import NativeMemoryProvider, build_native_provider
from governed_memory_native.config import parse_indexing_config

ALICE = Principal("user:alice", "user", "acme", "alice",
                  [Permission.READ, Permission.WRITE, Permission.DELETE])
SCOPE = Scope("acme", user_id="alice")


def sqlite(tmp_path: Path) -> dict[str, Any]:
    return {"backend": "sqlite", "path": str(tmp_path / "memory.db")}


@pytest.fixture
async def cached(tmp_path: Path, clock: ManualClock,
                 sink: CountingSink) -> AsyncIterator[CachedMemoryProvider]:
    provider = CachedMemoryProvider(build_native_provider(sqlite(tmp_path), clock),
                                    InMemoryCacheStore(), events=EventBus([sink]), clock=clock,
                                    quarantine_retry_s=None)
    await provider.start()
    try:
        yield provider
    finally:
        await provider.close()


def by_type(sink: InMemoryEventSink, kind: str) -> list[MemoryEvent]:
    return [event for event in sink.events if event.type == kind]


# -- defect 9: the indexing outbox through the cache --------------------------------------


async def test_the_chat_assistant_profile_reaches_the_indexing_outbox(tmp_path: Path) -> None:
    manager = GovernedMemoryManager.from_profile(
        "chat-assistant@1.0.0", provider_config_overrides={"path": str(tmp_path / "m.db")})
    async with manager:
        provider: Any = manager._provider
        assert isinstance(provider, CachedMemoryProvider)
        await manager.add(ALICE, SCOPE, "Alice likes green tea")
        status = await provider.indexing.outbox_status()
        assert isinstance(status, OutboxStatus) and status.embedder is None
        assert await provider.indexing.retry_dead_jobs() == 0
        assert tuple(await provider.indexing.index_jobs(JobState.DEAD, 10)) == ()
        # The profile has no embedder: the provider itself says so (not a TypeError).
        with pytest.raises(MemoryConfigurationError, match="embedder"):
            await provider.indexing.process_index_jobs(worker_id="w1")
        with pytest.raises(MemoryConfigurationError, match="embedder"):
            await provider.indexing.reindex()


async def test_the_worker_indexes_through_the_cache(tmp_path: Path, clock: ManualClock) -> None:
    provider = CachedMemoryProvider(build_native_provider(sqlite(tmp_path), clock),
                                    InMemoryCacheStore(), clock=clock, quarantine_retry_s=None)
    provider.indexing.configure_indexing(IndexingSettings(mode=IndexingMode.ASYNC_OUTBOX,
                                                 embedder=HashingEmbedder()))
    async with GovernedMemoryManager(provider, clock=clock) as manager:
        for text in ("green tea", "black coffee", "mint tea"):
            await manager.add(ALICE, SCOPE, text)
        status = await provider.indexing.outbox_status()
        assert (status.mode, status.pending, status.missing_vectors) == (
            IndexingMode.ASYNC_OUTBOX, 3, 3)
        assert len(await provider.indexing.index_jobs(JobState.PENDING, 10)) == 3
        report = await provider.indexing.process_index_jobs(worker_id="w1", limit=10, lease_s=30.0)
        assert (report.leased, report.indexed) == (3, 3)
        after = await provider.indexing.outbox_status()
        assert (after.pending, after.missing_vectors, sum(after.vectors.values())) == (0, 0, 3)
        page = await provider.indexing.reindex(limit=2)
        assert (page.enqueued, page.total) == (0, 3)


# -- the event outbox, usage and review through the cache -------------------------------------


async def test_committed_events_reach_the_sinks_through_the_event_outbox(
        cached: CachedMemoryProvider, clock: ManualClock) -> None:
    assert cached.capabilities().event_outbox
    events = InMemoryEventSink()
    async with GovernedMemoryManager(cached, clock=clock, sinks=[events]) as manager:
        assert manager.activity.outbox is not None, "the port must use the provider's outbox"
        record = await manager.add(ALICE, SCOPE, "Alice likes green tea")
        committed = by_type(events, "memory.write.committed")
        assert [event.record_ids for event in committed] == [(record.id,)]
        assert cached.outbox is not None
        assert list(await cached.outbox.pending_events(10)) == []
        await cached.outbox.acknowledge_events(["no-such-event"])  # unknown ids are ignored


async def test_usage_and_review_go_through_and_review_invalidates(
        cached: CachedMemoryProvider, clock: ManualClock, sink: CountingSink) -> None:
    held, kept = [await cached.add(AddRequest(scope=SCOPE, content=text,
                                              status=RecordStatus.PENDING_REVIEW),
                                   make_ctx(clock)) for text in ("walrus facts", "walrus trivia")]
    walrus = SearchRequest(scopes=(SCOPE,), query="walrus")
    assert (await cached.search(walrus, make_ctx(clock))).hits == ()
    usage = await cached.usage(UsageQuery("acme", SCOPE), make_ctx(clock))
    assert (usage.records, usage.bytes) == (2, len("walrus facts") + len("walrus trivia"))
    await cached.approve(ApproveRequest(scope=SCOPE, record_id=kept.id), make_ctx(clock))
    assert [h.record.id for h in (await cached.search(walrus, make_ctx(clock))).hits] == [
        kept.id]
    await cached.reject(RejectRequest(scope=SCOPE, record_id=held.id), make_ctx(clock))
    # The provider advanced the scope's revision in each decision's own transaction: the
    # cache checked the page against it and had nothing to invalidate itself.
    assert cached.checks_provider_revisions and sink.count("invalidate") == 0
    assert (await cached.search(walrus, make_ctx(clock))).hits[0].record.id == kept.id


# -- defect 7: a hit's snapshot describes the hit --------------------------------------------


async def test_a_hit_is_replayed_as_its_own_operation(cached: CachedMemoryProvider,
                                                      clock: ManualClock,
                                                      sink: CountingSink) -> None:
    events = InMemoryEventSink()
    async with GovernedMemoryManager(cached, clock=clock, sinks=[events]) as manager:
        await manager.add(ALICE, SCOPE, "Alice likes green tea")
        first = await manager.search(ALICE, SCOPE, "green tea")
        first_at = clock.now()
        clock.advance(30)
        second = await manager.search(ALICE, SCOPE, "green tea")
        assert sink.count("hit") == 1, "the second search must be a cache hit"
        assert first.snapshot_id and second.snapshot_id
        assert second.snapshot_id != first.snapshot_id
        searches = by_type(events, "memory.read.completed")
        decisions = [event.decision_id for event in searches if event.operation == "search"]
        assert len(decisions) == 2 and decisions[0] != decisions[1]
        replayed_first = await manager.replay(ALICE, first.snapshot_id)
        replayed = await manager.replay(ALICE, second.snapshot_id)
        assert (replayed_first.created_at, replayed_first.decision_id) == (first_at, decisions[0])
        assert (replayed.created_at, replayed.decision_id) == (first_at + 30, decisions[1])
        assert replayed.policy_revision == manager.policy_engine.revision
        assert [(h.record.id, h.record.version, h.score, h.rank) for h in replayed.hits] == [
            (h.record.id, h.record.version, h.score, h.rank) for h in second.hits]
        assert replayed.candidates == second.candidates


async def test_a_hit_of_a_provider_that_cannot_record_its_snapshot_has_none(
        tmp_path: Path, clock: ManualClock, sink: CountingSink) -> None:
    """Never the first search's snapshot: no snapshot, and the hit event says why."""

    class NotRecording:
        """The provider's replay, except that it cannot record a snapshot for a hit."""

        def __init__(self, replay: Any) -> None:
            self._replay = replay

        def __getattr__(self, name: str) -> Any:
            return getattr(self._replay, name)

        async def record_snapshot(self, request: Any, ctx: Any,
                                  result: Any) -> str | None:
            return None  # keeps snapshots, but cannot record one for a hit

    class Provider(NativeMemoryProvider):
        @property
        def replay(self) -> Any:
            return NotRecording(super().replay)

    built = build_native_provider(sqlite(tmp_path), clock)
    inner = Provider(built.backend, clock, indexing=parse_indexing_config(sqlite(tmp_path)))
    provider = CachedMemoryProvider(inner,
                                    InMemoryCacheStore(), events=EventBus([sink]), clock=clock,
                                    quarantine_retry_s=None)
    async with GovernedMemoryManager(provider, clock=clock) as manager:
        await manager.add(ALICE, SCOPE, "Alice likes green tea")
        first = await manager.search(ALICE, SCOPE, "green tea")
        second = await manager.search(ALICE, SCOPE, "green tea")
        assert first.snapshot_id is not None and second.snapshot_id is None
        assert second == first, "the hit is the provider's answer"
        assert (sink.count("hit"), sink.count("hit", "no_snapshot")) == (1, 1)
        assert (await manager.replay(ALICE, first.snapshot_id)).hits


async def test_without_snapshots_a_hit_has_none(tmp_path: Path, clock: ManualClock,
                                                sink: CountingSink) -> None:
    inner = build_native_provider(sqlite(tmp_path), clock)
    provider = CachedMemoryProvider(inner, InMemoryCacheStore(), events=EventBus([sink]),
                                    clock=clock, quarantine_retry_s=None)
    provider.indexing.configure_indexing(IndexingSettings(snapshots=SnapshotMode.OFF))
    async with GovernedMemoryManager(provider, clock=clock) as manager:
        await manager.add(ALICE, SCOPE, "Alice likes green tea")
        first = await manager.search(ALICE, SCOPE, "green tea")
        second = await manager.search(ALICE, SCOPE, "green tea")
        assert (first.snapshot_id, second.snapshot_id, sink.count("hit")) == (None, None, 1)


# -- cache events on the host's bus ------------------------------------------------------------


class RefusingSink:
    name = "refusing"

    def __init__(self) -> None:
        self.refuse = False
        self.events: list[MemoryEvent] = []

    async def emit(self, event: MemoryEvent) -> None:
        if self.refuse and event.type.startswith("memory.cache."):
            raise OSError("the audit disk is full")
        self.events.append(event)

    async def close(self) -> None:
        return None


async def test_cache_events_follow_the_attached_bus_and_fail_closed(
        cached: CachedMemoryProvider, clock: ManualClock, sink: CountingSink) -> None:
    trail = RefusingSink()
    strict = EventBus([trail], strict=True)
    assert attach_cache_events(cached, strict) == 1
    assert cached.events is strict
    async with GovernedMemoryManager(cached, clock=clock, sinks=[trail],
                                     fail_closed=True) as manager:
        record = await manager.add(ALICE, SCOPE, "Alice likes green tea")
        await manager.search(ALICE, SCOPE, "green tea")
        await manager.search(ALICE, SCOPE, "green tea")
        cache_types = [e.type for e in trail.events if e.type.startswith("memory.cache.")]
        # A write needs nothing from a cache over a provider that keeps scope
        # revisions: no invalidate event, only the search's own.
        assert cache_types == ["memory.cache.miss", "memory.cache.fill", "memory.cache.hit"]
        assert sink.count("hit") == 0, "events left the bus they were attached away from"
        trail.refuse = True
        with pytest.raises(AuditUnavailableError):
            await manager.search(ALICE, SCOPE, "green tea")  # a hit it cannot record
        # The update commits with its event in the provider's outbox (delivered once the
        # trail is back); it needs nothing from the cache, so nothing can refuse it there.
        await manager.update(ALICE, SCOPE, record.id, content="Alice likes black tea")
        trail.refuse = False
        # The update advanced the scope's revision when it committed: the search is current.
        result = await manager.search(ALICE, SCOPE, "tea")
        assert [hit.record.content for hit in result.hits] == ["Alice likes black tea"]


def test_attach_reaches_a_cache_under_another_wrapper(cached: CachedMemoryProvider) -> None:
    outer = CachedMemoryProvider(cached, InMemoryCacheStore())
    bus = EventBus([])
    assert attach_cache_events(outer, bus) == 2
    assert outer.events is bus and cached.events is bus
    assert attach_cache_events(object(), bus) == 0
