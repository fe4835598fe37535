"""The audit trail in PostgreSQL (the native plugin's ``postgres-trail`` sink): several
nodes record into one chain that verifies from its genesis, every acknowledged
operation's events exactly once; the chain is the file trail's (same entries, hashes
and Merkle tree), so an export verifies and proves with the file tools; an altered row
is reported where it is; and a trail that cannot record refuses the operation.

Real PostgreSQL (``tests/postgres_support.py``: a private schema per test).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from actors import ALICE, ALICE_SCOPE, GLOBEX
from governed_memory import GovernedMemoryManager, MemoryScopeError
from governed_memory.audit import verify_trail
from governed_memory.audit.export import ExportError, export_trail
from governed_memory.audit.merkle import Frontier, MerkleTree
from governed_memory.audit.proofs import ProofError
from governed_memory.audit.proving import prove_inclusion
from governed_memory.audit.verify import TrailProblemError, tree_checkpoint_of
from governed_memory.clock import SystemClock
from governed_memory.errors import MemoryConfigurationError
from governed_memory.events import AuditUnavailableError, InMemoryEventSink, MemoryEvent
from governed_memory.profiles import ProfileLoadError
from governed_memory.sinks import build_sinks
from governed_memory_native import build_native_provider
from governed_memory_native.postgres.trail.sequencer import TrailIntakeError
from governed_memory_native.postgres.trail.sink import (
    PostgresTrailSink,
    parse_trail_config,
    postgres_trail_from_config,
)
from postgres_support import (
    POSTGRES_DSN,
    drop_schemas,
    require_postgres,
    require_postgres_package,
)
from trail_support import (
    Proxy,
    duplicates,
    execute,
    store_config,
    stored,
    trail_events,
    trail_profile,
)

require_postgres_package()


@pytest.fixture(scope="module", autouse=True)
def _schemas() -> Iterator[None]:
    yield
    drop_schemas()


@pytest.fixture
def config(tmp_path: Path) -> dict[str, Any]:
    require_postgres()
    return store_config(tmp_path)


def node(config: dict[str, Any], *, minimal: bool = False,
         seen: InMemoryEventSink | None = None) -> GovernedMemoryManager:
    """One "node": a manager built from a profile whose trail is the provider's store
    (``store = "provider"``, fail closed), plus a sink that sees what it emitted."""
    spec = trail_profile(minimal=minimal)
    sinks = [*build_sinks(spec, provider_config_overrides=config),
             *([seen] if seen is not None else [])]
    return GovernedMemoryManager.from_profile(spec, sinks=sinks,
                                              provider_config_overrides=config)


def event(n: int, **changes: Any) -> MemoryEvent:
    fields: dict[str, Any] = {
        "event_id": f"evt_{n:06d}.0", "type": "memory.read.completed",
        "occurred_at": 1_800_000_000.0 + n, "operation_id": f"op_{n:06d}",
        "operation": "get", "principal_id": "user:alice", "tenant_id": "acme",
        "outcome": "completed", "count": 1}
    fields.update(changes)
    return MemoryEvent(**fields)


# -- several nodes, one chain ---------------------------------------------------------


async def test_two_nodes_record_one_chain_with_every_event_once(
        config: dict[str, Any]) -> None:
    seen = [InMemoryEventSink(), InMemoryEventSink()]
    added: list[str] = []
    async with node(config, seen=seen[0]) as first, node(config, seen=seen[1]) as second:

        async def work(manager: GovernedMemoryManager, name: str) -> None:
            for n in range(12):
                record = await manager.add(ALICE, ALICE_SCOPE, f"{name} note {n}")
                added.append(record.id)
                await manager.get(ALICE, ALICE_SCOPE, record.id)
                if n % 3 == 0:
                    await manager.list(ALICE, ALICE_SCOPE, limit=5)
                if n % 4 == 0:
                    await manager.delete(ALICE, ALICE_SCOPE, record.id)
                if n % 5 == 0:
                    with pytest.raises(MemoryScopeError):  # a refusal is recorded too
                        await manager.add(ALICE, GLOBEX, "another tenant's scope")

        await asyncio.gather(work(first, "a"), work(second, "b"),
                             work(first, "c"), work(second, "d"))

    events = trail_events(config["schema"])
    ids = [item["event_id"] for item in events]
    assert duplicates(ids) == []
    emitted = {item.event_id for sink in seen for item in sink.events}
    assert set(ids) == emitted  # nothing lost, nothing the nodes did not emit
    with stored(config["schema"]) as trail:
        verification = verify_trail([trail])
        assert verification.ok, verification.problem
        assert verification.first_seq == 0 and verification.entries == len(ids)
        assert trail.waiting() == 0
    committed = [item for item in events if item["type"] == "memory.write.committed"
                 and item["operation"] == "add"]
    assert sorted(record for item in committed for record in item["record_ids"]) == sorted(
        added)
    position = {event_id: seq for seq, event_id in enumerate(ids)}
    for item in events:  # each operation's outcome follows its request
        if not item["type"].endswith(".requested"):
            requested = f"evt_{item['operation_id'].removeprefix('op_')}.0"
            assert position[requested] < position[item["event_id"]], item["type"]


async def test_a_minimal_profile_keeps_content_hashes_out_of_stored_events(
        tmp_path: Path) -> None:
    require_postgres()
    minimal, standard = store_config(tmp_path / "minimal"), store_config(tmp_path / "std")
    async with node(minimal, minimal=True) as manager:
        await manager.add(ALICE, ALICE_SCOPE, "prefers decaf")
    async with node(standard) as manager:
        await manager.add(ALICE, ALICE_SCOPE, "prefers decaf")
    hashes = {name: [item["content_hashes"] for item in trail_events(config["schema"])
                     if item["type"] == "memory.write.committed"]
              for name, config in (("minimal", minimal), ("standard", standard))}
    assert hashes["minimal"] == [[]]
    assert len(hashes["standard"]) == 1 and hashes["standard"][0][0].startswith("sha256:")

    # A trail that keeps content hashes refuses a profile that may not record them.
    async with node(standard, minimal=True) as manager:
        with pytest.raises(AuditUnavailableError) as refused:
            await manager.add(ALICE, ALICE_SCOPE, "refused")
    assert isinstance(refused.value.__cause__, MemoryConfigurationError)


# -- the sequencer ---------------------------------------------------------------------


async def test_concurrent_emits_share_one_statement_and_a_redelivery_is_one_entry(
        config: dict[str, Any]) -> None:
    sink = postgres_trail_from_config({"dsn": POSTGRES_DSN, "schema": config["schema"],
                                       "sequence": False})
    try:
        await sink.emit(event(0))
        statements = sink.stats.statements
        await asyncio.gather(*(sink.emit(event(n)) for n in range(1, 41)))
        assert sink.stats.statements - statements < 40  # grouped, not one per emit
        await sink.emit(event(7))  # delivery is at least once
        assert await sink.sequence() == 41
        await sink.emit(event(7))  # again, after it has its position
        assert await sink.sequence() == 0
    finally:
        await sink.close()
    ids = [item["event_id"] for item in trail_events(config["schema"])]
    assert ids == [f"evt_{n:06d}.0" for n in range(41)]


async def test_an_intake_row_that_is_no_event_stops_the_sequencer(
        config: dict[str, Any]) -> None:
    sink = postgres_trail_from_config({"dsn": POSTGRES_DSN, "schema": config["schema"],
                                       "sequence": False})
    try:
        await sink.emit(event(1))
        execute(config["schema"], "INSERT INTO audit_intake (event_id, body, stored)"
                                  " VALUES ('evt_x', '{\"event_id\":\"evt_x\",\"a\":1,"
                                  "\"a\":2}', false)")
        await sink.emit(event(2))
        with pytest.raises(TrailIntakeError, match="duplicate key"):
            await sink.sequence()
        with stored(config["schema"]) as trail:
            assert trail.head().entries == 0 and trail.waiting() == 3
    finally:
        await sink.close()


# -- export, verify and prove ----------------------------------------------------------


async def test_an_export_verifies_and_proves_like_the_file_trail(
        config: dict[str, Any], tmp_path: Path) -> None:
    async with node(config) as manager:
        for n in range(30):
            await manager.add(ALICE, ALICE_SCOPE, f"note {n}")
    with stored(config["schema"]) as trail:
        checkpoint = tree_checkpoint_of([trail], created_at=1_800_000_000.0)
        exported = export_trail(trail, tmp_path / "export", max_file_bytes=4096)
        from_store, event = prove_inclusion([trail], trail_events(config["schema"])[17][
            "event_id"], checkpoint)
        with pytest.raises(ExportError, match="already holds a trail"):
            export_trail(trail, tmp_path / "export")
    assert exported.entries == 60 and len(exported.files) > 1  # rotated
    verification = verify_trail([tmp_path / "export"], [checkpoint])
    assert verification.ok, verification.problem
    assert verification.root == checkpoint.root and verification.head == checkpoint.head
    from_files, same = prove_inclusion([tmp_path / "export"], from_store.event_id, checkpoint)
    assert (from_files, same) == (from_store, event)


def _tamper_cases() -> list[tuple[str, str, int, str]]:
    return [
        ("event", "UPDATE audit_entries SET event = replace(event, '\"outcome\":\"committed\"',"
                  " '\"outcome\":\"deny\"') WHERE seq = 4", 4, "the event was altered"),
        ("hash", f"UPDATE audit_entries SET hash = '{'0' * 64}' WHERE seq = 5", 5,
         "the event was altered"),
        ("removed", "DELETE FROM audit_entries WHERE seq = 7", 8, "7 was due"),
        ("leaf", "UPDATE audit_entries SET leaf = sha256(leaf) WHERE seq = 3", 3,
         "stored Merkle leaf"),
        ("cut", "DELETE FROM audit_entries WHERE seq = 12", 12, "head record says 12"),
        ("frontier", "UPDATE audit_chain SET frontier = sha256(frontier)", 12,
         "malformed"),
        ("genesis", "UPDATE audit_chain SET created_at = created_at + 1", 1,
         "genesis hash does not match"),
    ]


@pytest.mark.parametrize(("what", "statement", "seq", "reason"), _tamper_cases(),
                         ids=[case[0] for case in _tamper_cases()])
async def test_an_altered_row_is_reported_where_it_is(config: dict[str, Any], what: str,
                                                    statement: str, seq: int,
                                                    reason: str) -> None:
    async with node(config) as manager:
        for n in range(6):
            await manager.add(ALICE, ALICE_SCOPE, f"note {n}")
    with stored(config["schema"]) as trail:
        checkpoint = tree_checkpoint_of([trail], created_at=1_800_000_000.0)
        victim = trail_events(config["schema"])[seq - 1]["event_id"]
    execute(config["schema"], statement)
    with stored(config["schema"]) as trail:
        problem = verify_trail([trail]).problem
        assert problem is not None and problem.kind == "broken", what
        assert reason in problem.reason and problem.seq == seq
        if what in ("leaf", "event", "removed"):  # no proof is built of an altered row
            with pytest.raises((TrailProblemError, ProofError)):
                prove_inclusion([trail], victim, checkpoint)


# -- fail closed -----------------------------------------------------------------------


async def test_with_the_trail_database_down_operations_are_refused_never_unrecorded(
        config: dict[str, Any]) -> None:
    proxy = Proxy()
    await proxy.up()
    schema = config["schema"]
    trail = postgres_trail_from_config({"dsn": proxy.dsn, "schema": schema,
                                        "timeout_ms": 1000, "interval_s": 0.05})
    seen = InMemoryEventSink()
    provider = build_native_provider(config, SystemClock())
    acknowledged: list[str] = []
    try:
        async with GovernedMemoryManager(provider, sinks=[trail, seen],
                                         fail_closed=True) as manager:
            acknowledged.append((await manager.add(ALICE, ALICE_SCOPE, "before")).id)
            await proxy.down()
            for attempt in range(3):
                with pytest.raises(AuditUnavailableError):
                    await manager.add(ALICE, ALICE_SCOPE, f"while down {attempt}")
                with pytest.raises(AuditUnavailableError):
                    await manager.get(ALICE, ALICE_SCOPE, acknowledged[0])
            # Refused before the provider saw them: nothing was written.
            assert execute(schema, "SELECT count(*) FROM memory_records") == [(1,)]
            await proxy.up()
            acknowledged.append((await manager.add(ALICE, ALICE_SCOPE, "after")).id)
    finally:
        await proxy.down()
    events = trail_events(schema)
    ids = [item["event_id"] for item in events]
    assert duplicates(ids) == []
    committed = [record for item in events if item["type"] == "memory.write.committed"
                 for record in item["record_ids"]]
    assert committed == acknowledged
    with stored(schema) as stored_trail:
        assert verify_trail([stored_trail]).ok


async def test_a_trail_that_cannot_be_opened_refuses_the_first_operation(
        config: dict[str, Any]) -> None:
    sink = postgres_trail_from_config({"dsn": "postgresql://postgres@127.0.0.1:1/test",
                                       "schema": config["schema"], "timeout_ms": 500})
    provider = build_native_provider(config, SystemClock())
    async with GovernedMemoryManager(provider, sinks=[sink], fail_closed=True) as manager:
        with pytest.raises(AuditUnavailableError, match="postgres trail"):
            await manager.add(ALICE, ALICE_SCOPE, "nowhere to record it")
    assert execute(config["schema"], "SELECT count(*) FROM memory_records") == [(0,)]


# -- configuration ---------------------------------------------------------------------


@pytest.mark.parametrize(("given", "message"), [
    ({}, "needs store"),
    ({"dsn": POSTGRES_DSN, "schema": "Bad-Name"}, "schema"),
    ({"dsn": POSTGRES_DSN, "bogus": 1}, "unknown config key"),
    ({"dsn": POSTGRES_DSN, "batch": 0}, "batch"),
    ({"dsn": POSTGRES_DSN, "event_detail": "none"}, "event_detail"),
    ({"provider": "native", "provider_config": {"backend": "sqlite"}}, "postgres backend"),
    ({"provider": "mem0", "provider_config": {}}, "native provider"),
])
def test_a_config_it_cannot_use_is_refused_naming_the_key(given: dict[str, Any],
                                                          message: str) -> None:
    with pytest.raises(MemoryConfigurationError, match=message):
        parse_trail_config(given)


def test_a_profile_naming_the_provider_store_on_sqlite_is_refused() -> None:
    spec = trail_profile()
    with pytest.raises(ProfileLoadError, match=r"audit\.sinks\.postgres-trail"):
        build_sinks(spec, provider_config_overrides={"backend": "sqlite"})


def test_the_provider_store_resolves_to_the_provider_dsn_and_schema() -> None:
    sink = build_sinks(trail_profile(), provider_config_overrides={
        "dsn": "postgresql://u:secret@db/app", "schema": "tenant_a"})[0]
    assert isinstance(sink, PostgresTrailSink)
    assert (sink.config.schema, sink.config.shares_store) == ("tenant_a", True)
    assert "secret" not in repr(sink.config) and "secret" not in sink.location


def test_a_restored_frontier_extends_the_tree_as_the_one_it_was_saved_from() -> None:
    """What the sequencer keeps in ``audit_chain.frontier`` between batches."""
    leaves = [hashlib.sha256(bytes([n])).digest() for n in range(37)]
    whole = Frontier()
    for at, leaf in enumerate(leaves):
        restored = Frontier.restore(whole.size, whole.state())
        assert restored.root() == whole.root(), at
        whole.append(leaf)
    assert whole.root() == MerkleTree.of(leaves).root()
    with pytest.raises(ValueError):
        Frontier.restore(3, whole.state())
