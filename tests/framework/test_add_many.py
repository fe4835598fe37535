"""``add_many``: every item is its own governed add, refusals are reported by index and
sink nothing else, and the adds in flight share embedding calls."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import pytest
from governed_memory import (
    GovernedMemoryManager,
    MemoryValidationError,
    Principal,
    Scope,
    hookimpl,
)
from governed_memory.batch import MAX_BATCH_ITEMS, AddItem
from governed_memory.embedding import EmbedderIdentity
from governed_memory.embedding_batch import BatchingEmbedder
from governed_memory.errors import MemoryUnavailableError
from governed_memory.events import InMemoryEventSink
from governed_memory.plugins import PluginManager
from governed_memory.profiles import parse_profile
from governed_memory.sync import SyncMemoryManager

ALICE = Principal("user:alice", "user", tenant_id="acme", user_id="alice",
                  permissions=["memory:read", "memory:write"])
MINE = Scope("acme", user_id="alice")


class Counting:
    """A deterministic embedder that counts its model calls."""

    identity = EmbedderIdentity("counting", "1", 3)

    def __init__(self, refuse: str | None = None) -> None:
        self.calls: list[int] = []
        self.refuse = refuse

    async def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
        self.calls.append(len(texts))
        await asyncio.sleep(0.005)  # a model call takes time: others queue meanwhile
        if self.refuse is not None and any(self.refuse in t for t in texts):
            raise ValueError("the model refuses this text")
        return [(1.0, float(len(t) % 7), 0.5) for t in texts]

    async def close(self) -> None:
        return None


def _plugins(embedder: Counting) -> PluginManager:
    class Plugin:
        @hookimpl
        def register_embedders(self, register: Callable[..., None]) -> None:
            register("counting", lambda config: embedder, description="test double")

    return PluginManager.load([Plugin()])


PROFILE = {"id": "ingest", "version": "1.0.0",
           "provider": {"name": "native", "config": {"backend": "memory"}},
           "stores": {"embedder": {"kind": "counting"}},
           "indexing": {"mode": "sync"}, "retrieval": {"modes": ["lexical", "vector"]},
           "privacy": {"secret_guard": "reject"},
           "policies": {"enabled": ["permissions", "write-rules", "secret-guard"]}}


async def test_each_item_is_governed_and_refusals_are_reported_by_index() -> None:
    sink, embedder = InMemoryEventSink(), Counting()
    manager = GovernedMemoryManager.from_profile(parse_profile(PROFILE),
                                                 plugins=_plugins(embedder), sinks=[sink])
    async with manager:
        result = await manager.add_many(ALICE, MINE, [
            "Alice prefers window seats",
            AddItem(content="my key is AKIAIOSFODNN7EXAMPLE", memory_type="fact"),
            AddItem(content="Alice flies TAP", memory_type="no-such-type"),
            AddItem(content="Alice lives in Lisbon", key="home", idempotency_key="i-1"),
        ])
        assert [o.ok for o in result.outcomes] == [True, False, False, True]
        assert [o.index for o in result.refused] == [1, 2]
        assert result.refused[0].error_code == "policy_denied"
        assert result.refused[1].error_code == "validation"
        assert "AKIA" not in (result.refused[0].error or "")
        # Idempotent per item: the same key again returns the first record.
        again = await manager.add_many(ALICE, MINE, [
            AddItem(content="Alice lives in Lisbon", key="home", idempotency_key="i-1")])
        assert again.added[0].id == result.outcomes[3].record.id  # type: ignore[union-attr]
        assert len((await manager.list(ALICE, MINE)).items) == 2
    operations = {e.operation_id for e in sink.events if e.operation == "add"}
    assert len(operations) == 5, "one operation per item"
    assert sum(e.type == "memory.write.committed" for e in sink.events) == 3


async def test_a_burst_shares_model_calls_and_a_bad_text_fails_alone() -> None:
    embedder = Counting(refuse="poison")
    manager = GovernedMemoryManager.from_profile(parse_profile(PROFILE),
                                                 plugins=_plugins(embedder))
    async with manager:
        texts = [f"turn {i} of a long conversation" for i in range(300)]
        texts[123] = "a poison text"
        result = await manager.add_many(ALICE, MINE, texts, concurrency=64)
        assert [o.index for o in result.refused] == [123]
        assert result.refused[0].error_code == "unavailable"
        assert len(result.added) == 299
        batched = [n for n in embedder.calls if n > 1]
        assert sum(embedder.calls) < 2 * 300 and len(embedder.calls) < 100, embedder.calls
        assert max(batched) > 8
        hits = await manager.search(ALICE, MINE, "turn 7 conversation")
        assert hits.hits


async def test_a_lone_call_goes_straight_to_the_model() -> None:
    inner = Counting()
    embedder = BatchingEmbedder(inner)
    assert await embedder.embed(["one"]) == [(1.0, 3.0, 0.5)]
    assert await embedder.embed([]) == []
    assert inner.calls == [1, 0]
    assert embedder.identity == inner.identity


async def test_an_unavailable_model_fails_every_request_without_retries() -> None:
    class Down(Counting):
        async def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]]:
            self.calls.append(len(texts))
            await asyncio.sleep(0.005)
            raise MemoryUnavailableError("the model is not installed")

    inner = Down()
    embedder = BatchingEmbedder(inner)
    results = await asyncio.gather(*(embedder.embed([f"t{i}"]) for i in range(10)),
                                   return_exceptions=True)
    assert all(isinstance(r, MemoryUnavailableError) for r in results)
    assert len(inner.calls) <= 2


async def test_a_cancelled_caller_does_not_block_the_others() -> None:
    inner = Counting()
    embedder = BatchingEmbedder(inner)
    first = asyncio.create_task(embedder.embed(["first"]))
    await asyncio.sleep(0)
    doomed = asyncio.create_task(embedder.embed(["doomed"]))
    kept = asyncio.create_task(embedder.embed(["kept"]))
    await asyncio.sleep(0)
    doomed.cancel()
    assert len(await first) == 1 and len(await kept) == 1
    assert inner.calls == [1, 1]


async def test_bad_batches_are_refused_whole() -> None:
    async with GovernedMemoryManager.from_plugins("native", {"backend": "memory"}) as manager:
        with pytest.raises(MemoryValidationError) as too_many:
            await manager.add_many(ALICE, MINE, ["x"] * (MAX_BATCH_ITEMS + 1))
        assert too_many.value.field == "items"
        for concurrency in (0, 257, True, 1.5):
            with pytest.raises(MemoryValidationError, match="concurrency"):
                await manager.add_many(ALICE, MINE, ["x"], concurrency=concurrency)  # type: ignore[arg-type]
        with pytest.raises(MemoryValidationError, match="not one string"):
            await manager.add_many(ALICE, MINE, "one memory")
        assert (await manager.add_many(ALICE, MINE, [])).outcomes == ()
        assert (await manager.list(ALICE, MINE)).items == ()


def test_the_sync_and_bound_views_add_many() -> None:
    with SyncMemoryManager.from_plugins("native", {"backend": "memory"}) as memory:
        mine = memory.bind(ALICE, MINE)
        result = mine.add_many(["one", "two", AddItem(content="three", key="3")])
        assert [r.content for r in result.added] == ["one", "two", "three"]


