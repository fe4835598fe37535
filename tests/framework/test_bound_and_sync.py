"""``manager.bind(principal, scope)`` and ``SyncMemoryManager``: views of the async
manager's methods, so the surface, the governance and the errors are the same."""

from __future__ import annotations

import asyncio
import inspect
import threading
from pathlib import Path

import pytest
from governed_memory import (
    GovernedMemoryManager,
    MemoryNotFoundError,
    MemoryScopeError,
    MemoryValidationError,
    Principal,
    Scope,
)
from governed_memory.errors import MemoryConflictError
from governed_memory.events import InMemoryEventSink
from governed_memory.manager import BoundMemory
from governed_memory.sync import SyncBoundMemory, SyncMemoryManager

ALICE = Principal("user:alice", "user", tenant_id="acme", user_id="alice",
                  permissions=["memory:read", "memory:write", "memory:delete"])
MINE = Scope("acme", user_id="alice")


def _coroutine_methods(kind: type) -> dict[str, inspect.Signature]:
    return {name: inspect.signature(member) for name, member in vars(kind).items()
            if not name.startswith("_") and inspect.iscoroutinefunction(member)}


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
