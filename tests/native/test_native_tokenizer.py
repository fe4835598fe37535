"""Both backends tokenize content exactly as queries are tokenized (tokens.words)."""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from governed_memory.clock import ManualClock
from governed_memory.requests import SearchRequest
from governed_memory_native import NativeMemoryProvider, build_native_provider
from governed_memory_native.retrieval.tokens import words
from governed_memory_native.sqlite.connection import register_functions
from governed_memory_native.sqlite.schema import MIGRATIONS
from hypothesis import given, settings
from hypothesis import strategies as st
from lexical_support import check_sqlite_index
from native_support import USER_SCOPE, make_ctx, note

FULLWIDTH = "\uff46\uff55\uff4c\uff4cwidth"  # "fullwidth" in fullwidth forms

# (stored content, a query that must find it, the normalized word it shares)
FORMS = [
    ("ﬁnance report", "ﬁnance", "financ"),        # ligature (stemmed: "financ")
    ("ﬁnance report", "finance", "financ"),
    (FULLWIDTH + " note", FULLWIDTH, "fullwidth"),  # fullwidth forms
    (FULLWIDTH + " note", "fullwidth", "fullwidth"),
    ("x² formula", "x²", "x2"),                     # superscript
    ("x² formula", "x2", "x2"),
    ("½ price", "½", "1"),                          # vulgar fraction: NFKD splits it
    ("İstanbul trip", "istanbul", "istanbul"),
    ("Café visit", "CAFE", "cafe"),
    ("Ωmega", "ωmega", "ωmega"),
]


@pytest.mark.parametrize(("content", "query", "word"), FORMS)
async def test_compatibility_forms_are_found_by_both_backends(
        provider: NativeMemoryProvider, clock: ManualClock,
        content: str, query: str, word: str) -> None:
    ctx = make_ctx(clock)
    assert word in words(content) and word in words(query)
    record = await provider.add(note(content), ctx)
    await provider.add(note("something unrelated"), ctx)
    result = await provider.search(SearchRequest(scopes=(USER_SCOPE,), query=query), ctx)
    assert [hit.record.id for hit in result.hits] == [record.id]


async def test_final_sigma_is_not_merged_with_sigma(provider: NativeMemoryProvider,
                                                    clock: ManualClock) -> None:
    # str.lower() gives "οδος" (final ς) for "ΟΔΟΣ": a different word from "οδοσ", in
    # both backends (FTS5's unicode61 would have folded the two together).
    ctx = make_ctx(clock)
    final = await provider.add(note("ΟΔΟΣ"), ctx)
    medial = await provider.add(note("οδοσ"), ctx)
    for query, expected in (("οδος", final), ("ΟΔΟΣ", final), ("οδοσ", medial)):
        result = await provider.search(SearchRequest(scopes=(USER_SCOPE,), query=query), ctx)
        assert [hit.record.id for hit in result.hits] == [expected.id], query


def _postings(conn: sqlite3.Connection, seq: int) -> dict[str, int]:
    return dict(conn.execute("SELECT term, tf FROM lexical_postings WHERE doc = ?", (seq,)))


def _schema_before(version: int) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    register_functions(conn)
    for migration in MIGRATIONS:
        if migration.version < version:
            for statement in migration.statements:
                conn.execute(statement)
    return conn


@settings(max_examples=150, deadline=None)
@given(content=st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=80))
def test_sqlite_backfill_indexes_exactly_the_shared_words(content: str) -> None:
    """Whatever the text, the v9 migration's backfill (words split in SQL) indexes
    ``words(content)`` with their counts, as every write does."""
    conn = _schema_before(9)
    conn.execute(
        "INSERT INTO memory_records (id, scope_hash, tenant_id, scope, content, memory_type,"
        " status, version, revision, content_hash, metadata, provenance, visibility,"
        " importance, entity_ids, created_at, updated_at, index_state, token_count)"
        " VALUES ('r1', 'h', 't', '{}', ?, 'note', 'active', 1, 'v', 'c', '{}', '{}',"
        " 'private', 0.5, '[]', 0, 0, 'indexed', gm_word_count(?))", (content, content))
    for statement in MIGRATIONS[8].statements:
        conn.execute(statement)
    assert _postings(conn, 1) == dict(Counter(words(content)))
    assert conn.execute("SELECT documents, total_length FROM lexical_scopes").fetchall() == [
        (1, len(words(content)))]
    assert dict(conn.execute("SELECT term, documents FROM lexical_terms")) == {
        word: 1 for word in words(content)}
    conn.close()


async def test_sqlite_stores_the_shared_words_in_its_index(tmp_path: Path,
                                                           clock: ManualClock) -> None:
    path = tmp_path / "memory.db"
    provider = build_native_provider({"path": str(path)}, clock)
    await provider.start()
    contents = [content for content, _, _ in FORMS] + ["ΟΔΟΣ οδοσ", "under_score x-y"]
    try:
        for content in contents:
            await provider.add(note(content), make_ctx(clock))
    finally:
        await provider.close()
    # the words searches see (main postings, or the delta a new record's words go to first)
    postings = check_sqlite_index(path)[USER_SCOPE.scope_hash].postings
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT seq, content FROM memory_records ORDER BY seq").fetchall()
    finally:
        conn.close()
    for seq, content in rows:
        assert {term: value[0] for (term, doc), value in postings.items() if doc == seq} == dict(
            Counter(words(content)))
