"""Retrieval snapshots and ``manager.replay``: the exact versions a search returned, later,
through governance; erasure wins."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from governed_memory import (
    GovernedMemoryManager,
    MemoryNotFoundError,
    MemoryScopeError,
    Principal,
    Scope,
)
from governed_memory.clock import ManualClock
from governed_memory.events import InMemoryEventSink
from governed_memory.replay import ReplayResult, SnapshotErasedError
from governed_memory_native import NativeMemoryProvider, build_native_provider
from indexing_support import ControlledEmbedder, settings
from native_support import config_for
from sqlite_support import hold_write_lock

ALICE_SCOPE = Scope(tenant_id="acme", user_id="alice")
ALICE = Principal("alice", "user", "acme", user_id="alice",
                  permissions=["memory:read", "memory:write", "memory:delete"])
BOB = Principal("bob", "user", "acme", user_id="bob", permissions=["memory:read"])
STRANGER = Principal("eve", "user", "globex", user_id="alice", permissions=["memory:read"])
ADMIN = Principal("ops", "service", "acme", permissions=["memory:admin", "memory:read"])


@pytest.fixture(params=("memory", "sqlite", "postgres"))
async def manager(request: pytest.FixtureRequest, tmp_path: Path,
                  clock: ManualClock) -> AsyncIterator[GovernedMemoryManager]:
    provider = build_native_provider(config_for(str(request.param), tmp_path,
                                                snapshot_retention_s=3600), clock)
    provider.configure_indexing(settings(ControlledEmbedder(), "sync"))
    sink = InMemoryEventSink()
    async with GovernedMemoryManager(provider, clock=clock, sinks=[sink]) as built:
        built.test_sink = sink  # type: ignore[attr-defined]
        yield built


async def _seed(manager: GovernedMemoryManager) -> tuple[str, list[str]]:
    ids = [(await manager.add(ALICE, ALICE_SCOPE, text)).id
           for text in ("green tea in the morning", "green smoothie", "black coffee at noon")]
    result = await manager.search(ALICE, ALICE_SCOPE, "green tea")
    assert result.snapshot_id is not None and result.hits
    return result.snapshot_id, ids


async def test_replay_returns_the_versions_the_search_returned(
        manager: GovernedMemoryManager, clock: ManualClock) -> None:
    original = await manager.search(ALICE, ALICE_SCOPE, "green tea")
    assert original.hits == ()  # nothing stored yet; the empty search is a snapshot too
    empty = await manager.replay(ALICE, original.snapshot_id or "")
    assert empty.hits == () and empty.complete
    for text in ("green tea in the morning", "green smoothie"):
        await manager.add(ALICE, ALICE_SCOPE, text)
    searched = await manager.search(ALICE, ALICE_SCOPE, "green tea")
    snapshot_id = searched.snapshot_id
    assert snapshot_id is not None
    top = searched.hits[0].record
    # Later: the top record is rewritten, the other soft-deleted.
    clock.advance(60)
    await manager.update(ALICE, ALICE_SCOPE, top.id, content="no more tea")
    other = searched.hits[1].record
    await manager.delete(ALICE, ALICE_SCOPE, other.id)
    replayed = await manager.replay(ALICE, snapshot_id)
    assert isinstance(replayed, ReplayResult) and replayed.complete
    assert [(h.record.id, h.record.version, h.record.content, h.score, h.rank)
            for h in replayed.hits] == [(h.record.id, h.record.version, h.record.content,
                                         h.score, h.rank) for h in searched.hits]
    assert [h.explanation for h in replayed.hits] == [h.explanation for h in searched.hits]
    assert replayed.candidates == searched.candidates
    assert replayed.created_at == clock.now() - 60
    assert replayed.profile == manager.activity.profile
    assert replayed.policy_revision == manager.policy_engine.revision
    assert replayed.decision_id is not None
    assert replayed.ranking["modes"] == ["lexical", "vector"]
    assert str(replayed.ranking["revision"]).startswith("sha256:")
    assert replayed.ranking["embedder"] == "hashing@fh1-w1-c3/64"


async def test_replay_is_a_governed_read(manager: GovernedMemoryManager) -> None:
    snapshot_id, _ = await _seed(manager)
    sink = manager.test_sink  # type: ignore[attr-defined]
    sink.clear()
    await manager.replay(ALICE, snapshot_id)
    # the lookup of the snapshot's scopes is a governed read of its own, then the replay
    assert sink.types() == ["memory.read.requested", "memory.read.completed"] * 2
    assert [event.operation for event in sink.events] == [
        "snapshot_header", "snapshot_header", "replay", "replay"]
    assert sink.events[1].decision_id and sink.events[1].decision_id != sink.events[3].decision_id
    assert all("green" not in event.to_json() for event in sink.events)
    sink.clear()
    with pytest.raises(MemoryScopeError):
        await manager.replay(BOB, snapshot_id)  # same tenant, not his scope
    assert sink.types()[-1] == "memory.read.rejected"
    with pytest.raises(MemoryNotFoundError):
        await manager.replay(STRANGER, snapshot_id)  # another tenant: no such snapshot
    with pytest.raises(MemoryNotFoundError):
        await manager.replay(ALICE, "snap_unknown")


async def test_erased_versions_are_listed_not_returned(manager: GovernedMemoryManager) -> None:
    snapshot_id, _ = await _seed(manager)
    before = await manager.replay(ALICE, snapshot_id)
    gone = before.hits[0].record
    await manager.delete(ALICE, ALICE_SCOPE, gone.id, hard=True)
    after = await manager.replay(ALICE, snapshot_id)
    assert not after.complete
    assert after.erased_record_ids == (gone.id,)
    assert [h.record.id for h in after.hits] == [h.record.id for h in before.hits[1:]]


async def test_erasing_the_user_erases_the_snapshot(manager: GovernedMemoryManager) -> None:
    snapshot_id, _ = await _seed(manager)
    receipt = await manager.delete_user(ADMIN, "acme", "alice")
    assert receipt.counts["retrieval_snapshots"] == 1
    with pytest.raises(SnapshotErasedError):
        await manager.replay(ALICE, snapshot_id)


async def test_snapshots_expire_after_their_retention(manager: GovernedMemoryManager,
                                                      clock: ManualClock) -> None:
    from governed_memory.manager import MAINTENANCE_PRINCIPAL

    snapshot_id, _ = await _seed(manager)
    await manager.search(ALICE, ALICE_SCOPE, "coffee")  # storing one purges nothing
    assert await manager.purge_snapshots(MAINTENANCE_PRINCIPAL) == 0  # not yet expired
    clock.advance(3601)
    fresh = (await manager.search(ALICE, ALICE_SCOPE, "coffee")).snapshot_id
    await manager.replay(ALICE, snapshot_id)  # expired, but nothing removes it silently
    sink = manager.test_sink  # type: ignore[attr-defined]
    sink.clear()
    assert await manager.purge_snapshots(MAINTENANCE_PRINCIPAL) == 2  # the maintenance round
    assert sink.types() == ["memory.maintenance.requested", "memory.maintenance.completed"]
    assert sink.events[-1].count == 2
    with pytest.raises(MemoryNotFoundError):
        await manager.replay(ALICE, snapshot_id)
    assert fresh is not None
    await manager.replay(ALICE, fresh)  # within its retention: kept
    with pytest.raises(MemoryScopeError):  # only an operator maintains the store
        await manager.purge_snapshots(ALICE)


async def test_replay_through_the_search_cache(tmp_path: Path) -> None:
    from governed_memory.plugins import PluginManager
    from governed_memory.profiles import loads_profile

    spec = loads_profile("""
        spec_version = 1
        id = "cached-hybrid"
        version = "1.0.0"
        [provider]
        name = "native"
        config = { backend = "memory" }
        [stores.embedder]
        kind = "hashing"
        [retrieval]
        modes = ["lexical", "vector"]
        [cache]
        enabled = true
    """.replace("\n        ", "\n"))
    manager = GovernedMemoryManager.from_profile(spec, plugins=PluginManager.load(blocked=[]))
    assert not isinstance(manager._provider, NativeMemoryProvider)  # wrapped by the cache
    async with manager:
        await manager.add(ALICE, ALICE_SCOPE, "green tea")
        first = await manager.search(ALICE, ALICE_SCOPE, "green tea")
        cached = await manager.search(ALICE, ALICE_SCOPE, "green tea")
        # a hit is a search of its own: the same answer, a snapshot naming this operation
        assert cached.hits == first.hits
        assert cached.snapshot_id is not None and cached.snapshot_id != first.snapshot_id
        for snapshot_id in (first.snapshot_id, cached.snapshot_id):
            replayed = await manager.replay(ALICE, snapshot_id or "")
            assert [h.record.id for h in replayed.hits] == [h.record.id for h in first.hits]


@pytest.mark.parametrize("mode", ["sync", "batched"])
async def test_a_locked_database_still_answers(tmp_path: Path, clock: ManualClock,
                                               mode: str) -> None:
    """Another process holding the write lock never fails a search. With ``sync``
    snapshots the search answers without one (``snapshot_id=None``); with ``batched``
    ones the snapshot waits in the queue and is stored once the lock is free."""
    import asyncio

    from governed_memory.indexing import IndexingSettings, SnapshotMode
    from governed_memory.replay import ReplayRequest
    from governed_memory.requests import SearchRequest
    from native_support import USER_SCOPE, make_ctx, note

    path = tmp_path / "memory.db"
    provider = build_native_provider({"path": str(path), "busy_timeout_ms": 50}, clock)
    provider.configure_indexing(IndexingSettings(snapshots=SnapshotMode(mode)))
    await provider.start()
    try:
        record = await provider.add(note("green tea"), make_ctx(clock))
        holder = hold_write_lock(path, 0.5)  # another process writing for a while
        result = await provider.search(SearchRequest(scopes=(USER_SCOPE,), query="green tea"),
                                       make_ctx(clock))
        await asyncio.to_thread(holder.join)
        assert [hit.record.id for hit in result.hits] == [record.id]
        if mode == "sync":
            assert result.snapshot_id is None
            again = await provider.search(SearchRequest(scopes=(USER_SCOPE,), query="green tea"),
                                          make_ctx(clock))
            assert again.snapshot_id is not None
        else:
            assert result.snapshot_id is not None
            replayed = await provider.replay_snapshot(
                ReplayRequest(snapshot_id=result.snapshot_id,
                              scopes=(USER_SCOPE,)), make_ctx(clock))
            assert [hit.record.id for hit in replayed.hits] == [record.id]
    finally:
        await provider.close()
