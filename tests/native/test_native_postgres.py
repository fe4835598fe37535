"""What only the PostgreSQL backend has: its config, migrations under concurrent start,
the writer locks shared by several providers (per tenant and global: see also
test_native_postgres_tenant_writers), erasure that leaves no row behind, and refusals
that name the problem without leaking the dsn.

Everything else the backend promises is proven by the backend-parametrized native tests
and the conformance suite, which run on PostgreSQL too.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from governed_memory import MemoryConflictError, MemoryUnavailableError
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryConfigurationError
from governed_memory.indexing import IndexJob, JobAction, JobState
from governed_memory.requests import DeleteRequest, DeleteUserRequest, SearchRequest
from governed_memory_native import NativeMemoryProvider, build_native_provider, parse_config
from governed_memory_native.config import POSTGRES_DSN_ENV, BackendKind
from governed_memory_native.retrieval.tokens import words
from native_support import OTHER_USER, USER_SCOPE, make_ctx, note
from postgres_support import (
    POSTGRES_DSN,
    postgres_config,
    require_postgres_package,
    schema_for,
)

require_postgres_package()

import psycopg  # noqa: E402
from governed_memory_native.postgres.backend import PostgresBackend  # noqa: E402
from governed_memory_native.postgres.migrating import MIGRATIONS_TABLE  # noqa: E402
from governed_memory_native.postgres.schema import LATEST_VERSION  # noqa: E402

MARKER = "zzqxjpgresidue"
STEM = words(MARKER)[0]  # the term the index stores: "zzqxjpgresidu"


def _sql(schema: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(POSTGRES_DSN, autocommit=True,
                         options=f"-c search_path={schema}") as conn:
        cursor = conn.execute(query, params or None)  # type: ignore[call-overload]
        return list(cursor.fetchall()) if cursor.description else []


async def _started(config: dict[str, Any], clock: ManualClock) -> NativeMemoryProvider:
    provider = build_native_provider(config, clock)
    await provider.start()
    return provider


# -- config (no server needed) -------------------------------------------------------------


def test_config_takes_the_dsn_from_the_environment_and_hides_it() -> None:
    secret = "postgresql://u:hunter2@db/x"
    config = parse_config({"backend": "postgres"}, environ={POSTGRES_DSN_ENV: secret})
    assert config.backend is BackendKind.POSTGRES and config.dsn == secret
    assert config.schema == "governed_memory" and config.path is None
    assert "hunter2" not in repr(config)
    explicit = parse_config({"backend": "postgres", "dsn": "postgresql:///y", "schema": "gm2",
                             "pool_min_size": 0, "pool_max_size": 3}, environ={})
    assert (explicit.dsn, explicit.schema, explicit.pool_min_size,
            explicit.pool_max_size) == ("postgresql:///y", "gm2", 0, 3)


@pytest.mark.parametrize(("raw", "field"), [
    ({"backend": "postgres"}, "dsn"),
    ({"backend": "postgres", "dsn": ""}, "dsn"),
    ({"backend": "postgres", "dsn": 5}, "dsn"),
    ({"backend": "postgres", "dsn": "x", "path": "/tmp/m.db"}, "path"),
    ({"backend": "postgres", "dsn": "x", "schema": "Bad-Name"}, "schema"),
    ({"backend": "postgres", "dsn": "x", "schema": "pg_mine"}, "schema"),
    ({"backend": "postgres", "dsn": "x", "pool_max_size": 0}, "pool_max_size"),
    ({"backend": "postgres", "dsn": "x", "pool_min_size": True}, "pool_min_size"),
    ({"backend": "postgres", "dsn": "x", "pool_min_size": 5, "pool_max_size": 2},
     "pool_min_size"),
    ({"backend": "sqlite", "dsn": "x"}, "dsn"),
    ({"backend": "memory", "pool_max_size": 3}, "pool_max_size"),
    ({"backend": "postgress"}, "backend"),
])
def test_bad_postgres_config_names_the_key(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(MemoryConfigurationError) as caught:
        parse_config(raw, environ={})
    assert str(caught.value).startswith(f"{field}:")


def test_factory_builds_a_postgres_backend_without_io(clock: ManualClock) -> None:
    provider = build_native_provider(
        {"backend": "postgres", "dsn": "postgresql://nobody@127.0.0.1:1/none"}, clock)
    assert isinstance(provider.backend, PostgresBackend)
    caps = provider.capabilities()
    assert caps.durable and caps.transactional and caps.multi_process and caps.event_outbox


# -- against the server --------------------------------------------------------------------


async def test_unreachable_server_is_unavailable_and_leaks_no_dsn(clock: ManualClock) -> None:
    provider = build_native_provider(
        {"backend": "postgres", "dsn": "postgresql://someone:hunter2@127.0.0.1:1/none",
         "busy_timeout_ms": 200}, clock)
    with pytest.raises(MemoryUnavailableError) as caught:
        await provider.start()
    assert "hunter2" not in str(caught.value)
    assert not (await provider.health()).ok


async def test_concurrent_starts_migrate_once(tmp_path: Path, clock: ManualClock) -> None:
    config = postgres_config(tmp_path)
    providers = [build_native_provider(config, clock) for _ in range(5)]
    await asyncio.gather(*(provider.start() for provider in providers))
    try:
        rows = _sql(config["schema"], f"SELECT version FROM {MIGRATIONS_TABLE} ORDER BY 1")
        assert [row[0] for row in rows] == list(range(1, LATEST_VERSION + 1))
        health = await providers[0].health()
        assert health.ok and f"schema v{LATEST_VERSION}," in health.detail
    finally:
        for provider in providers:
            await provider.close()


async def test_a_newer_schema_is_refused(tmp_path: Path, clock: ManualClock) -> None:
    config = postgres_config(tmp_path)
    provider = await _started(config, clock)
    await provider.close()
    _sql(config["schema"], f"INSERT INTO {MIGRATIONS_TABLE} VALUES (%s, 'future', 0)",
         LATEST_VERSION + 1)
    with pytest.raises(MemoryConfigurationError, match="newer than this code"):
        await _started(config, clock)


async def test_two_schemas_in_one_database_are_separate(tmp_path: Path,
                                                         clock: ManualClock) -> None:
    first = await _started(postgres_config(tmp_path / "a"), clock)
    second = await _started(postgres_config(tmp_path / "b"), clock)
    try:
        await first.add(note("green tea"), make_ctx(clock))
        hits = await second.search(SearchRequest(scopes=(USER_SCOPE,), query="tea"),
                                   make_ctx(clock))
        assert hits.hits == ()
    finally:
        await first.close()
        await second.close()


async def test_providers_sharing_a_schema_never_both_take_a_key(tmp_path: Path,
                                                                clock: ManualClock) -> None:
    """Several pools, one schema: the tenant's writer lock makes key ownership and
    idempotency hold across them, as it does across processes."""
    config = postgres_config(tmp_path)
    providers = [await _started(config, clock) for _ in range(4)]
    try:
        outcomes = await asyncio.gather(
            *(provider.add(note(f"from {n}", key="shared"), make_ctx(clock))
              for n, provider in enumerate(providers)),
            return_exceptions=True)
        assert sum(not isinstance(o, BaseException) for o in outcomes) == 1
        assert all(isinstance(o, MemoryConflictError) for o in outcomes
                   if isinstance(o, BaseException))
        replays = await asyncio.gather(
            *(provider.add(note("once", idempotency_key="idem"), make_ctx(clock))
              for provider in providers))
        assert len({record.id for record in replays}) == 1
    finally:
        for provider in providers:
            await provider.close()


async def test_a_held_writer_lock_times_out_as_unavailable(tmp_path: Path,
                                                           clock: ManualClock) -> None:
    config = postgres_config(tmp_path, busy_timeout_ms=150)
    provider = await _started(config, clock)
    backend = provider.backend
    assert isinstance(backend, PostgresBackend)
    try:
        async with backend.writing() as tx:
            await tx.records.usage("acme", None, 0.0)  # its first statement takes the global lock
            with pytest.raises(MemoryUnavailableError):
                await provider.add(note(), make_ctx(clock))
        await provider.add(note(), make_ctx(clock))  # released at the end of the transaction
        impatient = await _started({**config, "busy_timeout_ms": 0}, clock)
        try:
            async with backend.writing() as tx:
                await tx.records.usage("acme", None, 0.0)
                with pytest.raises(MemoryUnavailableError):
                    await impatient.add(note(), make_ctx(clock))
        finally:
            await impatient.close()
    finally:
        await provider.close()


async def test_erasure_leaves_no_row_that_names_the_record(tmp_path: Path,
                                                           clock: ManualClock) -> None:
    config = postgres_config(tmp_path)
    schema = config["schema"]
    provider = await _started(config, clock)
    try:
        kept = await provider.add(note("green tea", scope=OTHER_USER), make_ctx(clock))
        doomed = await provider.add(note(f"{MARKER} secret", key="k", idempotency_key="i"),
                                    make_ctx(clock))
        other = await provider.add(note(f"{MARKER} again"), make_ctx(clock))
        await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=doomed.id, hard=True),
                              make_ctx(clock))
        await provider.delete_user(DeleteUserRequest(tenant_id="acme", user_id="alice"),
                                   make_ctx(clock))
        for table in ("memory_records", "memory_versions", "memory_idempotency",
                      "lexical_postings", "lexical_terms", "event_outbox"):
            rows = _sql(schema, f"SELECT t::text FROM {table} AS t")
            text = " ".join(row[0] for row in rows)
            assert MARKER not in text and MARKER.encode().hex() not in text, table
            assert STEM not in text, table
            assert doomed.id not in text and other.id not in text, table
        assert _sql(schema, "SELECT count(*) FROM memory_records WHERE id = ANY(%s)",
                    [doomed.id, other.id]) == [(0,)]
        for table in ("lexical_postings", "lexical_terms"):
            assert _sql(schema, f"SELECT count(*) FROM {table} WHERE term = %s",
                        STEM) == [(0,)], table
        # only the kept record of the other user is still counted, in its own scope
        assert _sql(schema, "SELECT count(*), sum(documents) FROM lexical_scopes") == [(1, 1)]
        assert _sql(schema, "SELECT count(*) FROM lexical_docs") == [(1,)]
        assert _sql(schema, "SELECT id FROM memory_records") == [(kept.id,)]
    finally:
        await provider.close()


def test_schema_names_are_private_per_directory(tmp_path: Path) -> None:
    assert schema_for(tmp_path / "a") != schema_for(tmp_path / "b")
    assert schema_for(tmp_path / "a") == schema_for(tmp_path / "a")


async def test_bulk_insert_writes_what_adds_write(tmp_path: Path, clock: ManualClock) -> None:
    """``records.insert_new`` (imports, bench seeding) stores the same rows as adds: the
    copies answer get, history and search exactly like the originals."""
    from governed_memory.requests import GetRequest, HistoryRequest

    originals = await _started(postgres_config(tmp_path / "adds"), clock)
    copies = await _started(postgres_config(tmp_path / "bulk"), clock)
    try:
        records = [await originals.add(note(text, key=f"k{n}"), make_ctx(clock))
                   for n, text in enumerate(["green tea daily", "tea\x00 with 'quotes'",
                                             "hiking on mondays", "green green hills"])]
        versions = [(await originals.history(HistoryRequest(scope=USER_SCOPE, record_id=r.id),
                                             make_ctx(clock)))[0] for r in records]
        backend = copies.backend
        assert isinstance(backend, PostgresBackend)
        async with backend.writing() as tx:
            await tx.records.insert_new(versions)  # type: ignore[attr-defined]
        for record in records:
            request = GetRequest(scope=USER_SCOPE, record_id=record.id)
            assert await copies.get(request, make_ctx(clock)) == record
        for query in ("green", "tea", "green hills mondays"):
            request = SearchRequest(scopes=(USER_SCOPE,), query=query)
            expected = await originals.search(request, make_ctx(clock))
            got = await copies.search(request, make_ctx(clock))
            assert [(h.record.id, h.score) for h in got.hits] == [
                (h.record.id, h.score) for h in expected.hits]
    finally:
        await originals.close()
        await copies.close()


def _job(n: int, record_id: str = "r") -> IndexJob:
    return IndexJob(job_id=f"job-{n:03d}", record_id=f"{record_id}{n}", scope_hash="sh",
                    version=1, action=JobAction.EMBED, state=JobState.PENDING, attempts=0,
                    next_attempt_at=0.0, created_at=float(n))


async def test_workers_lease_disjoint_jobs_without_waiting(tmp_path: Path,
                                                           clock: ManualClock) -> None:
    """Leases skip jobs another open transaction holds (FOR UPDATE SKIP LOCKED) and do
    not queue behind a write unit holding the schema's key exclusively."""
    config = postgres_config(tmp_path, busy_timeout_ms=200)
    provider = await _started(config, clock)
    backend = provider.backend
    assert isinstance(backend, PostgresBackend)
    try:
        async with backend.writing() as tx:
            for n in range(6):
                await tx.jobs.enqueue(_job(n))
        async with backend.writing() as writer:
            # a global write unit excludes all writers
            await writer.records.usage("acme", None, 0.0)
            async with backend.writing() as first:
                mine = await first.jobs.lease("w1", 10.0, 70.0, 4)
                async with backend.writing() as second:
                    theirs = await second.jobs.lease("w2", 10.0, 70.0, 4)
        assert [job.job_id for job in mine] == [f"job-{n:03d}" for n in range(4)]
        assert [job.job_id for job in theirs] == ["job-004", "job-005"]
        assert all(job.attempts == 1 and job.state is JobState.LEASED for job in mine + theirs)
    finally:
        await provider.close()


async def test_searches_do_not_wait_for_writes(tmp_path: Path, clock: ManualClock) -> None:
    """A search stores its retrieval snapshot without a writer lock."""
    config = postgres_config(tmp_path, busy_timeout_ms=100)
    provider = await _started(config, clock)
    backend = provider.backend
    assert isinstance(backend, PostgresBackend)
    try:
        await provider.add(note("green tea"), make_ctx(clock))
        async with backend.writing() as writer:
            await writer.records.usage("acme", None, 0.0)
            result = await provider.search(SearchRequest(scopes=(USER_SCOPE,), query="tea"),
                                           make_ctx(clock))
            assert len(result.hits) == 1
            with pytest.raises(MemoryUnavailableError):  # a write does wait, and times out
                await provider.add(note("black tea"), make_ctx(clock))
    finally:
        await provider.close()


async def test_erasure_progress_sums_batches_and_is_taken_once(tmp_path: Path,
                                                               clock: ManualClock) -> None:
    from governed_memory_native.storage.port import Removal

    provider = await _started(postgres_config(tmp_path), clock)
    backend = provider.backend
    assert isinstance(backend, PostgresBackend)
    try:
        async with backend.writing() as tx:
            await tx.erasure.add_progress("t", "u", Removal(), 5.0)
            await tx.erasure.add_progress(
                "t", "u", Removal(records=2, scope_hashes=frozenset({"b", "a"})), 3.0)
        async with backend.writing() as tx:  # a later batch, its own transaction
            await tx.erasure.add_progress(
                "t", "u", Removal(records=1, versions=4, index_entries=2,
                                  idempotency_entries=1, scope_hashes=frozenset({"a", "c"})),
                7.0)
            await tx.erasure.add_progress("t", "other", Removal(records=9), 1.0)
        async with backend.writing() as tx:
            taken = await tx.erasure.take_progress("t", "u")
            again = await tx.erasure.take_progress("t", "u")
        assert taken == (Removal(records=3, versions=4, index_entries=2, idempotency_entries=1,
                                 scope_hashes=frozenset({"a", "b", "c"})), 3.0)
        assert again == (Removal(), None)
    finally:
        await provider.close()
