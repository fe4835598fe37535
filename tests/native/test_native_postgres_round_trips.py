"""What PostgreSQL's hot paths cost in round trips (issue 29, item 4), and the schema v12
guard that lets an update travel in two: counted by the backend's own counters, never
timed.

- an update is two round trips: the read of the record (with BEGIN and the locks), then
  its compare-and-set, re-index, version, event and COMMIT together; the guard
  (``compare_and_set_applied``) fails the unit with a conflict, and writes nothing, if
  the record is not at the revision the unit read;
- a search is statistics (with the postings of its rarest terms), the probes a
  completion needs, and the winners' rows with their ids;
- a store written at v11 upgrades to v12 and then updates in two round trips.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import psycopg
import pytest
from governed_memory import MemoryConflictError
from governed_memory.clock import ManualClock
from governed_memory.requests import GetRequest, SearchRequest, UpdateRequest
from governed_memory_native import NativeMemoryProvider, build_native_provider
from native_support import USER_SCOPE, make_ctx, note
from postgres_support import POSTGRES_DSN, postgres_config, require_postgres_package

require_postgres_package()

from governed_memory_native.postgres import schema as postgres_schema  # noqa: E402
from governed_memory_native.postgres.backend import PostgresBackend  # noqa: E402
from governed_memory_native.postgres.migrating import MIGRATIONS_TABLE  # noqa: E402
from governed_memory_native.retrieval import lexical as lexical_topk  # noqa: E402
from governed_memory_native.retrieval.tokens import query_tokens  # noqa: E402
from governed_memory_native.storage.values import SearchQuery  # noqa: E402


async def _started(config: dict[str, Any], clock: ManualClock) -> NativeMemoryProvider:
    provider = build_native_provider({**config, "ranking_processes": 0}, clock)
    await provider.start()
    return provider


def _backend(provider: NativeMemoryProvider) -> PostgresBackend:
    backend = provider.backend
    assert isinstance(backend, PostgresBackend)
    return backend


async def _trips(backend: PostgresBackend, call: Any) -> int:
    before = backend.stats.round_trips
    await call
    return backend.stats.round_trips - before


async def test_an_update_is_two_round_trips(tmp_path: Path, clock: ManualClock) -> None:
    provider = await _started(postgres_config(tmp_path), clock)
    backend = _backend(provider)
    try:
        first = await provider.add(note("green tea"), make_ctx(clock))
        updated = provider.update(UpdateRequest(
            scope=USER_SCOPE, record_id=first.id, content="oolong tea",
            expected_revision=first.revision), make_ctx(clock))
        assert await _trips(backend, updated) == 2
        found = await provider.search(SearchRequest(scopes=(USER_SCOPE,), query="oolong"),
                                      make_ctx(clock))
        assert [hit.record.content for hit in found.hits] == ["oolong tea"]
        assert not (await provider.search(SearchRequest(scopes=(USER_SCOPE,), query="green"),
                                          make_ctx(clock))).hits
        assert backend.stats.rollbacks == 0
    finally:
        await provider.close()


async def test_a_queued_compare_and_set_that_finds_the_record_moved_fails_the_unit(
        tmp_path: Path, clock: ManualClock) -> None:
    """The second line behind the tenant lock: another session moves the record between
    the unit's read and its COMMIT (as a writer skipping the lock would); the queued
    compare-and-set changes no row, so the unit fails with a conflict and its re-index,
    version and every other queued statement are rolled back."""
    config = postgres_config(tmp_path)
    provider = await _started(config, clock)
    backend = _backend(provider)
    try:
        record = await provider.add(note("green tea"), make_ctx(clock))
        moved = record.revision + "-moved"
        with pytest.raises(MemoryConflictError):
            async with backend.writing(tenant_id=USER_SCOPE.tenant_id) as tx:
                current = await tx.records.get(USER_SCOPE.scope_hash, record.id)
                assert current is not None
                with psycopg.connect(POSTGRES_DSN, autocommit=True,
                                     options=f"-c search_path={config['schema']}") as other:
                    other.execute("UPDATE memory_records SET revision = %s WHERE id = %s",
                                  (moved, record.id))
                changed = attrs.evolve(current, content="black tea", version=2, revision="r-new")
                assert await tx.records.replace(changed, current.revision)  # queued
        stored = await provider.get(GetRequest(scope=USER_SCOPE, record_id=record.id),
                                    make_ctx(clock))
        assert (stored.content, stored.revision) == ("green tea", moved)
        found = await provider.search(SearchRequest(scopes=(USER_SCOPE,), query="black"),
                                      make_ctx(clock))
        assert not found.hits  # the re-index went with the rolled-back unit
    finally:
        await provider.close()


async def test_a_search_costs_statistics_probes_and_the_winners(
        tmp_path: Path, clock: ManualClock) -> None:
    """A rare word and a common one over 1,200 records: the statistics bring the rare
    word's postings (its first request is answered from them), one request completes the
    best candidates (probing the common word), one brings the winners' rows with their
    ids: three round trips before the search has its answer (a term at a time took one
    per term read and per probe, and one more for the rows); the read transaction's
    COMMIT follows after the caller has its result."""
    provider = await _started(postgres_config(tmp_path), clock)
    backend = _backend(provider)
    try:
        async with backend.writing() as tx:
            for number in range(1200):
                words = ["the", "tea"]
                if number % 100 == 0:  # twelve records, each of its own length
                    words += ["zebra", *(f"x{extra}" for extra in range(number // 100))]
                await provider_insert(tx, " ".join(words), number)
        query = SearchQuery(scope_hashes=(USER_SCOPE.scope_hash,),
                            tokens=query_tokens("zebra tea"), now=clock.now(), limit=5)

        async def search() -> None:
            async with backend.reading() as tx:
                page = await tx.postings.search(query)
            assert len(page.matches) == 5
            assert all("zebra" in match.record.content for match in page.matches)

        assert await _trips(backend, search()) == 3
        answered = backend.stats.round_trips
        await backend.settled()  # the read's COMMIT goes after the answer
        assert backend.stats.round_trips == answered + 1
    finally:
        await provider.close()


async def provider_insert(tx: Any, content: str, number: int) -> None:
    from governed_memory.ids import new_id, new_revision
    from governed_memory.records import (
        IndexState,
        MemoryRecord,
        MemoryType,
        RecordStatus,
        content_hash,
    )

    await tx.records.insert(MemoryRecord(
        id=new_id(), scope=USER_SCOPE, scope_hash=USER_SCOPE.scope_hash, content=content,
        memory_type=MemoryType.NOTE, version=1, revision=new_revision(),
        content_hash=content_hash(content), status=RecordStatus.ACTIVE,
        created_at=float(number), updated_at=float(number),
        index_state=IndexState.INDEXED))


async def test_the_statistics_bring_exactly_the_first_reads(
        tmp_path: Path, clock: ManualClock) -> None:
    """The statistics statement picks the terms ``lexical_topk.first_reads`` reads first
    (rarest first, up to READ_TOGETHER postings, no common word unless first), so the
    search's first request costs no round trip of its own."""
    provider = await _started(postgres_config(tmp_path), clock)
    backend = _backend(provider)
    try:
        async with backend.writing() as tx:
            for number in range(1600):  # "the" everywhere, w3 in 4, a1 .. a8 in 160 each
                words = ["the", *(f"a{number % 10}" for _ in (1,) if 1 <= number % 10 <= 8)]
                words += ["w3"] if number % 533 == 0 else []
                await provider_insert(tx, " ".join(words), number)
        tokens = query_tokens("the w3 a1 a2 a3 a4 a5 a6 a7 a8")
        query = SearchQuery(scope_hashes=(USER_SCOPE.scope_hash,), tokens=tokens,
                            now=clock.now(), limit=5)
        async with backend.reading() as tx:
            source = tx.postings.source(query)
            stats = await source.statistics(tokens)
            prefetched = set(source._held)  # type: ignore[attr-defined]
        order = sorted((t for t in tokens if stats.containing[t]),
                       key=lambda t: (stats.containing[t], t))
        expected = lexical_topk.first_reads(order, stats.containing, stats.documents)
        # 4 + 6 x 160 postings fit in READ_TOGETHER (1,000), a7 would not; "the" is common
        assert prefetched == set(expected) == {"w3", "a1", "a2", "a3", "a4", "a5", "a6"}
    finally:
        await provider.close()


async def test_a_v11_store_upgrades_to_v12_and_updates_in_two_round_trips(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, clock: ManualClock) -> None:
    config = postgres_config(tmp_path)
    with monkeypatch.context() as old:
        old.setattr(postgres_schema, "MIGRATIONS",
                    tuple(m for m in postgres_schema.MIGRATIONS if m.version <= 11))
        provider = await _started(config, clock)
        try:
            record = await provider.add(note("green tea"), make_ctx(clock))
        finally:
            await provider.close()
    with psycopg.connect(POSTGRES_DSN, autocommit=True,
                         options=f"-c search_path={config['schema']}") as conn:
        version = f"SELECT max(version) FROM {MIGRATIONS_TABLE}"
        assert conn.execute(version).fetchone() == (11,)
        assert conn.execute("SELECT to_regproc('compare_and_set_applied')").fetchone() == (
            None,)
    upgraded = await _started(config, clock)
    backend = _backend(upgraded)
    try:
        assert (await backend.check()).startswith(
            f"postgres schema v{postgres_schema.LATEST_VERSION}, pool")
        updated = upgraded.update(UpdateRequest(
            scope=USER_SCOPE, record_id=record.id, content="oolong tea",
            expected_revision=record.revision), make_ctx(clock))
        assert await _trips(backend, updated) == 2
        found = await upgraded.search(SearchRequest(scopes=(USER_SCOPE,), query="oolong"),
                                      make_ctx(clock))
        assert [hit.record.id for hit in found.hits] == [record.id]
    finally:
        await upgraded.close()
