"""PostgreSQL writers serialise per tenant: what the advisory locks allow and exclude.

Proven by the locks themselves, never by timings: a provider with ``busy_timeout_ms = 0``
tries each lock once, so a write that would have to wait fails at once as unavailable,
and one that needs no lock another unit holds goes through; ``pg_locks`` shows which
units hold (or wait for) which key at the same moment. The multi-process tests
(``test_native_postgres_multiprocess``) show that writers of one tenant in several
processes still lose no update and share no key.
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
from governed_memory import MemoryConflictError, MemoryRecord, MemoryUnavailableError, Scope
from governed_memory.clock import ManualClock
from governed_memory.requests import GetRequest, HistoryRequest, SearchRequest, UpdateRequest
from governed_memory_native import NativeMemoryProvider, build_native_provider
from hypothesis import given, settings
from hypothesis import strategies as st
from native_support import OTHER_TENANT, USER_SCOPE, make_ctx, note
from postgres_support import (
    advisory_locks,
    postgres_config,
    require_postgres,
    require_postgres_package,
)

require_postgres_package()

from governed_memory_native.postgres.backend import PostgresBackend  # noqa: E402
from governed_memory_native.postgres.locks import (  # noqa: E402
    tenant_lock_key,
    writer_lock_key,
)
from governed_memory_native.storage.port import IdempotencyEntry, WriteTransaction  # noqa: E402

ACME, GLOBEX = USER_SCOPE.tenant_id, OTHER_TENANT.tenant_id
DEADLINE_S = 60.0
"""How long a test waits for a lock it expects to see requested before it fails (a
hang guard, not a measurement)."""


async def _started(config: dict[str, Any], clock: ManualClock) -> NativeMemoryProvider:
    provider = build_native_provider(config, clock)
    await provider.start()
    return provider


def _backend(provider: NativeMemoryProvider) -> PostgresBackend:
    backend = provider.backend
    assert isinstance(backend, PostgresBackend)
    return backend


@asynccontextmanager
async def _holding(backend: PostgresBackend, tenant_id: str | None
                   ) -> AsyncIterator[WriteTransaction]:
    """A write unit of ``tenant_id`` (``None``: global) that has taken its locks."""
    async with backend.writing(tenant_id=tenant_id) as tx:
        await tx.records.usage(tenant_id or ACME, None, 0.0)  # its first statement takes them
        yield tx


async def _requested(key: int, mode: str) -> None:
    """Until some transaction waits for ``key`` in ``mode`` (``pg_locks`` is polled: the
    server has no way to announce it)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while (mode, False) not in await asyncio.to_thread(advisory_locks, key):
        assert loop.time() < deadline, f"nobody asked for {mode} on {key}"
        await asyncio.sleep(0.01)


@pytest.fixture
async def pair(tmp_path: Path, clock: ManualClock) -> AsyncIterator[
        tuple[NativeMemoryProvider, NativeMemoryProvider]]:
    """A patient provider (waits for locks) and an impatient one (tries them once) on
    one schema."""
    config = postgres_config(tmp_path, busy_timeout_ms=30_000)
    patient = await _started(config, clock)
    impatient = await _started({**config, "busy_timeout_ms": 0}, clock)
    try:
        yield patient, impatient
    finally:
        await impatient.close()
        await patient.close()


async def test_two_tenants_hold_their_writer_locks_at_the_same_time(
        pair: tuple[NativeMemoryProvider, NativeMemoryProvider], clock: ManualClock) -> None:
    patient, impatient = pair
    backend = _backend(patient)
    schema = backend.schema
    async with _holding(backend, ACME):
        # another tenant's whole add commits meanwhile, without waiting for anything
        added = await impatient.add(note("globex tea", scope=OTHER_TENANT),
                                    make_ctx(clock, GLOBEX))
        async with _holding(backend, GLOBEX):
            # both units hold the schema key shared and their own tenant key exclusively
            assert advisory_locks(writer_lock_key(schema)) == [("ShareLock", True)] * 2
            assert advisory_locks(tenant_lock_key(schema, ACME)) == [("ExclusiveLock", True)]
            assert advisory_locks(tenant_lock_key(schema, GLOBEX)) == [
                ("ExclusiveLock", True)]
        # the held tenant's writers are excluded: trying its lock fails at once
        with pytest.raises(MemoryUnavailableError):
            await impatient.add(note("acme tea"), make_ctx(clock))
    assert (await impatient.get(GetRequest(scope=OTHER_TENANT, record_id=added.id),
                                make_ctx(clock, GLOBEX))) == added
    assert advisory_locks(writer_lock_key(schema)) == []  # released at COMMIT


@pytest.mark.parametrize(("holder", "contender", "excluded"), [
    (ACME, ACME, True),
    (ACME, GLOBEX, False),
    (ACME, None, True),
    (None, ACME, True),
    (None, None, True),
])
async def test_which_write_units_exclude_each_other(
        pair: tuple[NativeMemoryProvider, NativeMemoryProvider], holder: str | None,
        contender: str | None, excluded: bool) -> None:
    """Same tenant: excluded; other tenant: not; a global unit (``None``, maintenance
    that may touch any tenant) excludes and is excluded by every writer."""
    patient, impatient = pair
    async with _holding(_backend(patient), holder):
        attempt = _holding(_backend(impatient), contender)
        if excluded:
            with pytest.raises(MemoryUnavailableError):
                async with attempt:
                    pass
        else:
            async with attempt:
                pass


async def test_a_global_unit_waits_for_tenant_writers_and_they_wait_for_it(
        pair: tuple[NativeMemoryProvider, NativeMemoryProvider], clock: ManualClock) -> None:
    patient, _ = pair
    backend = _backend(patient)
    schema_key = writer_lock_key(backend.schema)
    tenant = _holding(backend, ACME)
    await tenant.__aenter__()
    try:
        global_unit = asyncio.create_task(backend.run_write(
            lambda tx: tx.jobs.requeue_dead(None, 0.0)))
        await _requested(schema_key, "ExclusiveLock")  # queued behind the tenant writer
        assert not global_unit.done()
    finally:
        await tenant.__aexit__(None, None, None)
    assert await global_unit == 0
    async with _holding(backend, None):
        add = asyncio.create_task(patient.add(note("after maintenance"), make_ctx(clock)))
        await _requested(schema_key, "ShareLock")  # the tenant writer waits for it
        assert not add.done()
    assert (await add).content == "after maintenance"


async def test_writers_of_one_tenant_queue_on_its_key(
        pair: tuple[NativeMemoryProvider, NativeMemoryProvider], clock: ManualClock) -> None:
    patient, _ = pair
    backend = _backend(patient)
    current = await patient.add(note("count 0"), make_ctx(clock))
    async with _holding(backend, ACME):
        update = asyncio.create_task(patient.update(UpdateRequest(
            scope=USER_SCOPE, record_id=current.id, content="count 1",
            expected_revision=current.revision), make_ctx(clock)))
        await _requested(tenant_lock_key(backend.schema, ACME), "ExclusiveLock")
        # it holds the schema key shared meanwhile: only its own tenant's key blocks it
        assert ("ShareLock", True) in advisory_locks(writer_lock_key(backend.schema))
    assert (await update).content == "count 1"


async def test_reads_and_snapshots_take_no_writer_lock(
        pair: tuple[NativeMemoryProvider, NativeMemoryProvider], clock: ManualClock) -> None:
    patient, impatient = pair
    record = await patient.add(note("green tea"), make_ctx(clock))
    async with _holding(_backend(patient), None):  # every writer is excluded
        assert await impatient.get(GetRequest(scope=USER_SCOPE, record_id=record.id),
                                   make_ctx(clock)) == record
        found = await impatient.search(SearchRequest(scopes=(USER_SCOPE,), query="tea"),
                                       make_ctx(clock))
        assert [hit.record.id for hit in found.hits] == [record.id]
        await impatient.flush_snapshots()  # stored lock-free, so it does not wait
        with pytest.raises(MemoryUnavailableError):
            await impatient.add(note("black tea"), make_ctx(clock))


# -- round trips ----------------------------------------------------------------------------


async def test_round_trips_per_operation(tmp_path: Path, clock: ManualClock) -> None:
    """What the hot paths send: an add travels in one round trip (BEGIN, the locks, the
    record with its index rows, its version and COMMIT together), a get is one
    autocommit statement, an update two (the read with BEGIN and the locks; the guarded
    compare-and-set, re-index, version and COMMIT together: schema v12)."""
    provider = await _started(postgres_config(tmp_path), clock)
    backend = _backend(provider)
    try:
        first = await provider.add(note("green tea"), make_ctx(clock))

        async def trips(call: Any) -> int:
            await backend.settled()  # no earlier read's COMMIT lands in the count
            before = backend.stats.round_trips
            await call
            return backend.stats.round_trips - before

        assert await trips(provider.add(note("black tea"), make_ctx(clock))) == 1
        assert await trips(provider.get(GetRequest(scope=USER_SCOPE, record_id=first.id),
                                        make_ctx(clock))) == 1
        assert await trips(provider.update(UpdateRequest(
            scope=USER_SCOPE, record_id=first.id, content="oolong tea",
            expected_revision=first.revision), make_ctx(clock))) == 2
        assert backend.stats.point_retries == 0
        assert backend.stats.rollbacks == 0
    finally:
        await provider.close()


async def test_a_point_read_that_needs_two_statements_sees_one_snapshot(
        tmp_path: Path, clock: ManualClock) -> None:
    """A point read runs as one autocommit statement; one asking for a second is run
    again in a REPEATABLE READ transaction, so a write committed between its two
    statements is seen by neither."""
    config = postgres_config(tmp_path)
    provider = await _started(config, clock)
    writer = await _started(config, clock)
    backend = _backend(provider)
    try:
        record = await provider.add(note("count 0"), make_ctx(clock))
        runs = 0

        async def body(tx: Any) -> tuple[MemoryRecord | None, MemoryRecord | None]:
            nonlocal runs
            runs += 1
            before = await tx.records.get(USER_SCOPE.scope_hash, record.id)
            latest = before if runs == 1 else await tx.records.get(USER_SCOPE.scope_hash,
                                                                record.id)
            assert latest is not None
            await writer.update(UpdateRequest(  # another connection commits meanwhile
                scope=USER_SCOPE, record_id=record.id, content=f"count {runs}",
                expected_revision=latest.revision), make_ctx(clock))
            return before, await tx.records.get(USER_SCOPE.scope_hash, record.id)

        before, after = await backend.run_read(body, point=True)
        assert runs == 2 and backend.stats.point_retries == 1
        assert before is not None and before == after  # one snapshot for both
        assert before.content == "count 1"  # the first run's write, committed before
    finally:
        await writer.close()
        await provider.close()


async def test_a_queued_statement_that_fails_fails_the_unit_and_writes_nothing(
        tmp_path: Path, clock: ManualClock) -> None:
    """Statements whose results nobody reads go with the next round trip; if one fails
    (a key taken, past the provider's own check), the unit fails with a typed error and
    none of its statements, queued before or after, stays."""
    provider = await _started(postgres_config(tmp_path), clock)
    backend = _backend(provider)
    try:
        held = await provider.add(note("holder", key="k"), make_ctx(clock))
        rival = await provider.add(note("rival"), make_ctx(clock))
        entry = IdempotencyEntry(scope_hash=USER_SCOPE.scope_hash, operation="add",
                                 key="idem", fingerprint="f", record_id="r", tenant_id=ACME,
                                 user_id="alice", created_at=0.0)
        clash = attrs.evolve(rival, id="rec_clash", key="k")
        with pytest.raises(MemoryConflictError):
            async with backend.writing(tenant_id=ACME) as tx:
                await tx.idempotency.put(entry)
                await tx.records.insert(clash)
                await tx.idempotency.put(attrs.evolve(entry, key="idem2"))
        async with backend.reading() as read:
            assert await read.idempotency.get(USER_SCOPE.scope_hash, "add", "idem") is None
            assert await read.idempotency.get(USER_SCOPE.scope_hash, "add", "idem2") is None
            assert await read.records.get(USER_SCOPE.scope_hash, "rec_clash") is None
            assert await read.records.by_key(USER_SCOPE.scope_hash, "k") == held
        assert backend.stats.rollbacks == 1
    finally:
        await provider.close()


# -- a property: concurrent writers of several tenants, with global units among them ------

_PROPERTY_DIR = Path(tempfile.gettempdir()) / "gm-tenant-writers-property"
"""One schema for every example (each example writes scopes of its own), so an example
does not pay a migration."""
_examples = itertools.count()

_steps = st.lists(st.tuples(st.integers(0, 2), st.sampled_from(["increment", "claim",
                                                                 "global"])),
                  min_size=1, max_size=18)


async def _concurrent_plan(steps: list[tuple[int, str]], run: int) -> None:
    clock = ManualClock()
    provider = await _started(postgres_config(_PROPERTY_DIR, busy_timeout_ms=30_000), clock)
    backend = _backend(provider)
    try:
        scopes = [Scope(f"t{run}-{tenant}", user_id="u") for tenant in range(3)]
        counters = [await provider.add(note("count 0", scope=scope),
                                       make_ctx(clock, scope.tenant_id))
                    for scope in scopes]

        async def increment(tenant: int) -> None:
            scope = scopes[tenant]
            while True:  # compare-and-set, retried on a stale revision
                current = await provider.get(GetRequest(scope=scope,
                                                        record_id=counters[tenant].id),
                                             make_ctx(clock, scope.tenant_id))
                try:
                    await provider.update(UpdateRequest(
                        scope=scope, record_id=current.id,
                        content=f"count {int(current.content.split()[1]) + 1}",
                        expected_revision=current.revision), make_ctx(clock, scope.tenant_id))
                    return
                except MemoryConflictError:
                    continue

        async def claim(tenant: int) -> bool:
            scope = scopes[tenant]
            try:
                await provider.add(note("claimed", scope=scope, key="the-key"),
                                   make_ctx(clock, scope.tenant_id))
                return True
            except MemoryConflictError:
                return False

        async def step(tenant: int, kind: str) -> bool | None:
            if kind == "increment":
                await increment(tenant)
            elif kind == "claim":
                return await claim(tenant)
            else:  # maintenance that may touch any tenant: runs alone
                await backend.run_write(lambda tx: tx.jobs.requeue_dead(None, 0.0))
            return None

        outcomes = await asyncio.gather(*(step(tenant, kind) for tenant, kind in steps))
        for tenant, scope in enumerate(scopes):
            increments = sum(1 for t, kind in steps if t == tenant and kind == "increment")
            final = await provider.get(GetRequest(scope=scope, record_id=counters[tenant].id),
                                       make_ctx(clock, scope.tenant_id))
            assert final.content == f"count {increments}"  # no update lost
            assert final.version == increments + 1  # one version per applied update
            history = await provider.history(
                HistoryRequest(scope=scope, record_id=final.id), make_ctx(clock, scope.tenant_id))
            assert [v.record.content for v in history] == [
                f"count {n}" for n in range(increments + 1)]
            claims = [won for (t, kind), won in zip(steps, outcomes, strict=True)
                      if t == tenant and kind == "claim"]
            assert claims.count(True) == (1 if claims else 0)  # one owner per key
        assert advisory_locks(writer_lock_key(backend.schema)) == []
    finally:
        await provider.close()


@settings(max_examples=20, deadline=None)
@given(steps=_steps)
def test_concurrent_writers_of_several_tenants_lose_nothing(
        steps: list[tuple[int, str]]) -> None:
    """Compare-and-set increments and key claims of three tenants, and global units,
    all at once through one pool: per tenant no update is lost and a key has one owner;
    every lock is released; nothing deadlocks (the schema key always comes first)."""
    require_postgres()
    asyncio.run(_concurrent_plan(steps, next(_examples)))
