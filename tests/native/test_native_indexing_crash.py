"""A worker process killed mid-job: its lease expires, another worker finishes the jobs,
and every record ends up with exactly one vector (SQLite, real processes, real time)."""

from __future__ import annotations

import asyncio
import signal
import sys
import textwrap
import time
from pathlib import Path

from governed_memory.clock import SystemClock
from governed_memory.indexing import JobState
from governed_memory_native import build_native_provider
from indexing_support import ControlledEmbedder, settings
from native_support import note
from outbox_support import outbox_ctx

_DOOMED_WORKER = textwrap.dedent("""
    import asyncio, sys
    sys.path[:0] = [{tests!r}, {root!r}]
    from governed_memory.clock import SystemClock
    from governed_memory_native import build_native_provider
    from indexing_support import ControlledEmbedder, settings

    async def main():
        embedder = ControlledEmbedder()
        embedder.gate = asyncio.Event()  # never set: the model "hangs" mid-batch
        provider = build_native_provider({{"path": {path!r}}}, SystemClock())
        provider.configure_indexing(settings(embedder, "async_outbox"))
        await provider.start()
        task = asyncio.create_task(
            provider.process_index_jobs(worker_id="doomed", limit=100, lease_s={lease}))
        await embedder.entered.wait()
        print("leased", flush=True)
        await task

    asyncio.run(main())
""")

LEASE_S = 1.0


async def test_a_killed_worker_leaves_no_duplicate_and_no_lost_vector(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    embedder = ControlledEmbedder()
    provider = build_native_provider({"path": str(path)}, SystemClock())
    provider.configure_indexing(settings(embedder, "async_outbox"))
    await provider.start()
    try:
        records = [await provider.add(note(f"note number {n}"), outbox_ctx(SystemClock()))
                   for n in range(6)]
        here = Path(__file__).parent
        script = _DOOMED_WORKER.format(tests=str(here), root=str(here.parent), path=str(path),
                                       lease=LEASE_S)
        process = await asyncio.create_subprocess_exec(sys.executable, "-c", script,
                                                       stdout=asyncio.subprocess.PIPE)
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), timeout=60)
        assert line.strip() == b"leased", line
        killed_at = time.time()
        process.send_signal(signal.SIGKILL)
        await process.wait()

        leased = await provider.index_jobs(JobState.LEASED, 100)
        assert {job.lease_owner for job in leased} == {"doomed"}
        assert len(leased) == len(records)
        # While the dead worker's lease runs, nobody else may take its jobs.
        early = await provider.process_index_jobs(worker_id="rescuer", limit=100)
        if time.time() < killed_at + LEASE_S * 0.9:
            assert early.leased == 0
        await asyncio.sleep(max(0.0, killed_at + LEASE_S - time.time()) + 0.1)
        report = await provider.process_index_jobs(worker_id="rescuer", limit=100)
        assert report.indexed + early.indexed == len(records)
        status = await provider.outbox_status()
        assert (status.pending, status.leased, status.dead) == (0, 0, 0)
        assert status.vectors == {str(embedder.identity): len(records)}
        assert status.missing_vectors == 0
        async with provider.backend.reading() as tx:
            for record in records:
                stored = await tx.vectors.of(record.id, embedder.identity)
                assert stored is not None and stored.content_hash == record.content_hash
    finally:
        await provider.close()
