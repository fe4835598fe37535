"""Every turn store keeps one contract: order by a store-assigned sequence, exact
session isolation, idempotent named turns, counting on after a clear, erasure by user,
gap-free numbers under concurrent appends. SQLite and PostgreSQL run against the real
databases (PostgreSQL skips when absent, fails under CI=true)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from governed_memory import MemoryConflictError, Scope
from governed_memory.clock import ManualClock
from governed_memory.plugins import PluginManager
from governed_memory.tiers import (
    InMemoryTurnStore,
    Role,
    ToolCall,
    Turn,
    TurnDraft,
    TurnStore,
)
from postgres_support import POSTGRES_DSN, drop_schemas, require_postgres, schema_for

S1 = Scope("acme", user_id="alice", session_id="s1")
S2 = Scope("acme", user_id="alice", session_id="s2")
BOB = Scope("acme", user_id="bob", session_id="s1")


@pytest.fixture(scope="module", autouse=True)
def _drop_postgres_schemas() -> Iterator[None]:
    yield
    drop_schemas()


def _build(kind: str, tmp_path: Path) -> Any:
    plugins = PluginManager.load()
    clock = ManualClock()
    if kind == "memory":
        return InMemoryTurnStore()
    if kind == "sqlite":
        return plugins.turn_stores.get("sqlite").factory({"path": str(tmp_path / "t.db")},
                                                         clock)
    require_postgres()
    return plugins.turn_stores.get("postgres").factory(
        {"dsn": POSTGRES_DSN, "schema": schema_for(tmp_path)}, clock)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TurnStore]:
    built = _build(request.param, tmp_path)
    await built.start()
    try:
        yield built
    finally:
        await built.close()


async def test_turns_come_back_in_order_with_every_field(store: TurnStore) -> None:
    call = ToolCall("call_1", "search", '{"q": "ünïcode"}')
    drafts = [TurnDraft.user("hello"), TurnDraft.assistant("", tool_calls=(call,)),
              TurnDraft.tool("call_1", "found 3", metadata={"ms": 12, "ok": True}),
              TurnDraft.assistant("done", name="helper")]
    stored = [await store.append(S1, d, 100.0 + i) for i, d in enumerate(drafts)]
    assert [t.seq for t in stored] == [1, 2, 3, 4]
    recent = await store.recent(S1, 10)
    assert recent == tuple(stored)
    assert recent[1].tool_calls == (call,) and recent[2].metadata == {"ms": 12, "ok": True}
    assert recent[2].role is Role.TOOL and recent[3].name == "helper"
    assert [t.seq for t in await store.recent(S1, 2)] == [3, 4]
    assert [t.seq for t in await store.after(S1, 1, 2)] == [2, 3]
    assert await store.after(S1, 4, 10) == ()


async def test_sessions_and_users_are_isolated(store: TurnStore) -> None:
    await store.append(S1, TurnDraft.user("alice s1"), 1.0)
    await store.append(S2, TurnDraft.user("alice s2"), 1.0)
    await store.append(BOB, TurnDraft.user("bob s1"), 1.0)
    assert [t.content for t in await store.recent(S1, 10)] == ["alice s1"]
    assert [t.content for t in await store.recent(BOB, 10)] == ["bob s1"]
    assert (await store.recent(S2, 10))[0].seq == 1
    assert await store.delete_user("acme", "alice") == 2
    assert await store.recent(S1, 10) == () and await store.recent(S2, 10) == ()
    assert [t.content for t in await store.recent(BOB, 10)] == ["bob s1"]


async def test_named_turns_are_idempotent(store: TurnStore) -> None:
    first = await store.append(S1, TurnDraft.user("once", turn_id="t-1"), 1.0)
    assert await store.append(S1, TurnDraft.user("once", turn_id="t-1"), 2.0) == first
    with pytest.raises(MemoryConflictError):
        await store.append(S1, TurnDraft.user("other", turn_id="t-1"), 3.0)
    # The same name in another session is another turn.
    assert (await store.append(S2, TurnDraft.user("once", turn_id="t-1"), 1.0)).seq == 1
    assert len(await store.recent(S1, 10)) == 1


async def test_numbers_keep_counting_after_a_clear(store: TurnStore) -> None:
    for i in range(3):
        await store.append(S1, TurnDraft.user(f"m{i}"), float(i))
    assert await store.clear(S1) == 3
    assert await store.recent(S1, 10) == ()
    assert (await store.append(S1, TurnDraft.user("after"), 9.0)).seq == 4


async def test_concurrent_appends_get_distinct_gap_free_numbers(store: TurnStore) -> None:
    turns = await asyncio.gather(*(store.append(S1, TurnDraft.user(f"m{i}"), float(i))
                                   for i in range(25)))
    assert sorted(t.seq for t in turns) == list(range(1, 26))
    assert [t.seq for t in await store.recent(S1, 100)] == list(range(1, 26))


async def test_sqlite_turns_survive_a_restart(tmp_path: Path) -> None:
    store = _build("sqlite", tmp_path)
    await store.start()
    await store.append(S1, TurnDraft.user("durable"), 1.0)
    await store.close()
    again = _build("sqlite", tmp_path)
    await again.start()
    try:
        assert [t.content for t in await again.recent(S1, 10)] == ["durable"]
        assert (await again.append(S1, TurnDraft.user("next"), 2.0)).seq == 2
    finally:
        await again.close()


@contextlib.asynccontextmanager
async def _two_stores(kind: str, tmp_path: Path) -> AsyncIterator[tuple[Any, Any]]:
    """Two started stores of ``kind`` over the same storage, closed afterwards."""
    a, b = _build(kind, tmp_path), _build(kind, tmp_path)
    await a.start()
    await b.start()
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()


async def _append_alternately(a: TurnStore, b: TurnStore) -> list[Turn]:
    """Twenty appends to one session, alternating between two stores, all at once."""
    return list(await asyncio.gather(*(
        (a if i % 2 else b).append(S1, TurnDraft.user(f"m{i}"), float(i))
        for i in range(20))))


async def test_two_postgres_stores_share_one_numbering(tmp_path: Path) -> None:
    async with _two_stores("postgres", tmp_path) as (a, b):
        turns = await _append_alternately(a, b)
        assert sorted(t.seq for t in turns) == list(range(1, 21))


@pytest.mark.parametrize(("kind", "config", "match"), [
    ("sqlite", {}, "path"),
    ("sqlite", {"path": "x.db", "bogus": 1}, "bogus"),
    ("postgres", {"dsn": "postgresql://x", "schema": "Bad-Name"}, "schema"),
    ("postgres", {"dsn": "postgresql://x", "pool_min_size": 5, "pool_max_size": 2},
     "pool_min_size"),
])
def test_bad_store_config_is_refused(kind: str, config: dict[str, Any], match: str) -> None:
    from governed_memory.errors import MemoryConfigurationError

    factory = PluginManager.load().turn_stores.get(kind).factory
    with pytest.raises(MemoryConfigurationError, match=match):
        factory(config, ManualClock())


async def test_two_sqlite_connections_share_one_numbering(tmp_path: Path) -> None:
    async with _two_stores("sqlite", tmp_path) as (a, b):
        turns = await _append_alternately(a, b)
        assert sorted(t.seq for t in turns) == list(range(1, 21))
        assert [t.seq for t in await a.recent(S1, 50)] == list(range(1, 21))


def test_an_appended_sqlite_turn_survives_a_killed_process(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = f"""
import asyncio, os
from governed_memory.clock import ManualClock
from governed_memory import Scope
from governed_memory.plugins import PluginManager
from governed_memory.tiers import TurnDraft

async def main():
    store = PluginManager.load().turn_stores.get("sqlite").factory(
        {{"path": {str(tmp_path / "t.db")!r}}}, ManualClock())
    await store.start()
    await store.append(Scope("acme", user_id="alice", session_id="s1"),
                       TurnDraft.user("before the crash"), 1.0)
    os._exit(0)  # no close, no checkpoint

asyncio.run(main())
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)

    async def read() -> list[str]:
        store = _build("sqlite", tmp_path)
        await store.start()
        try:
            return [t.content for t in await store.recent(S1, 10)]
        finally:
            await store.close()

    assert asyncio.run(read()) == ["before the crash"]
