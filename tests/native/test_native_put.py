"""``put``: one record per key however puts race, on every native backend.

In one process (concurrent puts of one key) and across processes sharing one SQLite
file or one PostgreSQL schema: racing puts never leave two records under a key and
never lose a put silently (each is a version of the one record: last writer wins),
and ``expected_revision`` turns a put into a compare-and-set.
"""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from pathlib import Path

import pytest
from governed_memory import GovernedMemoryManager, Principal, PrincipalKind, Scope
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryConflictError
from governed_memory_native import build_native_provider
from native_support import config_for

ALICE = Principal("user:alice", PrincipalKind.USER, "acme", "alice")
SCOPE = Scope("acme", user_id="alice")
PUTS_PER_PROCESS = 6

_PUTTER = textwrap.dedent("""
    import asyncio, json, sys
    from governed_memory import GovernedMemoryManager, Principal, PrincipalKind, Scope
    from governed_memory.clock import ManualClock
    from governed_memory_native import build_native_provider

    async def main():
        args = json.loads(sys.argv[1])
        clock = ManualClock()
        alice = Principal("user:alice", PrincipalKind.USER, "acme", "alice")
        async with GovernedMemoryManager(build_native_provider(args["config"], clock),
                                         clock=clock) as manager:
            for n in range(args["puts"]):
                await manager.put(alice, Scope("acme", user_id="alice"), "settings",
                                  f"{args['name']} {n}")
        print("done", flush=True)

    asyncio.run(main())
""")


def _manager(backend: str, tmp_path: Path) -> GovernedMemoryManager:
    clock = ManualClock()
    return GovernedMemoryManager(build_native_provider(config_for(backend, tmp_path), clock),
                                 clock=clock)


async def test_put_adds_then_updates_the_record_under_the_key(backend: str,
                                                            tmp_path: Path) -> None:
    async with _manager(backend, tmp_path) as manager:
        first = await manager.put(ALICE, SCOPE, "timezone", "Europe/Paris",
                                  metadata={"source": "form"})
        second = await manager.put(ALICE, SCOPE, "timezone", "Asia/Tokyo")
        assert (first.key, first.version) == ("timezone", 1)
        assert (second.id, second.version, second.content) == (first.id, 2, "Asia/Tokyo")
        assert dict(second.metadata) == {"source": "form"}  # a put keeps unset fields
        found = await manager.lookup(ALICE, SCOPE, key="timezone")
        assert found is not None and found.content == "Asia/Tokyo"


async def test_put_with_expected_revision_is_a_compare_and_set(backend: str,
                                                               tmp_path: Path) -> None:
    async with _manager(backend, tmp_path) as manager:
        with pytest.raises(MemoryConflictError):
            await manager.put(ALICE, SCOPE, "plan", "gold", expected_revision="r-none")
        first = await manager.put(ALICE, SCOPE, "plan", "silver")
        second = await manager.put(ALICE, SCOPE, "plan", "gold",
                                   expected_revision=first.revision)
        with pytest.raises(MemoryConflictError):
            await manager.put(ALICE, SCOPE, "plan", "bronze", expected_revision=first.revision)
        found = await manager.lookup(ALICE, SCOPE, key="plan")
        assert found is not None and (found.content, found.version) == ("gold",
                                                                        second.version)


async def test_concurrent_puts_of_one_key_leave_one_record_with_every_version(
        backend: str, tmp_path: Path) -> None:
    async with _manager(backend, tmp_path) as manager:
        written = await asyncio.gather(*(
            manager.put(ALICE, SCOPE, "status", f"status {n}") for n in range(8)))
        assert len({record.id for record in written}) == 1
        page = await manager.list(ALICE, SCOPE, limit=50)
        assert len(page.items) == 1
        history = await manager.history(ALICE, SCOPE, written[0].id)
        assert len(history) == 8
        assert sorted(record.version for record in written) == list(range(1, 9))


async def test_processes_racing_puts_of_one_key_leave_one_record(sql_backend: str,
                                                                 tmp_path: Path) -> None:
    config = config_for(sql_backend, tmp_path)
    async with _manager_over(config) as manager:
        await manager.health()  # migrates the store before the processes race
        processes = [await asyncio.create_subprocess_exec(
            sys.executable, "-c", _PUTTER,
            json.dumps({"config": config, "puts": PUTS_PER_PROCESS, "name": name}),
            stdout=asyncio.subprocess.PIPE) for name in ("left", "right")]
        outputs = [await asyncio.wait_for(process.communicate(), timeout=120)
                   for process in processes]
        assert [out.decode().strip() for out, _ in outputs] == ["done", "done"]
        assert all(process.returncode == 0 for process in processes)
        page = await manager.list(ALICE, SCOPE, limit=50)
        assert len(page.items) == 1
        record = page.items[0]
        assert record.key == "settings"
        assert record.version == 2 * PUTS_PER_PROCESS
        history = await manager.history(ALICE, SCOPE, record.id)
        contents = {version.record.content for version in history}
        assert contents == {f"{name} {n}" for name in ("left", "right")
                            for n in range(PUTS_PER_PROCESS)}


def _manager_over(config: dict[str, object]) -> GovernedMemoryManager:
    clock = ManualClock()
    return GovernedMemoryManager(build_native_provider(config, clock), clock=clock)
