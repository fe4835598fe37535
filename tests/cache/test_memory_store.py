"""The in-memory store's bounds: entries by count and bytes (LRU), TTL, and a bounded
revision table that still never hands out a revision an old entry was stored under."""

from __future__ import annotations

import pytest
from governed_memory.cache import InMemoryCacheStore

T = "tenant"


class Timer:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def fill(store: InMemoryCacheStore, digest: str, value: bytes = b"v",
               names: tuple[str, ...] = ("a",), ttl: float = 60) -> bool:
    found = await store.lookup(T, names, digest, 0.0)
    return await store.fill(T, names, found.revisions, digest, value, ttl)


async def value_of(store: InMemoryCacheStore, digest: str,
                   names: tuple[str, ...] = ("a",)) -> bytes | None:
    return (await store.lookup(T, names, digest, 0.0)).value


async def test_entries_are_bounded_by_count_least_recently_used_first() -> None:
    store = InMemoryCacheStore(max_entries=3)
    for digest in ("d1", "d2", "d3"):
        await fill(store, digest)
    assert await value_of(store, "d1") == b"v"  # d1 is now the most recent
    await fill(store, "d4")
    assert len(store) == 3
    assert await value_of(store, "d2") is None
    assert await value_of(store, "d1") == b"v"


async def test_entries_are_bounded_by_bytes() -> None:
    store = InMemoryCacheStore(max_bytes=250, max_value_bytes=100)
    for digest in ("d1", "d2", "d3"):
        await fill(store, digest, b"x" * 100)
    assert store.size_bytes <= 250 and len(store) == 2
    assert await value_of(store, "d1") is None


async def test_entries_expire_after_their_ttl() -> None:
    timer = Timer()
    store = InMemoryCacheStore(timer=timer)
    await fill(store, "d1", ttl=10)
    timer.now += 9.9
    assert await value_of(store, "d1") == b"v"
    timer.now += 0.1
    assert await value_of(store, "d1") is None
    assert len(store) == 0 and store.size_bytes == 0


async def test_refilling_a_key_replaces_it_without_leaking_bytes() -> None:
    store = InMemoryCacheStore()
    await fill(store, "d1", b"x" * 10)
    await fill(store, "d1", b"y" * 20)
    assert store.size_bytes == 20 and await value_of(store, "d1") == b"y" * 20


async def test_forgotten_names_never_read_an_old_revision() -> None:
    store = InMemoryCacheStore(max_names=2)
    await store.bump(T, ["a"], (), 0.0)
    assert await fill(store, "d1", b"old", names=("a",))
    old = (await store.lookup(T, ["a"], "d1", 0.0)).revisions
    for name in ("b", "c", "d"):  # pushes "a" out of the table
        await store.bump(T, [name], (), 0.0)
    now = (await store.lookup(T, ["a"], "d1", 0.0))
    assert now.revisions[0] > old[0]
    assert now.value is None


async def test_names_never_bumped_read_the_floor_and_stay_fillable() -> None:
    store = InMemoryCacheStore(max_names=1)
    assert await fill(store, "d1", names=("fresh",))
    assert await value_of(store, "d1", names=("fresh",)) == b"v"


@pytest.mark.parametrize("bounds", [{"max_entries": 0}, {"max_bytes": 0},
                                    {"max_value_bytes": 0}, {"max_names": 0}])
def test_bounds_must_be_positive(bounds: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        InMemoryCacheStore(**bounds)


async def test_old_expiry_marks_are_pruned() -> None:
    store = InMemoryCacheStore()
    await store.bump(T, ["a"], (10.0,), 0.0)
    await store.bump(T, ["a"], (20_000.0,), 20_000.0 - 1)  # 10.0 is far behind now
    assert (await store.lookup(T, ["a"], "d", 0.0)).horizon == 20_000.0
