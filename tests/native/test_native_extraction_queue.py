"""The extraction queue in SQLite and PostgreSQL, shared by processes: a second process
queues the same turns (one job) and leases the job, then dies without settling it; after
the lease expires this process's worker takes the job over and extracts the turn's fact
once. Both processes read one manual time, so no test waits on the wall clock."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import attrs
import pytest
from governed_memory import GovernedMemoryManager, Principal, PrincipalKind, Scope
from governed_memory.clock import ManualClock
from governed_memory.extraction_jobs import (
    ExtractionJob,
    ExtractionJobState,
    ExtractionQueueStatus,
    Settlement,
    SettleOutcome,
    job_id_for,
)
from governed_memory.extraction_requests import extraction_status
from governed_memory.language_models import ScriptedModel
from governed_memory.plugins import PluginManager
from governed_memory.principal import Permission
from governed_memory.tiers import MemoryTiers, TurnDraft
from governed_memory.turncontext import MemoryExtractor
from governed_memory.turncontext.extraction_worker import ExtractionWorker
from governed_memory_native import build_native_provider
from native_support import config_for

START = 1_800_000_000.0
OPERATOR = Principal("ops:worker", PrincipalKind.SERVICE, "operator",
                     permissions=[Permission.ADMIN])
ALICE = Principal("user:alice", PrincipalKind.USER, "acme", "alice")
OWNER = Scope("acme", project_id="handbook", user_id="alice", session_id="s1")

_DOOMED = textwrap.dedent("""
    import asyncio, json, os, sys
    from governed_memory import GovernedMemoryManager, Principal, PrincipalKind, Scope
    from governed_memory.clock import ManualClock
    from governed_memory.extraction_requests import enqueue_extraction, lease_extraction_jobs
    from governed_memory_native import build_native_provider

    async def main():
        args = json.loads(sys.argv[1])
        clock = ManualClock(args["start"])
        manager = GovernedMemoryManager(build_native_provider(args["config"], clock),
                                        clock=clock)
        await manager.start()
        alice = Principal("user:alice", PrincipalKind.USER, "acme", "alice")
        owner = Scope.from_dimensions(args["owner"])
        again = await enqueue_extraction(manager, alice, owner, args["turn_ids"],
                                         args["first_seq"], args["last_seq"])
        operator = Principal("ops:worker", PrincipalKind.SERVICE, "operator",
                             permissions=["memory:admin"])
        leased = await lease_extraction_jobs(manager, operator, worker_id="doomed",
                                             lease_s=60)
        print(json.dumps({"created": again.created, "job_id": again.job_id,
                          "leased": [job.job_id for job in leased]}), flush=True)
        os._exit(0)  # dies holding the lease: no settlement, no close

    asyncio.run(main())
""")


def turn_config(backend: str, tmp_path: Path, config: dict[str, Any]) -> dict[str, Any]:
    if backend == "postgres":
        return {"dsn": config["dsn"], "schema": config["schema"]}
    return {"path": str(tmp_path / "turns.db")}


async def test_a_job_leased_by_a_process_that_died_is_finished_by_another(
        sql_backend: str, tmp_path: Path) -> None:
    config = config_for(sql_backend, tmp_path)
    clock = ManualClock(START)
    model = ScriptedModel(responder=lambda call: {"facts": [
        {"content": "Alice prefers green tea", "type": "preference", "scope": "user",
         "importance": 0.8}]})
    turns_store = PluginManager.load().turn_stores.get(sql_backend).factory(
        turn_config(sql_backend, tmp_path, config), clock)
    manager = GovernedMemoryManager(build_native_provider(config, clock), clock=clock)
    tiers = MemoryTiers(long_term=manager, turns=turns_store)
    async with tiers:
        asked = await tiers.append(ALICE, OWNER, TurnDraft.user("I prefer green tea."))
        said = await tiers.append(ALICE, OWNER, TurnDraft.assistant("Noted!"))
        extractor = MemoryExtractor(manager, model)
        job = await extractor.enqueue(ALICE, OWNER, (asked, said))

        args = {"start": START, "config": config, "owner": OWNER.dimensions(),
                "turn_ids": [asked.turn_id, said.turn_id], "first_seq": asked.seq,
                "last_seq": said.seq}
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _DOOMED, json.dumps(args), stdout=asyncio.subprocess.PIPE)
        out, _ = await asyncio.wait_for(process.communicate(), timeout=120)
        assert process.returncode == 0
        seen = json.loads(out)
        assert seen == {"created": False, "job_id": job.job_id, "leased": [job.job_id]}

        status = (await extraction_status(manager, OPERATOR)).status
        assert (status.pending, status.leased, status.done) == (0, 1, 0)
        worker = ExtractionWorker(tiers, extractor)
        assert (await worker.round(OPERATOR, worker_id="rescuer")).leased == 0  # still held
        clock.advance(61)
        report = await worker.round(OPERATOR, worker_id="rescuer")
        assert (report.leased, report.done, report.facts_stored) == (1, 1, 1)

        again = await extractor.enqueue(ALICE, OWNER, (asked, said))
        assert (again.created, again.state) == (False, ExtractionJobState.DONE)
        page = await manager.list(ALICE, Scope("acme", user_id="alice"))
        assert [r.content for r in page.items] == ["Alice prefers green tea"]
        assert len(model.calls) == 1


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
async def test_the_queue_keeps_its_jobs_across_a_restart_and_settles_by_lease(
        backend: str, tmp_path: Path) -> None:
    """Enqueue, lease, retry, dead letter, requeue and erasure on each backend's store
    directly; a durable backend still has the job after the provider is reopened."""
    config = config_for(backend, tmp_path)
    job = ExtractionJob(job_id=job_id_for(OWNER, ("t1", "t2")), owner=OWNER,
                        principal=ALICE, turn_ids=("t1", "t2"), first_seq=1, last_seq=2,
                        state=ExtractionJobState.PENDING, attempts=0, next_attempt_at=START,
                        created_at=START)
    provider = build_native_provider(config, ManualClock(START))
    await provider.start()
    try:
        queue = provider.extraction_jobs
        assert queue is not None
        assert (await queue.enqueue(job)).created
        assert not (await queue.enqueue(job)).created
    finally:
        await provider.close()
    provider = build_native_provider(config, ManualClock(START))
    await provider.start()
    try:
        queue = provider.extraction_jobs
        assert queue is not None
        if backend == "memory":  # not durable: a new provider starts empty
            assert (await queue.status()).pending == 0
            return
        [leased] = await queue.lease("w1", START, START + 10, 5)
        assert leased == attrs.evolve(job, state=ExtractionJobState.LEASED, attempts=1,
                                      lease_owner="w1", lease_expires_at=START + 10)
        assert await queue.lease("w2", START + 5, START + 15, 5) == []
        [taken] = await queue.lease("w2", START + 10, START + 20, 5)
        stale = Settlement(job_id=job.job_id, lease_owner="w1", attempts=1,
                           outcome=SettleOutcome.DONE)
        assert not await queue.settle(stale, START + 11)
        retry = Settlement(job_id=job.job_id, lease_owner="w2", attempts=2,
                           outcome=SettleOutcome.RETRY, next_attempt_at=START + 100,
                           error_code="model_failed")
        assert await queue.settle(retry, START + 11)
        assert await queue.lease("w3", START + 99, START + 200, 5) == []
        [third] = await queue.lease("w3", START + 100, START + 200, 5)
        assert (third.attempts, third.last_error_code) == (3, "model_failed")
        assert await queue.settle(Settlement(job_id=job.job_id, lease_owner="w3",
                                             attempts=3, outcome=SettleOutcome.DEAD,
                                             error_code="model_failed"), START + 101)
        status = await queue.status()
        assert (status.pending, status.leased, status.dead) == (0, 0, 1)
        assert [j.job_id for j in await queue.jobs(ExtractionJobState.DEAD, 10)] == [
            job.job_id]
        assert await queue.requeue_dead([job.job_id], START + 200) == 1
        [fresh] = await queue.lease("w4", START + 200, START + 300, 5)
        assert (fresh.attempts, fresh.last_error_code) == (1, None)
        assert await queue.erase_user("acme", "alice") == 1
        assert await queue.status() == ExtractionQueueStatus(0, 0, 0, 0, None)
        assert taken.principal == ALICE and taken.owner == OWNER
    finally:
        await provider.close()


async def test_concurrent_leases_from_two_providers_never_take_the_same_job(
        sql_backend: str, tmp_path: Path) -> None:
    """Two providers on one store (two connections, as two processes have) lease at
    once until the queue is empty: every job is leased exactly once."""
    config = config_for(sql_backend, tmp_path)
    providers = [build_native_provider(config, ManualClock(START)) for _ in range(2)]
    for provider in providers:
        await provider.start()
    try:
        queues = [p.extraction_jobs for p in providers]
        assert queues[0] is not None and queues[1] is not None
        ids = []
        for n in range(24):
            turn_ids = (f"t{n}",)
            job = ExtractionJob(job_id=job_id_for(OWNER, turn_ids), owner=OWNER,
                                principal=ALICE, turn_ids=turn_ids, first_seq=n + 1,
                                last_seq=n + 1, state=ExtractionJobState.PENDING,
                                attempts=0, next_attempt_at=START, created_at=START)
            ids.append((await queues[0].enqueue(job)).job_id)

        async def drain(index: int) -> list[str]:
            queue = queues[index]
            assert queue is not None
            taken: list[str] = []
            while leased := await queue.lease(f"w{index}", START, START + 60, 3):
                taken.extend(job.job_id for job in leased)
            return taken

        first, second = await asyncio.gather(drain(0), drain(1))
        assert sorted(first + second) == sorted(ids)
        assert not set(first) & set(second)
    finally:
        for provider in providers:
            await provider.close()
