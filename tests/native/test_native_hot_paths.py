"""What the hot paths cost in storage work, counted (never timed): one unit of work and
one commit per write, no outbox read or acknowledgement commit of its own, no commit on
a search, and snapshots that a crash loses are reported lost."""

from __future__ import annotations

from pathlib import Path

import pytest
from governed_memory import MemoryNotFoundError
from governed_memory.clock import ManualClock
from governed_memory.events import EventBus, InMemoryEventSink
from governed_memory.indexing import IndexingSettings, SnapshotMode
from governed_memory.outbox import OutboxDispatcher
from governed_memory.profiles import loads_profile
from governed_memory.replay import ReplayRequest, SnapshotLostError
from governed_memory.requests import GetRequest, SearchRequest
from governed_memory_native import NativeMemoryProvider, SqliteBackend, build_native_provider
from native_support import USER_SCOPE, make_ctx, note
from outbox_support import outbox_ctx


def _sqlite(tmp_path: Path, clock: ManualClock,
            snapshots: SnapshotMode = SnapshotMode.BATCHED) -> NativeMemoryProvider:
    provider = build_native_provider({"path": str(tmp_path / "memory.db")}, clock)
    provider.configure_indexing(IndexingSettings(snapshots=snapshots))
    return provider


def _stats(provider: NativeMemoryProvider) -> dict[str, int]:
    backend = provider.backend
    assert isinstance(backend, SqliteBackend)
    return backend.stats.as_dict()


async def test_a_write_and_its_event_delivery_cost_one_hop_and_one_commit(
        tmp_path: Path, clock: ManualClock) -> None:
    provider = _sqlite(tmp_path, clock)
    await provider.start()
    sink = InMemoryEventSink()
    dispatcher = OutboxDispatcher(provider, EventBus([sink]))
    try:
        await provider.add(note("warm up"), outbox_ctx(clock))
        await dispatcher.drain()  # the first drain after a start reads storage once
        before = _stats(provider)
        for n in range(5):
            await provider.add(note(f"fact {n}"), outbox_ctx(clock))
            drained = await dispatcher.drain()
            assert len(drained.delivered) == 1
        after = _stats(provider)
        assert after["writes"] - before["writes"] == 5
        assert after["commits"] - before["commits"] == 5  # acks ride along: one fsync each
        assert after["hops"] - before["hops"] == 5
        assert after["reads"] == before["reads"]  # no outbox read when nothing is unknown
        assert len(sink.events) == 6
    finally:
        await provider.close()
    # Acknowledgements not yet folded into a write are written on close: a restart
    # delivers nothing again.
    reopened = _sqlite(tmp_path, clock)
    await reopened.start()
    try:
        assert await reopened.pending_events(100) == ()
    finally:
        await reopened.close()


async def test_a_get_needs_no_hop_and_a_search_no_commit(tmp_path: Path,
                                                         clock: ManualClock) -> None:
    provider = _sqlite(tmp_path, clock)
    await provider.start()
    try:
        record = await provider.add(note("green tea"), make_ctx(clock))
        before = _stats(provider)
        await provider.get(GetRequest(scope=USER_SCOPE, record_id=record.id), make_ctx(clock))
        result = await provider.search(SearchRequest(scopes=(USER_SCOPE,), query="green tea"),
                                       make_ctx(clock))
        after = _stats(provider)
        assert after["point_reads"] - before["point_reads"] == 1
        assert after["hops"] - before["hops"] == 1  # the search's read unit, nothing else
        assert after["commits"] == before["commits"]
        assert result.snapshot_id is not None
        await provider.flush_snapshots()  # a batch: one commit for every queued snapshot
        assert _stats(provider)["commits"] == before["commits"] + 1
    finally:
        await provider.close()


async def test_sync_snapshots_commit_before_the_search_returns(tmp_path: Path,
                                                               clock: ManualClock) -> None:
    provider = _sqlite(tmp_path, clock, SnapshotMode.SYNC)
    await provider.start()
    try:
        await provider.add(note("green tea"), make_ctx(clock))
        before = _stats(provider)["commits"]
        result = await provider.search(SearchRequest(scopes=(USER_SCOPE,), query="green tea"),
                                       make_ctx(clock))
        assert _stats(provider)["commits"] == before + 1
        assert result.snapshot_id is not None
    finally:
        await provider.close()


async def test_snapshots_off_store_nothing(tmp_path: Path, clock: ManualClock) -> None:
    provider = _sqlite(tmp_path, clock, SnapshotMode.OFF)
    await provider.start()
    try:
        await provider.add(note("green tea"), make_ctx(clock))
        result = await provider.search(SearchRequest(scopes=(USER_SCOPE,), query="green tea"),
                                       make_ctx(clock))
        assert result.snapshot_id is None and len(result.hits) == 1
    finally:
        await provider.close()


async def test_a_batched_snapshot_lost_in_a_crash_is_reported_lost(
        tmp_path: Path, clock: ManualClock) -> None:
    crashed = _sqlite(tmp_path, clock)
    await crashed.start()
    await crashed.add(note("green tea"), make_ctx(clock))
    result = await crashed.search(SearchRequest(scopes=(USER_SCOPE,), query="green tea"),
                                  make_ctx(clock))
    assert result.snapshot_id is not None
    # The process dies before the batch is written: nothing is flushed or closed.
    crashed._replay.writer._queue.clear()  # what a kill does to the queue
    await crashed.backend.close()

    provider = _sqlite(tmp_path, clock)
    await provider.start()
    try:
        with pytest.raises(SnapshotLostError) as lost:
            await provider.replay_snapshot(ReplayRequest(snapshot_id=result.snapshot_id,
                                                scopes=(USER_SCOPE,)),
                                  make_ctx(clock))
        assert lost.value.code == "snapshot_lost"
        # Another tenant asking about the same id learns nothing: not found.
        with pytest.raises(MemoryNotFoundError) as other:
            await provider.snapshot_header(result.snapshot_id, "globex")
        assert not isinstance(other.value, SnapshotLostError)
        # An id this provider never gave out is not found either.
        with pytest.raises(MemoryNotFoundError) as never:
            await provider.snapshot_header("snap_01M8SEXP3SB5J6CS1JP340VQ6J", "acme")
        assert not isinstance(never.value, SnapshotLostError)
        # Past the retention window a lost snapshot would have expired anyway.
        clock.advance(31 * 86_400)
        with pytest.raises(MemoryNotFoundError) as expired:
            await provider.snapshot_header(result.snapshot_id, "acme")
        assert not isinstance(expired.value, SnapshotLostError)
    finally:
        await provider.close()


def test_compliance_strict_stores_snapshots_synchronously() -> None:
    from governed_memory.plugins import PluginManager
    from governed_memory.profiles import ProfileRegistry

    registry = ProfileRegistry.from_plugins(PluginManager.load(blocked=[]))
    assert registry.get("compliance-strict@1.0.0").retrieval.snapshots == "sync"
    assert registry.get("chat-assistant@1.0.0").retrieval.snapshots is None  # batched


def test_an_unknown_snapshot_mode_is_refused_at_load() -> None:
    from governed_memory.profiles import ProfileLoadError

    with pytest.raises(ProfileLoadError, match="snapshots"):
        loads_profile("""
            spec_version = 1
            id = "bad"
            version = "1.0.0"
            [provider]
            name = "native"
            [retrieval]
            snapshots = "sometimes"
        """)
