"""PostgreSQL scores exactly as the memory backend does: same hits, same order, same
scores (equal floats, not close ones), same candidate counts, under every filter; and
it never returns a record to another scope.

The scenarios and strategies are the memory/SQLite ones (test_native_scoring,
test_native_isolation_property), so all three backends are held to one behaviour; each
example migrates a fresh schema, so these run fewer examples.
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
from pathlib import Path

from governed_memory import MemoryType, Scope
from governed_memory.clock import ManualClock
from governed_memory.requests import SearchRequest
from governed_memory_native import build_native_provider
from hypothesis import given, settings
from hypothesis import strategies as st
from native_support import config_for
from postgres_support import require_postgres
from test_native_hybrid_backends import _run as _hybrid_run
from test_native_hybrid_backends import queries as hybrid_queries
from test_native_hybrid_backends import records as hybrid_records
from test_native_isolation_property import _scenario
from test_native_isolation_property import writes as isolation_writes
from test_native_scoring import SCOPES, Query, Write, _apply, _ctx, queries, writes


async def _differential(directory: Path, plan: list[Write], asks: list[Query]) -> None:
    clock = ManualClock()
    providers = [build_native_provider(config_for(backend, directory), clock)
                 for backend in ("memory", "postgres")]
    for provider in providers:
        await provider.start()
    try:
        for number, write in enumerate(plan):
            for provider in providers:  # interleaved: ids rise in the same order in both
                await _apply(provider, clock, number, write)
        for ask in asks:
            request = SearchRequest(scopes=ask.scopes, query=ask.text, limit=ask.limit,
                                    memory_types=ask.memory_types, entity_ids=ask.entity_ids,
                                    metadata_filter=ask.metadata_filter)
            ctx = _ctx(clock, ask.scopes[0].tenant_id)
            memory, postgres = [await provider.search(request, ctx) for provider in providers]
            assert memory.candidates == postgres.candidates, ask
            assert [(hit.record.key, hit.score) for hit in memory.hits] == [
                (hit.record.key, hit.score) for hit in postgres.hits], ask
            assert [hit.rank for hit in memory.hits] == [hit.rank for hit in postgres.hits]
    finally:
        for provider in providers:
            await provider.close()


@settings(max_examples=25, deadline=None)
@given(plan=st.lists(writes, min_size=1, max_size=12),
       asks=st.lists(queries, min_size=1, max_size=4))
def test_memory_and_postgres_return_identical_hits_and_scores(plan: list[Write],
                                                              asks: list[Query]) -> None:
    require_postgres()
    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(_differential(Path(directory), plan, asks))


async def test_many_exact_ties_break_by_id_on_postgres(tmp_path: Path) -> None:
    """Hundreds of equal scores around the cutoff: PostgreSQL picks the lowest ids too."""
    await _differential(tmp_path, [
        Write(scope=SCOPES[0], content=content, memory_type=MemoryType.NOTE, pending=False,
              expires_in=None, entity_ids=(), tag=1, then="keep", new_content="")
        for content in itertools.islice(itertools.cycle(
            ["tea green", "green tea", "tea tea", "hike"]), 300)
    ], [Query(scopes=(SCOPES[0],), text="tea green", limit=limit, memory_types=(),
              entity_ids=(), metadata_filter={}) for limit in (1, 5, 100)])


@settings(max_examples=15, deadline=None)
@given(plan=isolation_writes)
def test_postgres_never_leaks_a_record_to_another_scope(
        plan: list[tuple[Scope, str, str | None]]) -> None:
    require_postgres()
    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(_scenario("postgres", Path(directory), plan))


@settings(max_examples=10, deadline=None)
@given(hybrid_records, hybrid_queries, st.sets(st.sampled_from(range(3)), min_size=1)
       .map(lambda picks: tuple(sorted(picks))), st.booleans())
def test_memory_and_postgres_rank_hybrid_searches_identically(
        stored: list[tuple[int, str, MemoryType, float, bool]], query: str,
        scope_picks: tuple[int, ...], facts_only: bool) -> None:
    """Same ids, scores, ranks and per-signal explanations for lexical + vector fusion."""
    require_postgres()
    with tempfile.TemporaryDirectory() as directory:
        memory = asyncio.run(_hybrid_run("memory", Path(directory), stored, query,
                                         scope_picks, facts_only))
        postgres = asyncio.run(_hybrid_run("postgres", Path(directory), stored, query,
                                           scope_picks, facts_only))
    assert memory == postgres
