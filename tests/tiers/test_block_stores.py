"""What the block-store suite cannot show from inside one store: compare-and-set across
OS processes on one SQLite file and one PostgreSQL schema, PostgreSQL's lost race on the
primary key (a conflict, never a storage error), concurrent starts, and the factories'
config checks. The suite itself runs over every registered block store in
tests/conformance/test_store_conformance.py."""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from governed_memory import MemoryConflictError, Scope
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryConfigurationError
from governed_memory.plugins import PluginManager
from governed_memory.tiers.blocks import BlockEdit, BlockStore, InMemoryBlockStore, stale
from postgres_support import POSTGRES_DSN, drop_schemas, require_postgres, schema_for

HOME = Scope("acme", user_id="alice")
PERSONA = "persona"
HANG_S = 60
"""How long a helper waits before calling a hang a failure (no timing is asserted)."""


@pytest.fixture(scope="module", autouse=True)
def _drop_postgres_schemas() -> Iterator[None]:
    yield
    drop_schemas()


def _config(kind: str, tmp_path: Path) -> dict[str, Any]:
    if kind == "sqlite":
        return {"path": str(tmp_path / "blocks.db")}
    require_postgres()
    return {"dsn": POSTGRES_DSN, "schema": schema_for(tmp_path)}


def _build(kind: str, config: dict[str, Any]) -> BlockStore:
    store: BlockStore = PluginManager.load().block_stores.get(kind).factory(
        config, ManualClock())
    return store


def test_the_native_plugin_registers_three_block_stores() -> None:
    registry = PluginManager.load().block_stores
    assert {r.name for r in registry.all()} >= {"memory", "sqlite", "postgres"}
    assert all(registry.get(n).description for n in ("memory", "sqlite", "postgres"))
    assert isinstance(registry.get("memory").factory({}, ManualClock()), InMemoryBlockStore)


@pytest.mark.parametrize(("kind", "config", "match"), [
    ("memory", {"path": "x.db"}, "no configuration"),
    ("sqlite", {}, "path"),
    ("sqlite", {"path": "x.db", "bogus": 1}, "bogus"),
    ("sqlite", {"path": "x.db", "busy_timeout_ms": -1}, "busy_timeout_ms"),
    ("postgres", {"dsn": "postgresql://x", "schema": "Bad-Name"}, "schema"),
    ("postgres", {"dsn": "postgresql://x", "pool_min_size": 5, "pool_max_size": 2},
     "pool_min_size"),
    ("postgres", {"dsn": "postgresql://x", "timeout_s": 0}, "timeout_s"),
    ("postgres", {"dsn": "postgresql://x", "path": "x.db"}, "path"),
])
def test_bad_block_store_config_is_refused(kind: str, config: dict[str, Any],
                                           match: str) -> None:
    with pytest.raises(MemoryConfigurationError, match=match):
        _build(kind, config)


# -- PostgreSQL: the race the primary key decides ------------------------------------------


async def _wait_for_lock_wait(conn: Any, schema: str) -> None:
    """Until a session is waiting on a lock in a statement naming ``schema`` (the race
    has reached the point under test); a hang fails the test, no timing is asserted."""
    async with asyncio.timeout(HANG_S):
        while True:
            cur = await conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND query LIKE %s", (f"%{schema}%",))
            row = await cur.fetchone()
            if row is not None and row[0] > 0:
                return
            await asyncio.sleep(0.01)


async def _uncommitted_version(conn: Any, schema: str, version: int) -> None:
    """Insert ``version`` of HOME's persona as another writer would, left uncommitted."""
    await conn.execute(
        f'INSERT INTO "{schema}".memory_block_versions (scope_hash, name, version, '
        "tenant_id, user_id, value, edit, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
        (HOME.scope_hash, PERSONA, version, HOME.tenant_id, HOME.user_id, "the other writer",
         BlockEdit.RETHINK, 9.0))


@pytest.mark.parametrize("other_commits", [True, False])
async def test_a_postgres_writer_that_loses_the_key_race_gets_a_conflict(
        tmp_path: Path, other_commits: bool) -> None:
    """Both writers read version 1; the other inserts version 2 first and has not
    committed. Ours waits on the primary key: when the other commits it is a conflict
    naming version 2 (not a unique violation), when the other rolls back ours wins."""
    import psycopg

    config = _config("postgres", tmp_path)
    store = _build("postgres", config)
    await store.start()
    try:
        await store.write(HOME, PERSONA, "v1", expected_version=0, edit=BlockEdit.RETHINK,
                          now=1.0)
        async with await psycopg.AsyncConnection.connect(POSTGRES_DSN) as other, \
                await psycopg.AsyncConnection.connect(POSTGRES_DSN, autocommit=True) as watch:
            await _uncommitted_version(other, config["schema"], 2)
            ours = asyncio.create_task(store.write(
                HOME, PERSONA, "ours", expected_version=1, edit=BlockEdit.REPLACE, now=2.0))
            await _wait_for_lock_wait(watch, config["schema"])
            await (other.commit() if other_commits else other.rollback())
            if other_commits:
                with pytest.raises(MemoryConflictError) as raised:
                    await ours
                assert str(raised.value) == str(stale(PERSONA, 1, 2))
            else:
                assert (await ours).version == 2
        history = await store.history(HOME, PERSONA, before_version=None, limit=10)
        assert [(v.version, v.value) for v in history] == [
            (2, "the other writer" if other_commits else "ours"), (1, "v1")]
    finally:
        await store.close()


async def test_a_block_store_starts_beside_another_migrator_creating_its_schema(
        tmp_path: Path) -> None:
    """Another store's migrator creates the schema in the same instant (its own lock,
    not ours): our ``CREATE SCHEMA IF NOT EXISTS`` collides once and start still works."""
    import psycopg
    from psycopg import sql

    config = _config("postgres", tmp_path)
    store = _build("postgres", config)
    async with await psycopg.AsyncConnection.connect(POSTGRES_DSN) as other, \
            await psycopg.AsyncConnection.connect(POSTGRES_DSN, autocommit=True) as watch:
        await other.execute(sql.SQL("CREATE SCHEMA {}").format(
            sql.Identifier(config["schema"])))
        starting = asyncio.create_task(store.start())
        await _wait_for_lock_wait(watch, config["schema"])
        await other.commit()
        await starting
    try:
        written = await store.write(HOME, PERSONA, "v1", expected_version=0,
                                    edit=BlockEdit.RETHINK, now=1.0)
        assert written.version == 1
    finally:
        await store.close()


async def test_several_postgres_block_stores_start_at_once_on_a_new_schema(
        tmp_path: Path) -> None:
    config = _config("postgres", tmp_path)
    stores = [_build("postgres", config) for _ in range(4)]
    await asyncio.gather(*(store.start() for store in stores))
    try:
        outcomes = await asyncio.gather(
            *(store.write(HOME, PERSONA, f"from {i}", expected_version=0,
                          edit=BlockEdit.RETHINK, now=1.0) for i, store in enumerate(stores)),
            return_exceptions=True)
        assert sorted(type(o).__name__ for o in outcomes) == [
            "BlockVersion", "MemoryConflictError", "MemoryConflictError",
            "MemoryConflictError"], outcomes
    finally:
        for store in stores:
            await store.close()


# -- two OS processes, one block ------------------------------------------------------------

WRITER = """
import asyncio, json, sys
from governed_memory import MemoryConflictError, Scope
from governed_memory.clock import ManualClock
from governed_memory.plugins import PluginManager

kind, config, who = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
HOME = Scope("acme", user_id="alice")


async def main():
    store = PluginManager.load().block_stores.get(kind).factory(config, ManualClock())
    await store.start()

    async def newest():
        found = await store.current(HOME, ["persona"])
        return found["persona"].version if "persona" in found else 0

    async def write(expected):
        return await store.write(HOME, "persona", f"{who}:{expected + 1}",
                                 expected_version=expected, edit="rethink", now=1.0)

    async def run(command):
        if command[0] == "read":
            return await newest()
        if command[0] == "write":
            try:
                return (await write(int(command[1]))).version
            except MemoryConflictError:
                return "stale"
        won, conflicts = [], 0  # "run n": n writes, each re-read after a conflict
        while len(won) < int(command[1]):
            try:
                won.append((await write(await newest())).version)
            except MemoryConflictError:
                conflicts += 1
        return {"won": won, "conflicts": conflicts}

    print(json.dumps("ready"), flush=True)
    # Nothing else runs here, so the loop may block on the next command.
    while (command := sys.stdin.readline().split()) and command[0] != "quit":
        try:
            answer = await run(command)
        except Exception as exc:  # reported, so the test fails instead of waiting
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(answer), flush=True)
    await store.close()


asyncio.run(main())
"""


class Writer:
    """One OS process holding its own store, driven line by line. Its answers are read
    by a thread, so a writer that stops answering fails the test instead of hanging it."""

    def __init__(self, kind: str, config: dict[str, Any], who: str) -> None:
        self.who = who
        self.process = subprocess.Popen(
            [sys.executable, "-c", WRITER, kind, json.dumps(config), who],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self._lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put("")

    def send(self, command: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()

    def answer(self) -> Any:
        try:
            line = self._lines.get(timeout=HANG_S)
        except queue.Empty:
            raise AssertionError(f"writer {self.who} stopped answering") from None
        if not line:
            raise AssertionError(f"writer {self.who} died: {self._errors()}")
        answer = json.loads(line)
        if isinstance(answer, dict) and "error" in answer:
            raise AssertionError(f"writer {self.who} failed: {answer['error']}")
        return answer

    def _errors(self) -> str:
        self.process.wait(timeout=HANG_S)
        assert self.process.stderr is not None
        return self.process.stderr.read()

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(OSError):
                self.send("quit")
        try:
            self.process.wait(timeout=HANG_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_two_processes_writing_one_block_lose_and_double_no_version(
        kind: str, tmp_path: Path) -> None:
    config = _config(kind, tmp_path)
    writers = [Writer(kind, config, who) for who in ("a", "b")]
    winner: dict[int, str] = {}
    try:
        # Both start at once: on PostgreSQL both create the schema concurrently.
        assert [w.answer() for w in writers] == ["ready", "ready"]
        # Lockstep: both read version n, then both write n + 1: exactly one may.
        for n in range(8):
            for w in writers:
                w.send("read")
            assert [w.answer() for w in writers] == [n, n]
            for w in writers:
                w.send(f"write {n}")
            answers = {w.who: w.answer() for w in writers}
            assert sorted(answers.values(), key=str) == [n + 1, "stale"], answers
            winner[n + 1] = next(who for who, a in answers.items() if a == n + 1)
        # Free running: each makes ten writes, re-reading after every conflict.
        for w in writers:
            w.send("run 10")
        runs = {w.who: w.answer() for w in writers}
    finally:
        for w in writers:
            w.stop()
    won = {who: run["won"] for who, run in runs.items()}
    assert not set(won["a"]) & set(won["b"]), f"a version was written twice: {won}"
    assert sorted(won["a"] + won["b"]) == list(range(9, 29)), f"versions lost: {won}"
    winner |= {version: who for who, versions in won.items() for version in versions}

    async def history() -> list[tuple[int, str]]:
        store = _build(kind, config)
        await store.start()
        try:
            stored = await store.history(HOME, PERSONA, before_version=None, limit=100)
            return [(v.version, v.value) for v in stored]
        finally:
            await store.close()

    assert asyncio.run(history()) == [(v, f"{winner[v]}:{v}") for v in range(28, 0, -1)], (
        "the stored history is not exactly one version per number, each the winner's")
