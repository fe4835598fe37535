"""The store-wide purge of expired records (``purge_expired_all``) on every backend.

What it promises: every expired record of every scope goes, earliest expiry first, in
bounded batches that each are a governed operation with content-free events; nothing
unexpired goes; a record is counted once even when several workers purge at once (in
this process, and in several processes over one SQLite file or one PostgreSQL schema);
and the maintenance round runs it after the snapshots, until nothing is left or its cap.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from governed_memory import Principal, Scope
from governed_memory.capabilities import Capabilities
from governed_memory.clock import ManualClock
from governed_memory.errors import (
    MemoryCapabilityUnsupportedError,
    MemoryNotFoundError,
    MemoryScopeError,
    MemoryValidationError,
)
from governed_memory.events import InMemoryEventSink
from governed_memory.maintenance import PurgeExpiredAllRequest
from governed_memory.manager import MAINTENANCE_PRINCIPAL, GovernedMemoryManager
from governed_memory.principal import PrincipalKind
from governed_memory.provider_kit import NoOptionalFeatures
from governed_memory.records import MemoryRecord
from governed_memory.requests import AddRequest, DeleteRequest, HistoryRequest
from governed_memory_native import NativeMemoryProvider, build_native_provider
from governed_memory_native.storage.port import ReadTransaction
from native_support import build, config_for, make_ctx, through_port

SCOPES = (
    Scope(tenant_id="acme", user_id="alice"),
    Scope(tenant_id="acme", user_id="bob"),
    Scope(tenant_id="acme"),
    Scope(tenant_id="globex", user_id="alice"),
    Scope(tenant_id="initech", project_id="p1", user_id="carol"),
)


async def _add(provider: NativeMemoryProvider, clock: ManualClock, scope: Scope, content: str,
               **fields: Any) -> MemoryRecord:
    return await through_port(provider, AddRequest(scope=scope, content=content, **fields),
                              make_ctx(clock, scope.tenant_id))


async def _stored(provider: NativeMemoryProvider, record: MemoryRecord) -> bool:
    """Whether storage still holds the record, in any status (expired included)."""

    async def unit(tx: ReadTransaction) -> MemoryRecord | None:
        return await tx.records.get(record.scope_hash, record.id)

    return await provider.backend.run_read(unit) is not None


async def _populate(provider: NativeMemoryProvider,
                    clock: ManualClock) -> tuple[list[MemoryRecord], list[MemoryRecord]]:
    """Three expired records in each scope (their expiries interleaved across scopes, so
    id order is not expiry order), one that expires later and one that never does; one
    expired record is a soft-deleted tombstone. Returns (expired, kept), the clock past
    every expiry of the first."""
    now = clock.now()
    expired, kept = [], []
    for n in range(3):
        for i, scope in enumerate(reversed(SCOPES)):
            expired.append(await _add(provider, clock, scope, f"short-lived {n} {i}",
                                      expires_at=now + 100 - 10 * n - i,
                                      idempotency_key=f"idem-{n}-{i}"))
    for scope in SCOPES:
        kept.append(await _add(provider, clock, scope, "kept for a while",
                               expires_at=now + 10_000))
        kept.append(await _add(provider, clock, scope, "kept for good"))
    tombstone = expired[0]
    await through_port(provider, DeleteRequest(scope=tombstone.scope, record_id=tombstone.id),
                       make_ctx(clock, tombstone.scope.tenant_id))
    clock.advance(1_000)
    return expired, kept


def _manager(provider: NativeMemoryProvider, clock: ManualClock,
             sink: InMemoryEventSink | None = None) -> GovernedMemoryManager:
    return GovernedMemoryManager(provider, clock=clock, sinks=[sink] if sink else ())


async def test_only_expired_records_of_every_scope_go_earliest_first(
        provider: NativeMemoryProvider, clock: ManualClock) -> None:
    expired, kept = await _populate(provider, clock)
    sink = InMemoryEventSink()
    manager = _manager(provider, clock, sink)
    earliest = sorted(expired, key=lambda record: (record.expires_at, record.id))

    first = await manager.purge_expired_all(MAINTENANCE_PRINCIPAL, limit=4)
    assert (first.records, first.more) == (4, True)
    for record in earliest:
        assert await _stored(provider, record) == (record not in earliest[:4]), record.content
    removed = first.records
    while (batch := await manager.purge_expired_all(MAINTENANCE_PRINCIPAL, limit=4)).more:
        removed += batch.records
    removed += batch.records
    assert removed == len(expired)
    assert [await _stored(provider, record) for record in expired] == [False] * len(expired)
    assert [await _stored(provider, record) for record in kept] == [True] * len(kept)
    assert (await manager.purge_expired_all(MAINTENANCE_PRINCIPAL)).records == 0

    # The same erasure as the per-scope purge: the history goes, and so do the
    # idempotency entries (a retry after expiry is a new write, not a replay).
    with pytest.raises(MemoryNotFoundError):
        await through_port(provider, HistoryRequest(scope=expired[1].scope,
                                                    record_id=expired[1].id),
                           make_ctx(clock, expired[1].scope.tenant_id))
    again = await _add(provider, clock, expired[1].scope, expired[1].content,
                       idempotency_key="idem-0-1")
    assert again.id != expired[1].id

    # One event pair per batch, in the operator's tenant, naming counts and no scope.
    done = [event for event in sink.events if event.type == "memory.maintenance.completed"]
    assert [event.operation for event in done] == ["purge_expired_all"] * len(done)
    assert sum(event.count or 0 for event in done) == len(expired)
    assert {event.tenant_id for event in sink.events} == {MAINTENANCE_PRINCIPAL.tenant_id}
    assert all(not event.scope_hashes and not event.record_ids for event in done)
    assert "expired records removed 4" in done[0].reasons
    assert not any("short-lived" in json.dumps(event.reasons) for event in sink.events)


async def test_only_an_operator_may_purge_every_scope(provider: NativeMemoryProvider,
                                                      clock: ManualClock) -> None:
    expired, _ = await _populate(provider, clock)
    manager = _manager(provider, clock)
    tenant_admin_of_a_user = Principal("alice-admin", PrincipalKind.SERVICE, "acme",
                                       user_id="alice", permissions=frozenset({"memory:admin"}))
    writer = Principal("svc", PrincipalKind.SERVICE, "acme",
                       permissions=frozenset({"memory:write", "memory:delete"}))
    user = Principal("alice", PrincipalKind.USER, "acme", user_id="alice",
                     permissions=frozenset({"memory:admin"}))
    for principal in (tenant_admin_of_a_user, writer, user):
        with pytest.raises(MemoryScopeError):
            await manager.purge_expired_all(principal)
    with pytest.raises(MemoryValidationError) as refused:
        await manager.purge_expired_all(MAINTENANCE_PRINCIPAL, limit=0)
    assert refused.value.field == "limit"
    assert all([await _stored(provider, record) for record in expired])


async def test_the_maintenance_round_purges_in_batches_up_to_its_cap(
        provider: NativeMemoryProvider, clock: ManualClock) -> None:
    expired, kept = await _populate(provider, clock)
    manager = _manager(provider, clock)
    report = await manager.maintain(MAINTENANCE_PRINCIPAL, expired_batch=2, max_expired=5)
    assert (report.expired_records, report.expired_batches, report.capped) == (5, 3, True)
    assert report.skipped == ()
    report = await manager.maintain(MAINTENANCE_PRINCIPAL, expired_batch=2)
    assert (report.expired_records, report.capped) == (len(expired) - 5, False)
    assert [await _stored(provider, record) for record in kept] == [True] * len(kept)
    await manager._maintenance_round()  # the interval's round: nothing left, no error
    nothing = await manager.maintain(MAINTENANCE_PRINCIPAL, max_expired=0)
    assert (nothing.expired_records, nothing.expired_batches) == (0, 0)
    for wrong in ({"max_expired": -1}, {"expired_batch": 0}):
        with pytest.raises(MemoryValidationError) as refused:
            await manager.maintain(MAINTENANCE_PRINCIPAL, **wrong)
        assert refused.value.field in wrong


class _Plain(NoOptionalFeatures):
    """A provider that offers neither retrieval snapshots nor the store-wide purge."""

    name = "plain"

    def capabilities(self) -> Capabilities:
        return Capabilities(durable=False, transactional=False)

    async def start(self) -> None: ...

    async def close(self) -> None: ...


async def test_a_provider_without_it_is_skipped_with_a_reason(
        caplog: pytest.LogCaptureFixture) -> None:
    manager = GovernedMemoryManager(_Plain())  # type: ignore[arg-type]
    with pytest.raises(MemoryCapabilityUnsupportedError, match="purge_expired_all"):
        await manager.purge_expired_all(MAINTENANCE_PRINCIPAL)
    with caplog.at_level(logging.INFO, logger="governed_memory.store_operations"):
        report = await manager.maintain(MAINTENANCE_PRINCIPAL)
    assert [operation for operation, _ in report.skipped] == ["purge_snapshots",
                                                              "purge_expired_all"]
    assert "purge_expired_all skipped" in caplog.text
    with pytest.raises(MemoryCapabilityUnsupportedError):  # ends the interval's loop
        await manager._maintenance_round()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_concurrent_purges_over_one_store_count_each_record_once(
        backend: str, tmp_path: Path, clock: ManualClock) -> None:
    """Three providers (each its own connections, as three processes would have) purge
    one store at once, in small batches: every expired record is counted exactly once."""
    providers = [build(backend, tmp_path, clock) for _ in range(3)]
    for each in providers:
        await each.start()
    try:
        expired, kept = await _populate(providers[0], clock)

        async def drain(provider: NativeMemoryProvider) -> int:
            total = 0
            while True:
                batch = await through_port(provider, PurgeExpiredAllRequest(limit=2),
                                           make_ctx(clock, "operator"))
                total += batch.records
                if not batch.more:
                    return total

        counts = await asyncio.gather(*(drain(each) for each in providers))
        assert sum(counts) == len(expired)
        assert [await _stored(providers[0], record) for record in kept] == [True] * len(kept)
    finally:
        for each in providers:
            await each.close()


_WORKER = textwrap.dedent("""
    import asyncio, json, sys
    sys.path[:0] = [{tests!r}, {native!r}]
    from governed_memory.clock import ManualClock
    from governed_memory.manager import MAINTENANCE_PRINCIPAL, GovernedMemoryManager
    from governed_memory_native import build_native_provider

    async def main():
        clock = ManualClock({now!r})
        manager = GovernedMemoryManager(build_native_provider(json.loads({config!r}), clock),
                                        clock=clock)
        async with manager:
            print("ready", flush=True)
            sys.stdin.readline()  # everyone starts together
            removed = 0
            while True:
                batch = await manager.purge_expired_all(MAINTENANCE_PRINCIPAL, limit=3)
                removed += batch.records
                if not batch.more:
                    break
        print(json.dumps({{"removed": removed}}), flush=True)

    asyncio.run(main())
""")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_worker_processes_purging_at_once_count_each_record_once(
        backend: str, tmp_path: Path, clock: ManualClock) -> None:
    config = config_for(backend, tmp_path)
    provider = build_native_provider(config, clock)
    await provider.start()
    try:
        more = [await _add(provider, clock, SCOPES[n % len(SCOPES)], f"one of many {n}",
                           expires_at=clock.now() + 1 + n % 7) for n in range(45)]
        expired, kept = await _populate(provider, clock)
        expired += more
    finally:
        await provider.close()
    script = _WORKER.format(tests=str(Path(__file__).parents[1]),
                            native=str(Path(__file__).parent), now=clock.now(),
                            config=json.dumps(config))
    workers = [await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE) for _ in range(3)]
    for worker in workers:
        assert worker.stdout is not None
        line = await asyncio.wait_for(worker.stdout.readline(), timeout=60)
        assert line.strip() == b"ready", (await worker.stderr.read()).decode()[-2000:]  # type: ignore[union-attr]
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write(b"go\n")
        await worker.stdin.drain()
    results = [await asyncio.wait_for(worker.communicate(), timeout=120) for worker in workers]
    for worker, (_, err) in zip(workers, results, strict=True):
        assert worker.returncode == 0, err.decode()[-2000:]
    removed = [json.loads(out.decode().strip().splitlines()[-1])["removed"]
               for out, _ in results]
    assert sum(removed) == len(expired)
    reopened = build_native_provider(config, clock)
    await reopened.start()
    try:
        assert [await _stored(reopened, record) for record in expired] == [False] * len(expired)
        assert [await _stored(reopened, record) for record in kept] == [True] * len(kept)
    finally:
        await reopened.close()


def _before_the_expiry_index(migrations: tuple[Any, ...]) -> tuple[Any, ...]:
    """The migrations of a database written before ``memory_records_expiry`` existed."""
    (index,) = [m for m in migrations
                if any("memory_records_expiry " in sql for sql in m.statements)]
    return tuple(m for m in migrations if m.version < index.version)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_database_from_before_the_expiry_index_is_upgraded_in_place(
        monkeypatch: pytest.MonkeyPatch, backend: str, tmp_path: Path,
        clock: ManualClock) -> None:
    config = config_for(backend, tmp_path)
    with monkeypatch.context() as old:
        if backend == "sqlite":
            from governed_memory_native.sqlite import connection as sqlite_setup

            older = _before_the_expiry_index(sqlite_setup.MIGRATIONS)
            old.setattr(sqlite_setup, "MIGRATIONS", older)
            old.setattr(sqlite_setup, "LATEST_VERSION", older[-1].version)
        else:
            from governed_memory_native.postgres import schema as postgres_schema

            old.setattr(postgres_schema, "MIGRATIONS",
                        _before_the_expiry_index(postgres_schema.MIGRATIONS))
        provider = build_native_provider(config, clock)
        await provider.start()
        try:
            expired, kept = await _populate(provider, clock)
            assert not _has_expiry_index(provider, config)
        finally:
            await provider.close()
    upgraded = build_native_provider(config, clock)
    await upgraded.start()
    try:
        assert _has_expiry_index(upgraded, config)
        purged = await _manager(upgraded, clock).maintain(MAINTENANCE_PRINCIPAL)
        assert purged.expired_records == len(expired)
        assert [await _stored(upgraded, record) for record in kept] == [True] * len(kept)
    finally:
        await upgraded.close()


def _has_expiry_index(provider: NativeMemoryProvider, config: dict[str, Any]) -> bool:
    if config["backend"] == "sqlite":
        import sqlite3

        with sqlite3.connect(config["path"]) as conn:
            plan = " ".join(str(row[-1]) for row in conn.execute(
                "EXPLAIN QUERY PLAN SELECT id, tenant_id FROM memory_records"
                " WHERE expires_at IS NOT NULL AND expires_at <= 1"
                " ORDER BY expires_at, id LIMIT 5"))
        return "memory_records_expiry" in plan  # and the purge's query uses it
    import psycopg
    from postgres_support import POSTGRES_DSN

    schema = provider.backend.schema  # type: ignore[attr-defined]
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
        row = conn.execute("SELECT to_regclass(%s)",
                           (f"{schema}.memory_records_expiry",)).fetchone()
    return row is not None and row[0] is not None
