"""Several OS processes writing one scope of one PostgreSQL schema at the same time.

Each worker process runs its own provider (its own pool) and, for the same records:
compare-and-set increments of a shared counter (retrying on a stale revision), adds that
compete for the same unique keys, and adds that retry the same idempotency keys. After
they finish, the database must show no lost update (the counter equals the number of
successful increments, one version per increment), one winner per unique key and one
record per idempotency key. Worker processes also share the index outbox here; a writer
process killed mid-stream is ``test_native_event_outbox``'s, over SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
import time
from pathlib import Path

from governed_memory.clock import ManualClock
from governed_memory.requests import AddRequest, GetRequest, HistoryRequest, ListRequest
from native_support import USER_SCOPE, config_for, make_ctx, note

WORKERS = 4
INCREMENTS = 15
KEYS = 10

_WORKER = textwrap.dedent("""
    import asyncio, json, sys, time
    sys.path.insert(0, {tests!r})
    sys.path.insert(0, {native!r})
    from governed_memory.requests import GetRequest, UpdateRequest
    from governed_memory.clock import ManualClock
    from governed_memory import MemoryConflictError
    from governed_memory_native import build_native_provider
    from native_support import USER_SCOPE, make_ctx, note

    async def main():
        clock = ManualClock()
        provider = build_native_provider(json.loads({config!r}), clock)
        await provider.start()
        time.sleep(max(0.0, {start_at!r} - time.time()))
        increments = conflicts = won = 0
        idempotent = []
        try:
            for n in range({increments}):
                while True:
                    current = await provider.get(
                        GetRequest(scope=USER_SCOPE, record_id={counter!r}), make_ctx(clock))
                    value = int(current.content.split()[1]) + 1
                    try:
                        await provider.update(UpdateRequest(
                            scope=USER_SCOPE, record_id={counter!r},
                            content=f"count {{value}}",
                            expected_revision=current.revision), make_ctx(clock))
                    except MemoryConflictError:
                        conflicts += 1
                        continue
                    increments += 1
                    break
                try:
                    await provider.add(note(f"claim {{n}} by {worker}", key=f"key-{{n % {keys}}}"),
                                       make_ctx(clock))
                    won += 1
                except MemoryConflictError:
                    pass
                record = await provider.add(
                    note(f"once {{n % {keys}}}", idempotency_key=f"idem-{{n % {keys}}}"),
                    make_ctx(clock))
                idempotent.append([n % {keys}, record.id])
        finally:
            await provider.close()
        print(json.dumps({{"increments": increments, "conflicts": conflicts, "won": won,
                          "idempotent": idempotent}}), flush=True)

    asyncio.run(main())
""")


async def _run_worker(script: str) -> dict[str, object]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode == 0, err.decode()[-2000:]
    result: dict[str, object] = json.loads(out.decode().strip().splitlines()[-1])
    return result


async def test_processes_sharing_a_scope_lose_no_update(tmp_path: Path,
                                                         clock: ManualClock) -> None:
    from governed_memory_native import build_native_provider

    config = config_for("postgres", tmp_path)
    provider = build_native_provider(config, clock)
    await provider.start()
    try:
        counter = await provider.add(note("count 0"), make_ctx(clock))
        start_at = time.time() + 2.0  # every worker imported and connected by then
        scripts = [
            _WORKER.format(tests=str(Path(__file__).parents[1]), native=str(Path(__file__).parent),
                           config=json.dumps(config), start_at=start_at, counter=counter.id,
                           increments=INCREMENTS, keys=KEYS, worker=worker)
            for worker in range(WORKERS)
        ]
        results = await asyncio.gather(*(_run_worker(script) for script in scripts))

        total = sum(int(str(r["increments"])) for r in results)
        assert total == WORKERS * INCREMENTS
        final = await provider.get(GetRequest(scope=USER_SCOPE, record_id=counter.id),
                                   make_ctx(clock))
        assert final.content == f"count {total}"  # no increment overwrote another
        assert final.version == total + 1
        history = await provider.history(HistoryRequest(scope=USER_SCOPE, record_id=counter.id),
                                         make_ctx(clock))
        assert [v.record.content for v in history] == [
            f"count {n}" for n in range(total + 1)]

        # one winner per unique key, across processes
        assert sum(int(str(r["won"])) for r in results) == KEYS
        records = []
        cursor = None
        while True:
            page = await provider.list(ListRequest(scope=USER_SCOPE, limit=100, cursor=cursor),
                                       make_ctx(clock))
            records.extend(page.items)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        keyed = [r.key for r in records if r.key is not None]
        assert sorted(keyed) == sorted(f"key-{n}" for n in range(KEYS))

        # one record per idempotency key, and every process got that same record back
        by_key: dict[int, set[str]] = {}
        for result in results:
            for number, record_id in result["idempotent"]:  # type: ignore[attr-defined]
                by_key.setdefault(number, set()).add(record_id)
        assert all(len(ids) == 1 for ids in by_key.values()), by_key
        onces = [r for r in records if r.content.startswith("once ")]
        assert len(onces) == KEYS
        assert {r.id for r in onces} == set().union(*by_key.values())
        replay = await provider.add(AddRequest(scope=USER_SCOPE, content="once 3",
                                               idempotency_key="idem-3"), make_ctx(clock))
        assert {replay.id} == by_key[3]
    finally:
        await provider.close()


_INDEX_WORKER = textwrap.dedent("""
    import asyncio, json, sys, time
    sys.path[:0] = [{tests!r}, {native!r}]
    from governed_memory.clock import SystemClock
    from governed_memory_native import build_native_provider
    from indexing_support import ControlledEmbedder, settings

    async def main():
        embedder = ControlledEmbedder()
        if {doomed!r}:
            embedder.gate = asyncio.Event()  # never set: the model "hangs" mid-batch
        provider = build_native_provider(json.loads({config!r}), SystemClock())
        provider.configure_indexing(settings(embedder, "async_outbox"))
        await provider.start()
        if {doomed!r}:
            task = asyncio.create_task(provider.process_index_jobs(
                worker_id="doomed", limit=5, lease_s={lease}))
            await embedder.entered.wait()
            print("leased", flush=True)
            await task
        time.sleep(max(0.0, {start_at!r} - time.time()))
        indexed = 0
        while True:
            report = await provider.process_index_jobs(worker_id={name!r}, limit=3)
            indexed += report.indexed
            if report.leased == 0:
                break
        await provider.close()
        print(json.dumps({{"indexed": indexed, "embedded": embedder.texts_embedded}}),
              flush=True)

    asyncio.run(main())
""")

LEASE_S = 1.0
JOBS = 30


async def test_worker_processes_share_the_outbox_without_duplicates(tmp_path: Path) -> None:
    """Three worker processes drain one outbox concurrently after a fourth was killed
    holding leases: each job is embedded exactly once (SKIP LOCKED hands every job to
    one worker; the dead worker's jobs come back when its lease expires), and every
    record ends with exactly one vector."""
    import signal

    from governed_memory.clock import SystemClock
    from governed_memory.indexing import JobState
    from governed_memory_native import build_native_provider
    from indexing_support import ControlledEmbedder, settings
    from outbox_support import outbox_ctx

    config = config_for("postgres", tmp_path)
    embedder = ControlledEmbedder()
    provider = build_native_provider(config, SystemClock())
    provider.configure_indexing(settings(embedder, "async_outbox"))
    await provider.start()
    common = {"tests": str(Path(__file__).parents[1]), "native": str(Path(__file__).parent),
              "config": json.dumps(config), "lease": LEASE_S}
    try:
        records = [await provider.add(note(f"note number {n}"), outbox_ctx(SystemClock()))
                   for n in range(JOBS)]
        doomed = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _INDEX_WORKER.format(doomed=True, name="doomed",
                                                       start_at=0.0, **common),
            stdout=asyncio.subprocess.PIPE)
        assert doomed.stdout is not None
        line = await asyncio.wait_for(doomed.stdout.readline(), timeout=60)
        assert line.strip() == b"leased", line
        doomed.send_signal(signal.SIGKILL)
        await doomed.wait()
        assert len(await provider.index_jobs(JobState.LEASED, 100)) == 5

        start_at = time.time() + LEASE_S + 1.0  # the dead lease has expired by then
        results = await asyncio.gather(*(
            _run_worker(_INDEX_WORKER.format(doomed=False, name=f"w{n}", start_at=start_at,
                                             **common))
            for n in range(3)))
        assert sum(int(str(r["indexed"])) for r in results) == JOBS
        assert sum(int(str(r["embedded"])) for r in results) == JOBS  # none embedded twice
        status = await provider.outbox_status()
        assert (status.pending, status.leased, status.dead) == (0, 0, 0)
        assert status.vectors == {str(embedder.identity): JOBS}
        async with provider.backend.reading() as tx:
            for record in records:
                stored = await tx.vectors.of(record.id, embedder.identity)
                assert stored is not None and stored.content_hash == record.content_hash
    finally:
        await provider.close()
