"""The indexing outbox, its worker and reindexing are governed operations.

Each is an operation of the manager with a decision, a span and ``memory.index.*``
events (the index lifecycle as the trail sees it), authorized for an operator only: a
service principal with ``memory:admin`` bound to no user. Nothing reaches the outbox
around the port.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from actors import ALICE, ALICE_SCOPE
from governed_memory import GovernedMemoryManager
from governed_memory.errors import (
    MemoryCapabilityUnsupportedError,
    MemoryConfigurationError,
    MemoryScopeError,
    MemoryValidationError,
)
from governed_memory.events import InMemoryEventSink
from governed_memory.indexing import run_worker
from governed_memory.principal import Permission, Principal, PrincipalKind
from governed_memory.profiles import loads_profile

PROFILE = """
spec_version = 1
id = "store-ops-test"
version = "1.0.0"

[provider]
name = "native"
config = {{ backend = "sqlite", path = "{path}" }}

[stores.embedder]
kind = "hashing"
config = {{ dimension = 32 }}

[indexing]
mode = "async_outbox"

[retrieval]
modes = ["lexical", "vector"]
"""

# The conformance folder's example provider keeps no vectors: the provider we need.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "conformance"))

OPERATOR = Principal("svc:ops", PrincipalKind.SERVICE, "acme",
                     permissions=frozenset({Permission.ADMIN}))


def _manager(tmp_path: Path, sink: InMemoryEventSink) -> GovernedMemoryManager:
    spec = loads_profile(PROFILE.format(path=tmp_path / "m.db"))
    return GovernedMemoryManager.from_profile(spec, sinks=[sink])


def _index_events(sink: InMemoryEventSink) -> list[tuple[str, str]]:
    return [(event.type, event.operation) for event in sink.events
            if event.type.startswith("memory.index.")]


async def test_a_worker_round_is_a_governed_operation_with_index_events(
        tmp_path: Path) -> None:
    sink = InMemoryEventSink()
    async with _manager(tmp_path, sink) as manager:
        for n in range(3):
            await manager.add(ALICE, ALICE_SCOPE, f"note number {n}")
        report = await manager.outbox_status(OPERATOR)
        assert report.status.pending == 3
        sink.clear()
        done = await manager.process_index_jobs(OPERATOR, worker_id="w1", limit=10)
        assert (done.leased, done.indexed) == (3, 3)
        assert _index_events(sink) == [("memory.index.requested", "process_index_jobs"),
                                       ("memory.index.completed", "process_index_jobs")]
        completed = sink.events[-1]
        assert completed.count == 3 and "indexed 3" in completed.reasons
        assert completed.decision_id and completed.principal_id == OPERATOR.principal_id
        assert (await manager.outbox_status(OPERATOR)).status.pending == 0


async def test_the_worker_loop_and_reindex_go_through_the_port(tmp_path: Path) -> None:
    sink = InMemoryEventSink()
    async with _manager(tmp_path, sink) as manager:
        for n in range(4):
            await manager.add(ALICE, ALICE_SCOPE, f"note number {n}")
        total = await run_worker(manager.worker_steps(OPERATOR), worker_id="w",
                                 until_idle=True)
        assert total.indexed == 4
        rounds = [e for e in sink.events if e.type == "memory.index.completed"]
        assert len(rounds) == 2  # one that did the work, one that found nothing due
        sink.clear()
        page = await manager.reindex(OPERATOR, limit=100)
        assert page.enqueued == 0 and page.cursor is None  # every record has its vector
        assert _index_events(sink) == [("memory.index.requested", "reindex"),
                                       ("memory.index.completed", "reindex")]
        assert await manager.retry_dead_jobs(OPERATOR) == 0


@pytest.mark.parametrize("who", [
    ALICE,  # a user
    Principal("agent:x", PrincipalKind.AGENT, "acme", permissions=frozenset(Permission)),
    Principal("svc:alice", PrincipalKind.SERVICE, "acme", user_id="alice",
              permissions=frozenset(Permission)),  # a service acting for a user
    Principal("svc:ro", PrincipalKind.SERVICE, "acme",
              permissions=frozenset({Permission.READ, Permission.WRITE})),  # no admin
])
async def test_only_an_operator_runs_store_wide_work(tmp_path: Path, who: Principal) -> None:
    sink = InMemoryEventSink()
    async with _manager(tmp_path, sink) as manager:
        await manager.add(ALICE, ALICE_SCOPE, "a note")
        for call in (manager.outbox_status(who), manager.reindex(who),
                     manager.process_index_jobs(who, worker_id="w"),
                     manager.retry_dead_jobs(who)):
            sink.clear()
            with pytest.raises(MemoryScopeError):
                await call
            assert [e.type for e in sink.events] == ["memory.index.requested",
                                                     "memory.index.rejected"]
        assert (await manager.outbox_status(OPERATOR)).status.pending == 1  # untouched


async def test_bad_arguments_are_typed_and_audited(tmp_path: Path) -> None:
    sink = InMemoryEventSink()
    async with _manager(tmp_path, sink) as manager:
        for call, field in ((manager.process_index_jobs(OPERATOR, worker_id=""), "worker_id"),
                            (manager.process_index_jobs(OPERATOR, worker_id="w", limit=0),
                             "limit"),
                            (manager.reindex(OPERATOR, limit=10**9), "limit"),
                            (manager.retry_dead_jobs(OPERATOR, []), "job_ids"),
                            (manager.outbox_status(OPERATOR, dead_limit=-1), "dead_limit")):
            sink.clear()
            with pytest.raises(MemoryValidationError) as info:
                await call
            assert info.value.field == field
            assert sink.events[-1].type == "memory.index.rejected"


async def test_a_provider_keeping_no_vectors_says_so_in_the_trail() -> None:
    from example_provider import ExampleProvider
    from governed_memory.clock import ManualClock

    clock = ManualClock()
    sink = InMemoryEventSink()
    async with GovernedMemoryManager(ExampleProvider(clock), clock=clock,  # type: ignore[arg-type]
                                     sinks=[sink]) as manager:
        with pytest.raises(MemoryCapabilityUnsupportedError, match="no indexing outbox"):
            await manager.process_index_jobs(OPERATOR, worker_id="w")
        assert [e.type for e in sink.events] == ["memory.index.requested",
                                                 "memory.index.rejected"]


async def test_without_an_embedder_a_round_fails_as_a_configuration_error() -> None:
    sink = InMemoryEventSink()
    async with GovernedMemoryManager.from_plugins("native", {"backend": "memory"},
                                                  sinks=[sink]) as manager:
        with pytest.raises(MemoryConfigurationError):
            await manager.process_index_jobs(OPERATOR, worker_id="w")
        assert sink.events[-1].type == "memory.index.failed"
        assert sink.events[-1].error_code == "configuration"
