"""The vector change log on PostgreSQL (schema v7): what only this backend has.

The trigger on ``memory_vectors`` bumps a scope's ``vector_scopes`` row and logs the
record id in the writing transaction; writers of different tenants commit concurrently,
so the log must stay exact and in commit order under them: a snapshot that sees a seq
sees every change up to it and none after (the catch-up rule depends on it). Also here:
the bounded tail and a rebuild behind it, the migration's backfill of vectors stored
before v7, the trigger writing into its own schema whatever the session's search_path,
the shortlist read by id, index work off the event loop, and round trips. The tests the
SQL backends share are in ``test_native_vector_index`` and
``test_native_vector_index_sqlite`` (parametrised over PostgreSQL too).
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
from governed_memory import MemoryNotFoundError, Scope
from governed_memory.clock import ManualClock
from governed_memory.requests import DeleteAllRequest, DeleteRequest, SearchRequest, UpdateRequest
from governed_memory_native import NativeMemoryProvider
from hypothesis import given, settings
from hypothesis import strategies as st
from native_support import make_ctx, note
from postgres_support import (
    POSTGRES_DSN,
    advisory_locks,
    require_postgres,
    require_postgres_package,
)
from vector_index_support import (
    ALICE,
    BOB,
    TableEmbedder,
    bulk_add,
    clustered,
    exact_ranking,
    provider_for,
    searched,
)

require_postgres_package()

import psycopg  # noqa: E402
from governed_memory_native.postgres import schema as postgres_schema  # noqa: E402
from governed_memory_native.postgres.backend import PostgresBackend  # noqa: E402
from governed_memory_native.postgres.transaction import PostgresTransaction  # noqa: E402
from governed_memory_native.sqlite.schema import VECTOR_LOG_KEEP  # noqa: E402


def _sql(schema: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(POSTGRES_DSN, autocommit=True,
                         options=f"-c search_path={schema}") as conn:
        cursor = conn.execute(query, params or None)  # type: ignore[call-overload]
        return list(cursor.fetchall()) if cursor.description else []


def _backend(provider: NativeMemoryProvider) -> PostgresBackend:
    backend = provider.backend
    assert isinstance(backend, PostgresBackend)
    return backend


def _churn(schema: str, record_ids: list[str], changes: int) -> None:
    """``changes`` replacements of the given records' vectors (same identity and scope,
    so the count stays), run on the server: what many writes of re-embedded content
    would log. A commit every 200 keeps each row's chain of versions short (updating one
    row thousands of times in one transaction gets slower with every update)."""
    body = psycopg.sql.SQL(
        "DO $$ DECLARE ids text[] := {ids}; BEGIN FOR i IN 0..{last} LOOP"
        " UPDATE memory_vectors SET created_at = created_at + 1"
        " WHERE record_id = ids[1 + i % array_length(ids, 1)];"
        " IF i % 200 = 199 THEN COMMIT; END IF; END LOOP; END $$"
    ).format(ids=psycopg.sql.Literal(record_ids), last=psycopg.sql.Literal(changes - 1))
    with psycopg.connect(POSTGRES_DSN, autocommit=True,
                         options=f"-c search_path={schema}") as conn:
        conn.execute(body)


# -- concurrent tenant writers ---------------------------------------------------------------

_PROPERTY_DIR = Path(tempfile.gettempdir()) / "gm-vector-log-property"
"""One schema for every example (each writes tenants of its own): no migration each."""
_examples = itertools.count()
_TEXTS = 26

_plans = st.lists(st.tuples(st.integers(0, 5), st.sampled_from(["add", "update", "hard"]),
                            st.integers(0, 10**6)), min_size=1, max_size=_TEXTS - 2)


async def _concurrent_log(steps: list[tuple[int, str, int]], run: int) -> None:
    clock = ManualClock()
    embedder = TableEmbedder()
    for i, vector in enumerate(clustered(np.random.default_rng(run), _TEXTS, 3)):
        embedder.table[f"t{i}"] = vector
    embedder.table["q"] = embedder.table["t0"]
    # Two providers on one schema: two pools, as two processes would have.
    first = provider_for("postgres", _PROPERTY_DIR, clock, embedder, busy_timeout_ms=30_000)
    second = provider_for("postgres", _PROPERTY_DIR, clock, embedder, busy_timeout_ms=30_000)
    await first.start()
    await second.start()
    try:
        scopes = [Scope(f"v{run}-{tenant}", user_id=f"u{user}")
                  for tenant in range(3) for user in range(2)]
        live: dict[int, list[Any]] = {index: [] for index in range(len(scopes))}
        expected: Counter[str] = Counter()  # changes each record's vector went through
        for index, scope in enumerate(scopes):
            record = await first.add(note("t1", scope=scope), make_ctx(clock, scope.tenant_id))
            live[index].append(record)
            expected[record.id] += 1
        for scope in scopes:  # indexes built before the writes: caught up after them
            await searched(first, SearchRequest(scopes=(scope,), query="q", limit=5), clock)
        identity = embedder.identity
        hashes = [scope.scope_hash for scope in scopes]
        writing = True
        snapshots = 0

        async def step(number: int, index: int, action: str, pick: int) -> None:
            provider = (first, second)[number % 2]
            scope = scopes[index]
            ctx = make_ctx(clock, scope.tenant_id)
            text = f"t{2 + number}"  # each step's own: every update changes the content
            if action == "add" or not live[index]:
                record = await provider.add(note(text, scope=scope), ctx)
                live[index].append(record)
                expected[record.id] += 1
                return
            target = live[index][pick % len(live[index])]
            try:
                if action == "update":  # unconditional: applies unless erased first
                    await provider.update(UpdateRequest(scope=scope, record_id=target.id,
                                                        content=text), ctx)
                else:
                    await provider.delete(DeleteRequest(scope=scope, record_id=target.id,
                                                        hard=True), ctx)
                    live[index].remove(target)
            except MemoryNotFoundError:
                return  # erased by an earlier step of this tenant: changed nothing
            expected[target.id] += 1

        async def reader() -> None:
            """Snapshots taken while the writers commit: each holds the changes 1..seq of
            every scope, contiguous, and nothing past seq."""
            nonlocal snapshots
            while writing:
                async with _backend(second).reading() as tx:
                    states = await tx.vectors.scope_states(identity, hashes)  # type: ignore[attr-defined]
                    for scope_hash, state in states.items():
                        changes = await tx.vectors.changes(  # type: ignore[attr-defined]
                            identity, scope_hash, 0, 10**6)
                        assert [seq for seq, _ in changes] == list(range(1, state.seq + 1))
                snapshots += 1
                await asyncio.sleep(0)

        watching = asyncio.create_task(reader())
        try:
            await asyncio.gather(*(step(number, *plan)
                                   for number, plan in enumerate(steps)))
        finally:
            writing = False
            await watching
        assert snapshots >= 1
        schema = _backend(first).schema
        counted = dict(_sql(schema, "SELECT scope_hash, count(*) FROM memory_vectors"
                                    " WHERE scope_hash = ANY(%s) GROUP BY 1", hashes))
        logged: Counter[str] = Counter()
        for scope_hash in hashes:
            ((seq, vectors),) = _sql(schema, "SELECT seq, vectors FROM vector_scopes"
                                             " WHERE scope_hash = %s", scope_hash)
            assert vectors == counted.get(scope_hash, 0)
            changes = _sql(schema, "SELECT seq, record_id FROM vector_changes"
                                   " WHERE scope_hash = %s ORDER BY seq", scope_hash)
            assert [row[0] for row in changes] == list(range(1, seq + 1))  # no gap, no twin
            logged.update(str(row[1]) for row in changes)
        assert logged == expected
        for scope in scopes:  # the early indexes, caught up, are exact
            request = SearchRequest(scopes=(scope,), query="q", limit=50)
            assert await searched(first, request, clock) == await exact_ranking(
                first, embedder, request, clock.now())
        held = {scope_hash: index for (_, scope_hash), index
                in first.vector_indexes.held().items()}
        for index, scope in enumerate(scopes):
            if live[index]:
                with held[scope.scope_hash].lock:
                    assert set(held[scope.scope_hash].record_ids()) == {
                        record.id for record in live[index]}
        assert advisory_locks(postgres_schema.writer_lock_key(schema)) == []
    finally:
        await second.close()
        await first.close()


@settings(max_examples=8, deadline=None)
@given(steps=_plans)
def test_concurrent_tenant_writers_keep_the_log_exact(
        steps: list[tuple[int, str, int]]) -> None:
    """Adds, updates and hard deletes of six scopes of three tenants, all at once through
    two pools, while a reader takes snapshots: every snapshot holds changes 1..seq of
    each scope and nothing else; afterwards each scope's count is its stored vectors,
    each record was logged once per change it went through, and indexes built before
    the writes, caught up, equal exact search and hold exactly the live records."""
    require_postgres()
    asyncio.run(_concurrent_log(steps, next(_examples)))


# -- the bounded tail ---------------------------------------------------------------------

async def test_the_log_keeps_a_bounded_tail(tmp_path: Path, clock: ManualClock) -> None:
    """Row by row (replacements) and a statement's removals at once (``delete_all``:
    one bump by the number removed, the ids under the seqs in between): the log keeps
    exactly the last ``VECTOR_LOG_KEEP`` changes."""
    embedder = TableEmbedder()
    provider = provider_for("postgres", tmp_path, clock, embedder)
    await provider.start()
    try:
        records = await bulk_add(provider, embedder, [
            (ALICE, f"m{i}", v) for i, v in enumerate(clustered(np.random.default_rng(1),
                                                                7, 2))], clock)
        schema = _backend(provider).schema
        _churn(schema, [record.id for record in records], VECTOR_LOG_KEEP + 43)
        assert _sql(schema, "SELECT seq, vectors FROM vector_scopes") == [
            (VECTOR_LOG_KEEP + 50, 7)]
        assert _sql(schema, "SELECT min(seq), max(seq), count(*) FROM vector_changes") == [
            (51, VECTOR_LOG_KEEP + 50, VECTOR_LOG_KEEP)]
        await provider.delete_all(DeleteAllRequest(scope=ALICE), make_ctx(clock))
        top = VECTOR_LOG_KEEP + 57
        assert _sql(schema, "SELECT seq, vectors FROM vector_scopes") == [(top, 0)]
        assert _sql(schema, "SELECT min(seq), max(seq), count(*) FROM vector_changes") == [
            (58, top, VECTOR_LOG_KEEP)]
        assert sorted(row[0] for row in _sql(
            schema, "SELECT record_id FROM vector_changes WHERE seq > %s",
            VECTOR_LOG_KEEP + 50)) == sorted(record.id for record in records)
    finally:
        await provider.close()


async def test_an_index_behind_a_pruned_log_is_rebuilt(tmp_path: Path,
                                                       clock: ManualClock) -> None:
    """A few changes are caught up on; more than the log keeps since the index was built
    leave a gap at the start of the log, so the next search rebuilds instead."""
    embedder = TableEmbedder()
    provider = provider_for("postgres", tmp_path, clock, embedder)
    await provider.start()
    try:
        vectors = clustered(np.random.default_rng(8), 60, 2)
        records = await bulk_add(provider, embedder,
                                 [(ALICE, f"m{i}", v) for i, v in enumerate(vectors)], clock)
        embedder.table["q"] = vectors[1]
        request = SearchRequest(scopes=(ALICE,), query="q", limit=10)
        await searched(provider, request, clock)
        schema = _backend(provider).schema
        _churn(schema, [record.id for record in records[:3]], 3)
        assert await searched(provider, request, clock) == await exact_ranking(
            provider, embedder, request, clock.now())
        stats = provider.vector_indexes.stats
        assert (stats.builds, stats.catch_ups) == (1, 1)
        _churn(schema, [record.id for record in records[:3]], VECTOR_LOG_KEEP + 1)
        assert await searched(provider, request, clock) == await exact_ranking(
            provider, embedder, request, clock.now())
        assert provider.vector_indexes.stats.builds == 2  # the log no longer reaches back
    finally:
        await provider.close()


# -- the migration and the trigger ------------------------------------------------------------

async def test_the_migration_counts_the_vectors_already_stored(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, clock: ManualClock) -> None:
    """A store written at schema v6 (no log) is upgraded: each scope starts at seq 0 with
    its vectors counted, and the first search builds an index from them."""
    embedder = TableEmbedder()
    vectors = clustered(np.random.default_rng(5), 30, 2)
    # Schema v6, plus the one record column today's writes need (v8's occurred_at,
    # which v8 adds only if it is missing).
    v6 = postgres_schema.MIGRATIONS[5]
    assert v6.version == 6
    before_log = (*postgres_schema.MIGRATIONS[:5], attrs.evolve(v6, statements=(
        *v6.statements,
        "ALTER TABLE memory_records ADD COLUMN occurred_at double precision")))
    monkeypatch.setattr(postgres_schema, "MIGRATIONS", before_log)
    old = provider_for("postgres", tmp_path, clock, embedder)
    await old.start()
    try:
        mine = await bulk_add(old, embedder,
                              [(ALICE, f"m{i}", v) for i, v in enumerate(vectors[:20])], clock)
        await bulk_add(old, embedder, [(BOB, f"b{i}", v) for i, v in enumerate(vectors[20:])],
                       clock)
        schema = _backend(old).schema
        assert _sql(schema, "SELECT to_regclass('vector_scopes')") == [(None,)]
    finally:
        await old.close()
    monkeypatch.undo()
    upgraded = provider_for("postgres", tmp_path, clock, embedder)
    await upgraded.start()
    try:
        assert sorted(_sql(schema, "SELECT scope_hash, seq, vectors FROM vector_scopes")) == \
            sorted([(ALICE.scope_hash, 0, 20), (BOB.scope_hash, 0, 10)])
        assert _sql(schema, "SELECT count(*) FROM vector_changes") == [(0,)]
        embedder.table["q"] = vectors[0]
        request = SearchRequest(scopes=(ALICE,), query="q", limit=5)
        got = await searched(upgraded, request, clock)
        assert got == await exact_ranking(upgraded, embedder, request, clock.now())
        assert {record_id for record_id, _ in got} <= {record.id for record in mine}
        assert upgraded.vector_indexes.stats.builds == 1
    finally:
        await upgraded.close()


async def test_the_trigger_writes_to_its_own_schema(tmp_path: Path,
                                                    clock: ManualClock) -> None:
    """A session whose search_path is another schema (an operator's, with tables of the
    same names) erasing a vector by its qualified name still logs it in the vector's
    own schema, and leaves the other schema's tables alone."""
    embedder = TableEmbedder()
    provider = provider_for("postgres", tmp_path / "mine", clock, embedder)
    decoy = provider_for("postgres", tmp_path / "decoy", clock, embedder)
    await provider.start()
    await decoy.start()
    try:
        (record,) = await bulk_add(provider, embedder, [(ALICE, "m0", np.eye(16)[0])], clock)
        schema, other = _backend(provider).schema, _backend(decoy).schema
        with psycopg.connect(POSTGRES_DSN, autocommit=True,
                             options=f"-c search_path={other}") as conn:
            conn.execute(psycopg.sql.SQL("DELETE FROM {}.memory_vectors WHERE record_id = %s"
                                         ).format(psycopg.sql.Identifier(schema)),
                         (record.id,))
        assert _sql(schema, "SELECT seq, vectors FROM vector_scopes") == [(2, 0)]
        assert _sql(schema, "SELECT seq, record_id FROM vector_changes ORDER BY seq") == [
            (1, record.id), (2, record.id)]
        assert _sql(other, "SELECT count(*) FROM vector_scopes") == [(0,)]
    finally:
        await decoy.close()
        await provider.close()


# -- reads, threads, round trips ------------------------------------------------------------

async def test_a_shortlist_is_read_by_id(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                         clock: ManualClock) -> None:
    """The verification of an index's shortlist reads the shortlist's records through
    the id index, even on a table the planner has no statistics of yet (right after a
    bulk load), where it otherwise walked the whole scope."""
    embedder = TableEmbedder()
    provider = provider_for("postgres", tmp_path, clock, embedder)
    await provider.start()
    try:
        vectors = clustered(np.random.default_rng(3), 3000, 4)
        await bulk_add(provider, embedder,
                       [(ALICE, f"m{i}", v) for i, v in enumerate(vectors)], clock)
        sent: list[tuple[str, Any]] = []
        original = PostgresTransaction.tuples

        async def spy(self: PostgresTransaction, sql: str, params: Any,
                      **kwargs: Any) -> Any:
            if isinstance(params, dict) and "among" in params:
                sent.append((sql, params))
            return await original(self, sql, params, **kwargs)

        monkeypatch.setattr(PostgresTransaction, "tuples", spy)
        embedder.table["q"] = vectors[0]
        await searched(provider, SearchRequest(scopes=(ALICE,), query="q", limit=10), clock)
        assert sent and provider.vector_indexes.stats.fallbacks == 0
        sql, params = sent[0]
        with psycopg.connect(POSTGRES_DSN, autocommit=True,
                             options=f"-c search_path={_backend(provider).schema}") as conn:
            literal = psycopg.ClientCursor(conn).mogrify(sql, params)
            plans = []
            # As planned here (a table this small may be read whole: cheaper than 62
            # index probes, and the planner knows the table's size from its file), and
            # with the whole-table scan ruled out, as for a table too large for it.
            for scan in ("on", "off"):
                conn.execute(f"SET enable_seqscan = {scan}")
                plans.append("\n".join(row[0] for row in conn.execute(f"EXPLAIN {literal}")))
        for plan in plans:
            assert "memory_records_corpus" not in plan, plan  # never the scope's indexes
            assert "memory_records_scope_id" not in plan, plan
        assert "memory_records_id_key" in plans[1], plans[1]
    finally:
        await provider.close()


async def test_index_work_runs_on_a_worker_thread_to_its_end(tmp_path: Path,
                                                             clock: ManualClock) -> None:
    """``compute`` leaves the event loop (PostgreSQL units run on it), and work that
    started finishes even when its caller is cancelled (an index is never left half
    changed)."""
    provider = provider_for("postgres", tmp_path, clock, TableEmbedder())
    await provider.start()
    try:
        async def where(tx: Any) -> int:
            return int(await tx.compute(threading.get_ident))

        assert await provider.backend.run_read(where) != threading.get_ident()
        started, release, finished = threading.Event(), threading.Event(), threading.Event()

        def work() -> None:
            started.set()
            release.wait(30)
            finished.set()

        async def unit(tx: Any) -> None:
            await tx.compute(work)

        task = asyncio.create_task(provider.backend.run_read(unit))
        assert await asyncio.to_thread(started.wait, 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task  # the caller goes at once, the work goes on
        assert not finished.is_set()
        release.set()
        assert await asyncio.to_thread(finished.wait, 30)
    finally:
        await provider.close()


async def test_round_trips_of_a_vector_search(tmp_path: Path, clock: ManualClock) -> None:
    """A vector search over an index that is current sends what the exact search sent
    before the log existed: four round trips (the scope states, with BEGIN, take the
    place of the BEGIN that the binary read of the vectors used to send alone; one
    verified batch; the records; COMMIT). A write in between adds two (its changed ids,
    their vectors); a sync-mode add stays one (its vector's statements are queued)."""
    embedder = TableEmbedder()
    provider = provider_for("postgres", tmp_path, clock, embedder)
    backend = _backend(provider)
    await provider.start()
    try:
        vectors = clustered(np.random.default_rng(2), 300, 4)
        await bulk_add(provider, embedder,
                       [(ALICE, f"m{i}", v) for i, v in enumerate(vectors)], clock)
        embedder.table["q"] = vectors[3]
        request = SearchRequest(scopes=(ALICE,), query="q", limit=10)
        await searched(provider, request, clock)  # builds the index

        async def trips(call: Any) -> int:
            await backend.settled()  # a read's COMMIT goes after its answer: count it
            before = backend.stats.round_trips
            await call
            await backend.settled()
            return backend.stats.round_trips - before

        assert await trips(searched(provider, request, clock)) == 4
        embedder.table["new"] = vectors[5]
        await provider.flush_snapshots()
        assert await trips(provider.add(note("new", scope=ALICE), make_ctx(clock))) == 1
        assert await trips(searched(provider, request, clock)) == 6
        stats = provider.vector_indexes.stats
        assert (stats.builds, stats.catch_ups, stats.fallbacks) == (1, 1, 0)
    finally:
        await provider.close()
