"""The scope-local lexical index (lexical_topk over each backend's postings) returns
exactly the exhaustive BM25 top-k on memory, SQLite and PostgreSQL.

The reference here is brute force: :func:`bm25.score_documents` over every visible
record (active, unexpired) of the searched scopes, rebuilt from scratch for each query,
then the filters, then the order (score desc, id asc). Writes go through the storage
port (insert, replace with a content or status change, erase), so the index's upkeep
on every write path is what is tested. Also: another scope's records never move a
scope's scores, a tiny store scores real matches above zero (Lucene idf), and erasure
leaves no posting, term or count of the erased records behind.

SQLite keeps new postings in a per-scope delta merged in batches (``sqlite_lexical``);
the properties run with tiny deltas (``lexical_delta_max`` of 0 to 3), so records in the
delta, tombstones, full deltas indexed directly and background merges interleaved with
the writes and searches are all exercised, and the stored tables are checked against the
index rebuilt from the records after every scenario (``lexical_support``).
"""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import attrs
import psycopg
from governed_memory import Scope
from governed_memory.clock import ManualClock
from governed_memory.ids import new_id, new_revision
from governed_memory.records import (
    IndexState,
    MemoryRecord,
    MemoryType,
    RecordStatus,
    Visibility,
    content_hash,
)
from governed_memory.requests import SearchRequest
from governed_memory_native import NativeMemoryProvider, build_native_provider
from governed_memory_native.memory.state import passes_filters
from governed_memory_native.retrieval.bm25 import Document, score_documents
from governed_memory_native.retrieval.tokens import words
from governed_memory_native.storage.port import SearchQuery
from hypothesis import given, settings
from hypothesis import strategies as st
from lexical_support import check_sqlite_index, stored_index, table_counts
from native_support import USER_SCOPE, config_for, make_ctx, note
from postgres_support import POSTGRES_DSN, require_postgres

BACKENDS = ("memory", "sqlite", "postgres")
VOCABULARY = ("tea", "green", "dark", "mode", "billing", "hike", "the", "a", "zebra")
SCOPES = (Scope(tenant_id="acme", user_id="alice"), Scope(tenant_id="acme", user_id="bob"),
          Scope(tenant_id="acme"), Scope(tenant_id="globex", user_id="alice"))
NOW = 1_000_000.0
OUTSIDER = Scope(tenant_id="initech", user_id="mallory")


@attrs.frozen
class Insert:
    scope: int
    content: str
    status: RecordStatus
    expires: float | None
    visibility: Visibility
    invalid_at: float | None


@attrs.frozen
class Replace:
    target: int
    content: str | None
    status: RecordStatus


@attrs.frozen
class Erase:
    target: int


@attrs.frozen
class Ask:
    scopes: tuple[int, ...]
    tokens: tuple[str, ...]
    limit: int
    visibilities: tuple[Visibility, ...]
    valid_at: float | None


contents = st.lists(st.sampled_from(VOCABULARY), max_size=8).map(" ".join)
statuses = st.sampled_from([RecordStatus.ACTIVE] * 4 + [RecordStatus.PENDING_REVIEW,
                                                       RecordStatus.SUPERSEDED])
inserts = st.builds(Insert, scope=st.integers(0, len(SCOPES) - 1), content=contents,
                    status=statuses,
                    expires=st.sampled_from([None, None, NOW - 10, NOW + 10]),
                    visibility=st.sampled_from(list(Visibility)),
                    invalid_at=st.sampled_from([None, None, NOW - 5, NOW + 5]))
replaces = st.builds(Replace, target=st.integers(0, 40), content=st.none() | contents,
                     status=st.sampled_from([RecordStatus.ACTIVE, RecordStatus.ACTIVE,
                                             RecordStatus.DELETED,
                                             RecordStatus.PENDING_REVIEW]))
erases = st.builds(Erase, target=st.integers(0, 40))
writes = st.lists(st.one_of(inserts, inserts, inserts, replaces, erases),
                  min_size=6, max_size=40)
asks = st.lists(st.builds(
    Ask,
    scopes=st.lists(st.integers(0, len(SCOPES) - 1), min_size=1, max_size=3,
                    unique=True).map(tuple),
    tokens=st.lists(st.sampled_from([*VOCABULARY, "absent"]), min_size=1, max_size=4,
                    unique=True).map(tuple),
    limit=st.integers(1, 6),
    visibilities=st.sampled_from([(), (Visibility.SHARED,)]),
    valid_at=st.sampled_from([None, NOW])), min_size=1, max_size=5)


def _record(scope: Scope, content: str, **fields: Any) -> MemoryRecord:
    return MemoryRecord(
        id=new_id(), scope=scope, scope_hash=scope.scope_hash, content=content,
        memory_type=MemoryType.NOTE, version=1, revision=new_revision(),
        content_hash=content_hash(content), created_at=NOW - 100, updated_at=NOW - 100,
        index_state=IndexState.INDEXED, **fields)


def _expected(records: dict[str, MemoryRecord], query: SearchQuery
              ) -> list[tuple[str, float]]:
    """Exhaustive BM25 over the visible records of the searched scopes, rebuilt now."""
    visible = [record for record in records.values()
               if record.scope_hash in query.scope_hashes and record.is_visible(query.now)]
    corpus = [Document(record.id, Counter(words(record.content)), len(words(record.content)))
              for record in visible]
    scores = score_documents(corpus, query.tokens)
    matches = sorted(((record.id, scores[record.id]) for record in visible
                      if record.id in scores and passes_filters(record, query)),
                     key=lambda match: (-match[1], match[0]))
    return matches


def _query(ask: Ask) -> SearchQuery:
    return SearchQuery(scope_hashes=tuple(SCOPES[i].scope_hash for i in ask.scopes),
                       tokens=ask.tokens, now=NOW, limit=ask.limit,
                       visibilities=ask.visibilities, valid_at=ask.valid_at)


async def _write(providers: list[NativeMemoryProvider], body: Any) -> None:
    for provider in providers:
        await provider._backend.run_write(body)


async def _search(provider: NativeMemoryProvider, query: SearchQuery) -> Any:
    return await provider._backend.run_read(lambda tx: tx.postings.search(query))


async def _apply(providers: list[NativeMemoryProvider], records: dict[str, MemoryRecord],
                 order: list[str], write: Insert | Replace | Erase) -> None:
    if isinstance(write, Insert):
        record = _record(SCOPES[write.scope], write.content, status=write.status,
                         expires_at=write.expires, visibility=write.visibility,
                         invalid_at=write.invalid_at)
        await _write(providers, lambda tx: tx.records.insert(record))
        records[record.id] = record
        order.append(record.id)
        return
    if not order:
        return
    record_id = order[write.target % len(order)]
    if isinstance(write, Erase):
        await _write(providers, lambda tx: tx.erasure.erase([record_id]))
        del records[record_id]
        order.remove(record_id)
        return
    current = records[record_id]
    content = current.content if write.content is None else write.content
    changed = attrs.evolve(current, content=content, content_hash=content_hash(content),
                           status=write.status, version=current.version + 1,
                           revision=new_revision())

    async def replace(tx: Any) -> None:
        assert await tx.records.replace(changed, current.revision)

    await _write(providers, replace)
    records[record_id] = changed


async def _started(directory: Path, delta_max: int | None = None
                   ) -> list[NativeMemoryProvider]:
    extra = {} if delta_max is None else {"lexical_delta_max": delta_max}
    providers = [build_native_provider(config_for(backend, directory, **extra), ManualClock())
                 for backend in BACKENDS]
    for provider in providers:
        await provider.start()
    return providers


async def _merged(provider: NativeMemoryProvider) -> None:
    """Let the SQLite provider's background merges finish."""
    merger = provider.lexical_merger
    if merger is not None:
        await merger.flush()


async def _scenario(directory: Path, plan: list[Insert | Replace | Erase],
                    questions: list[Ask], delta_max: int) -> None:
    providers = await _started(directory, delta_max)
    try:
        records: dict[str, MemoryRecord] = {}
        order: list[str] = []
        for write in plan:
            await _apply(providers, records, order, write)
        before = []
        for ask in questions:
            query = _query(ask)
            expected = _expected(records, query)
            pages = [await _search(provider, query) for provider in providers]
            for backend, page in zip(BACKENDS, pages, strict=True):
                got = [(match.record.id, match.score) for match in page.matches]
                assert got == expected[: ask.limit], (backend, ask)
                assert min(len(expected), ask.limit) <= page.candidates <= len(expected)
                if len(set(ask.tokens)) == 1:  # nothing to prune: every match counted
                    assert page.candidates == len(expected), (backend, ask)
            assert len({page.candidates for page in pages}) == 1, ask
            before.append(pages[0])
        # another tenant's words, however many and however alike, never move a score
        for content in ("tea tea green", "dark mode billing", "the a the a", "zebra"):
            outsider = _record(OUTSIDER, content, status=RecordStatus.ACTIVE)
            await _write(providers, lambda tx, outsider=outsider: tx.records.insert(outsider))
        for ask, first in zip(questions, before, strict=True):
            for provider in providers:
                again = await _search(provider, _query(ask))
                assert [(m.record.id, m.score) for m in again.matches] == [
                    (m.record.id, m.score) for m in first.matches]
                assert again.candidates == first.candidates
        # the SQLite tables hold exactly the records' index, merged or not
        check_sqlite_index(directory / "memory.db")
        await _merged(providers[1])
        check_sqlite_index(directory / "memory.db")
    finally:
        for provider in providers:
            await provider.close()


@settings(max_examples=60, deadline=None)
@given(plan=writes, questions=asks, delta_max=st.sampled_from([0, 1, 2, 3, 3]))
def test_every_backend_returns_the_exhaustive_bm25_top_k(
        plan: list[Insert | Replace | Erase], questions: list[Ask], delta_max: int) -> None:
    require_postgres()
    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(_scenario(Path(directory), plan, questions, delta_max))


async def test_many_records_prune_yet_stay_exact(tmp_path: Path) -> None:
    """Enough records that common words become non-essential (probed, not read). On
    SQLite the first records of the batch fill the delta and the rest are indexed
    directly; the merge runs while the searches do."""
    require_postgres()
    providers = await _started(tmp_path, delta_max=50)
    try:
        records: dict[str, MemoryRecord] = {}
        scope = SCOPES[0]
        batch = []
        for number in range(600):
            content = " ".join(["the"] * (1 + number % 3) + ["tea"] * (number % 2)
                               + (["zebra"] if number % 97 == 0 else [])
                               + ["green"] * (number % 5 == 0))
            batch.append(_record(scope, content, status=RecordStatus.ACTIVE))

        async def insert_all(tx: Any) -> None:
            for record in batch:
                await tx.records.insert(record)

        await _write(providers, insert_all)
        records.update((record.id, record) for record in batch)
        for tokens in (("zebra", "the"), ("zebra", "tea", "the"), ("green", "tea", "the"),
                       ("the",), ("tea", "the")):
            for limit in (1, 3, 10):
                query = SearchQuery(scope_hashes=(scope.scope_hash,), tokens=tokens,
                                    now=NOW, limit=limit)
                expected = _expected(records, query)[:limit]
                pages = [await _search(provider, query) for provider in providers]
                for backend, page in zip(BACKENDS, pages, strict=True):
                    assert [(m.record.id, m.score) for m in page.matches] == expected, (
                        backend, tokens, limit)
                assert len({page.candidates for page in pages}) == 1
        # "zebra" is rare and "the" is everywhere: "the" is probed, never walked, so
        # the records holding only "the" are not examined (candidates stays small)
        query = SearchQuery(scope_hashes=(scope.scope_hash,), tokens=("zebra", "the"),
                            now=NOW, limit=3)
        assert (await _search(providers[0], query)).candidates < 600
        await _merged(providers[1])
        assert table_counts(tmp_path / "memory.db")["lexical_delta"] == 0
        check_sqlite_index(tmp_path / "memory.db")
    finally:
        for provider in providers:
            await provider.close()


async def test_a_tiny_store_scores_real_matches_above_zero(
        provider: NativeMemoryProvider, clock: ManualClock) -> None:
    """The demo's case: with idf floored at 1e-6, words found in half the scope scored
    0 and results came back by id; Lucene's idf keeps every match positive."""
    ctx = make_ctx(clock)
    billing = await provider.add(note("the billing page needs dark mode"), ctx)
    dark = await provider.add(note("user prefers dark mode everywhere"), ctx)
    await provider.add(note("lunch on friday"), ctx)
    result = await provider.search(SearchRequest(scopes=(USER_SCOPE,),
                                                 query="dark mode billing"), ctx)
    assert [hit.record.id for hit in result.hits] == [billing.id, dark.id]
    assert all(hit.score > 0 for hit in result.hits)
    assert result.hits[0].score > result.hits[1].score


def _sqlite_words(path: Path) -> str:
    """Every word any lexical table of the SQLite file holds, as one string."""
    conn = sqlite3.connect(path)
    try:
        return " ".join(str(row[0]) for row in conn.execute(
            "SELECT term FROM lexical_terms UNION ALL SELECT term FROM lexical_postings"
            " UNION ALL SELECT terms FROM lexical_delta"))
    finally:
        conn.close()


def _postgres_tables(schema: str) -> dict[str, list[tuple[Any, ...]]]:
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
        return {table: conn.execute(f'SELECT * FROM "{schema}".{table} ORDER BY 1, 2')
                .fetchall()
                for table in ("lexical_scopes", "lexical_docs", "lexical_terms",
                              "lexical_postings")}


async def test_erasure_leaves_no_posting_and_exact_statistics(tmp_path: Path) -> None:
    """Erasing records removes their postings, their document rows and every term and
    scope row only they held; what remains equals the index of the survivors alone. On
    SQLite (a delta of one row per scope) the first record of each scope is in the delta
    and the next in the main tables: erasure clears both."""
    require_postgres()
    providers = await _started(tmp_path, delta_max=1)
    memory, sqlite, postgres = providers
    try:
        keep = [_record(SCOPES[0], "green tea hike", status=RecordStatus.ACTIVE),
                _record(SCOPES[1], "green tea", status=RecordStatus.ACTIVE)]
        doomed = [_record(SCOPES[0], "zzsecret green", status=RecordStatus.ACTIVE),
                  _record(SCOPES[2], "only scope two words", status=RecordStatus.ACTIVE),
                  _record(SCOPES[0], "pending zzsecret", status=RecordStatus.PENDING_REVIEW)]

        async def insert_all(tx: Any) -> None:
            for record in [*keep, *doomed]:
                await tx.records.insert(record)

        await _write(providers, insert_all)
        removals = []
        for provider in providers:
            removals.append(await provider._backend.run_write(
                lambda tx: tx.erasure.erase([record.id for record in doomed])))
        assert {removal.index_entries for removal in removals} == {2}  # the active two
        path = tmp_path / "memory.db"
        index = check_sqlite_index(path)
        assert {hash_: (scope.documents, scope.total_length, scope.frequencies)
                for hash_, scope in index.items()} == {
            SCOPES[0].scope_hash: (1, 3, {"green": 1, "tea": 1, "hike": 1}),
            SCOPES[1].scope_hash: (1, 2, {"green": 1, "tea": 1})}
        assert set(stored_index(path)) == set(index)  # no row for the erased scope
        assert "zzsecret" not in _sqlite_words(path) and "scope" not in _sqlite_words(path)
        postgres_rows = _postgres_tables(postgres._backend._schema)
        for rows in (postgres_rows,):
            assert sorted(row[1:] for row in rows["lexical_scopes"]) == sorted(
                [(SCOPES[0].scope_hash, 1, 3), (SCOPES[1].scope_hash, 1, 2)])
            assert len(rows["lexical_docs"]) == 2
            terms = sorted((row[1], row[2]) for row in rows["lexical_terms"])
            assert terms == [("green", 1), ("green", 1), ("hike", 1), ("tea", 1), ("tea", 1)]
            assert sorted(row[1] for row in rows["lexical_postings"]) == sorted(
                ["green", "tea", "hike", "green", "tea"])
        state = memory._backend._state
        assert set(state.lexicon) == {SCOPES[0].scope_hash, SCOPES[1].scope_hash}
        assert "zzsecret" not in state.lexicon[SCOPES[0].scope_hash].postings
        # erasing the rest empties the index completely
        for provider in providers:
            await provider._backend.run_write(
                lambda tx: tx.erasure.erase([record.id for record in keep]))
        assert set(table_counts(path).values()) == {0}
        assert all(not rows for rows in _postgres_tables(postgres._backend._schema).values())
        assert state.lexicon == {}
        assert sqlite is not None
    finally:
        for provider in providers:
            await provider.close()
