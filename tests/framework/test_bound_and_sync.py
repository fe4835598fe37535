"""``manager.bind(principal, scope)`` and ``SyncMemoryManager``: views of the async
manager's methods, so the surface, the governance and the errors are the same; the sync
manager starts on first use (once, from any number of threads) and is closed by
``close()``, ``with``, or at interpreter exit."""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from governed_memory import (
    GovernedMemoryManager,
    MemoryNotFoundError,
    MemoryScopeError,
    MemoryValidationError,
    Principal,
    Scope,
)
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryConflictError
from governed_memory.events import InMemoryEventSink
from governed_memory.manager import BoundMemory
from governed_memory.sync import SyncBoundMemory, SyncMemoryManager
from governed_memory_native import build_native_provider

ALICE = Principal("user:alice", "user", tenant_id="acme", user_id="alice",
                  permissions=["memory:read", "memory:write", "memory:delete"])
MINE = Scope("acme", user_id="alice")


def _coroutine_methods(kind: type) -> dict[str, inspect.Signature]:
    """Its public coroutine methods, inherited ones too (the manager's operations come
    from ``memory_operations`` and ``store_operations``)."""
    return {name: inspect.signature(member)
            for name, member in inspect.getmembers(kind, inspect.iscoroutinefunction)
            if not name.startswith("_")}


def _params(signature: inspect.Signature, skip: int) -> list[tuple[str, object, object]]:
    return [(p.name, p.kind, p.default) for p in list(signature.parameters.values())[skip:]]


def test_the_sync_manager_has_every_operation_with_the_same_arguments() -> None:
    operations = _coroutine_methods(GovernedMemoryManager)
    assert {"add", "search", "delete_user", "reindex", "approve"} <= set(operations)
    for name, signature in operations.items():
        if name == "close":  # the facade's close also stops its loop: checked below
            continue
        mirror = getattr(SyncMemoryManager, name, None)
        assert mirror is not None, f"SyncMemoryManager lacks {name}"
        assert not inspect.iscoroutinefunction(mirror)
        assert _params(inspect.signature(mirror), 1) == _params(signature, 1), name
        assert inspect.signature(mirror).return_annotation == signature.return_annotation


def test_the_bound_handles_have_every_scoped_operation() -> None:
    scoped = {name: signature for name, signature in
              _coroutine_methods(GovernedMemoryManager).items()
              if [p.name for p in list(signature.parameters.values())[1:3]]
              in (["principal", "scope"], ["principal", "scopes"])}
    assert {"add", "get", "search", "update", "delete", "history", "approve"} <= set(scoped)
    for name, signature in scoped.items():
        for handle in (BoundMemory, SyncBoundMemory):
            mirror = getattr(handle, name, None)
            assert mirror is not None, f"{handle.__name__} lacks {name}"
            assert _params(inspect.signature(mirror), 1) == _params(signature, 3), name
    assert _params(inspect.signature(BoundMemory.replay), 1) == _params(
        inspect.signature(GovernedMemoryManager.replay), 2)


async def test_a_bound_handle_is_the_managers_operations() -> None:
    sink = InMemoryEventSink()
    async with GovernedMemoryManager.from_plugins("native", {"backend": "memory"},
                                                  sinks=[sink]) as manager:
        alice = manager.bind(ALICE, MINE)
        record = await alice.add("Alice prefers window seats", memory_type="preference",
                                 key="seat")
        assert (await alice.get(key="seat")).id == record.id
        assert (await alice.search("window seats")).hits[0].record.id == record.id
        updated = await alice.update(record.id, expected_revision=record.revision,
                                     content="Alice prefers aisle seats")
        with pytest.raises(MemoryConflictError):
            await alice.update(record.id, expected_revision=record.revision, importance=1)
        assert [v.record.version for v in await alice.history(record.id)] == [1, 2]
        assert (await alice.list()).items[0].content == updated.content
        await alice.delete(record.id, hard=True)
        with pytest.raises(MemoryNotFoundError):
            await alice.get(record.id)
        assert await alice.lookup(record.id) is None
        # Every event is the principal's, in the bound scope.
        assert {e.principal_id for e in sink.events} == {"user:alice"}
        assert {e.scope_hash for e in sink.events if e.scope_hash} == {MINE.scope_hash}


async def test_a_handle_reaches_no_scope_the_manager_would_refuse() -> None:
    async with GovernedMemoryManager.from_plugins("native", {"backend": "memory"}) as manager:
        elsewhere = manager.bind(ALICE, MINE).with_scope(Scope("globex", user_id="alice"))
        with pytest.raises(MemoryScopeError) as bound:
            await elsewhere.add("x")
        with pytest.raises(MemoryScopeError) as direct:
            await manager.add(ALICE, Scope("globex", user_id="alice"), "x")
        assert str(bound.value) == str(direct.value)
        with pytest.raises(MemoryValidationError, match="Principal"):
            manager.bind("user:alice", MINE)  # type: ignore[arg-type]
        with pytest.raises(MemoryValidationError, match="Scope"):
            manager.bind(ALICE, {"tenant_id": "acme"})  # type: ignore[arg-type]


def test_the_sync_manager_over_sqlite_from_many_threads(tmp_path: Path) -> None:
    sink = InMemoryEventSink()
    with SyncMemoryManager.from_plugins("native", {"backend": "sqlite",
                                                   "path": str(tmp_path / "m.db")},
                                        sinks=[sink]) as memory:
        alice = memory.bind(ALICE, MINE)
        errors: list[BaseException] = []

        def write(worker: int) -> None:
            try:
                for i in range(10):
                    alice.add(f"note {worker}-{i}")
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        seen, cursor = set(), None
        while True:
            page = alice.list(limit=50, cursor=cursor)
            seen |= {r.content for r in page.items}
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert seen == {f"note {w}-{i}" for w in range(8) for i in range(10)}
        with pytest.raises(MemoryNotFoundError):
            memory.get(ALICE, MINE, "01NOSUCHRECORD0000000000000")
        assert memory.health().ok
    assert sum(e.type == "memory.write.committed" for e in sink.events) == 80


def test_the_sync_manager_refuses_its_own_loop_and_use_after_close() -> None:
    memory = SyncMemoryManager.from_plugins("native", {"backend": "memory"})
    memory.start()
    alice = memory.bind(ALICE, MINE)

    async def call_back_in() -> None:
        alice.add("re-entrant")

    with pytest.raises(RuntimeError, match="its own event loop"):
        memory._loop.run(call_back_in())
    memory.close()
    memory.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        alice.add("too late")


async def test_the_sync_api_works_from_inside_another_event_loop() -> None:
    # A sync framework called from async code blocks that loop's thread, but works.
    with SyncMemoryManager.from_plugins("native", {"backend": "memory"}) as memory:
        record = memory.bind(ALICE, MINE).add("from a coroutine")
        await asyncio.sleep(0)
        assert memory.get(ALICE, MINE, record.id).content == "from a coroutine"


# -- without `with`: a notebook's way (issue 28) ------------------------------------------


class Starts:
    """The in-memory native provider, counting its starts and closes."""

    name = "counting"

    def __init__(self) -> None:
        self._inner = build_native_provider({"backend": "memory"}, ManualClock())
        self.started = self.closed = 0

    async def start(self) -> None:
        self.started += 1
        await asyncio.sleep(0)
        await self._inner.start()

    async def close(self) -> None:
        self.closed += 1
        await self._inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _sync_threads() -> int:
    return sum(t.name == "governed-memory-sync" for t in threading.enumerate())


def test_the_sync_manager_starts_on_first_use_and_close_closes_it() -> None:
    before = _sync_threads()
    provider = Starts()
    memory = SyncMemoryManager(GovernedMemoryManager(provider))  # type: ignore[arg-type]
    alice = memory.bind(ALICE, MINE)
    barrier = threading.Barrier(6)
    added: list[str] = []

    def first_call(n: int) -> None:
        barrier.wait()  # six threads make the first call together
        added.append(alice.add(f"note {n}").id)

    threads = [threading.Thread(target=first_call, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert provider.started == 1 and len(set(added)) == 6
    assert len(alice.list(limit=10).items) == 6
    assert _sync_threads() == before + 1
    memory.close()
    assert provider.closed == 1
    assert _sync_threads() == before  # the loop's thread was joined
    with pytest.raises(RuntimeError, match="closed"):
        alice.add("after close")


def test_from_plugins_works_without_with() -> None:
    memory = SyncMemoryManager.from_plugins("native", {"backend": "memory"})
    record = memory.add(ALICE, MINE, "from a notebook cell")
    assert memory.get(ALICE, MINE, record.id).content == "from a notebook cell"
    memory.close()


EXIT_SCRIPT = """
import atexit, sys, threading
from pathlib import Path
from governed_memory import Principal, Scope
from governed_memory.sync import SyncMemoryManager

out = Path(sys.argv[1])

class Marker:
    name = "marker"
    async def emit(self, event): pass
    async def close(self):
        (out / "sink-closed").write_text("yes")

def at_exit():  # atexit runs after the facade's exit hook
    names = sorted(t.name for t in threading.enumerate())
    (out / "threads").write_text(",".join(names))

atexit.register(at_exit)
memory = SyncMemoryManager.from_plugins(
    "native", {"backend": "sqlite", "path": str(out / "m.db")}, sinks=[Marker()])
alice = Principal("user:alice", "user", tenant_id="acme", user_id="alice",
                  permissions=["memory:read", "memory:write"])
print(memory.add(alice, Scope("acme", user_id="alice"), "never closed").content)
"""


def test_a_sync_manager_never_closed_is_closed_at_interpreter_exit(tmp_path: Path) -> None:
    script = tmp_path / "notebook.py"
    script.write_text(EXIT_SCRIPT, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "never closed"
    assert "Traceback" not in done.stderr and "Error" not in done.stderr, done.stderr
    assert (tmp_path / "sink-closed").read_text() == "yes"  # the manager was closed
    assert (tmp_path / "threads").read_text() == "MainThread"  # loop and pools joined
    assert not (tmp_path / "m.db-wal").exists()  # SQLite closed cleanly (checkpointed)


FORK_SCRIPT = """
import multiprocessing, sys
from governed_memory.sync import SyncMemoryManager

memory = SyncMemoryManager.from_plugins("native", {"backend": "memory"})
memory.start()

def child():
    print("child done", flush=True)  # it exits without the parent's facade to close

if __name__ == "__main__":
    process = multiprocessing.get_context("fork").Process(target=child)
    process.start()
    process.join()
    print("child exit", process.exitcode, flush=True)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="fork")
def test_a_forked_child_does_not_wait_on_its_parents_facade(tmp_path: Path) -> None:
    script = tmp_path / "fork.py"
    script.write_text(FORK_SCRIPT, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["child done", "child exit 0"]
