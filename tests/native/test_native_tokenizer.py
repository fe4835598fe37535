"""Both backends tokenize content exactly as queries are tokenized (tokens.words)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from governed_memory import ManualClock, SearchRequest
from governed_memory_native import NativeMemoryProvider, build_native_provider
from governed_memory_native.sqlite_schema import MIGRATIONS
from governed_memory_native.tokens import index_text, words
from hypothesis import given, settings
from hypothesis import strategies as st
from native_support import USER_SCOPE, make_ctx, note

FULLWIDTH = "\uff46\uff55\uff4c\uff4cwidth"  # "fullwidth" in fullwidth forms

# (stored content, a query that must find it, the normalized word it shares)
FORMS = [
    ("ﬁnance report", "ﬁnance", "finance"),       # ligature
    ("ﬁnance report", "finance", "finance"),
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


_DB_TERMS = "SELECT term FROM temp.terms WHERE doc = ? ORDER BY \"offset\""
_FTS_TABLE = [statement for migration in MIGRATIONS for statement in migration.statements
              if "CREATE VIRTUAL TABLE memory_fts " in statement][-1]


@settings(max_examples=300, deadline=None)
@given(content=st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=80))
def test_sqlite_index_holds_exactly_the_shared_words(content: str) -> None:
    """Whatever the text, the FTS5 index holds ``words(content)``: same tokens, same count."""
    conn = sqlite3.connect(":memory:")
    conn.execute(_FTS_TABLE)  # the index exactly as the latest migration defines it
    conn.execute("CREATE VIRTUAL TABLE temp.terms USING fts5vocab(main, memory_fts, 'instance')")
    conn.execute("INSERT INTO memory_fts (rowid, content) VALUES (1, ?)", (index_text(content),))
    assert [row[0] for row in conn.execute(_DB_TERMS, (1,))] == words(content)
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
    conn = sqlite3.connect(path)
    try:
        conn.execute(
            "CREATE VIRTUAL TABLE temp.terms USING fts5vocab(main, memory_fts, 'instance')")
        rows = conn.execute("SELECT seq, content FROM memory_records ORDER BY seq").fetchall()
        for seq, content in rows:
            assert [row[0] for row in conn.execute(_DB_TERMS, (seq,))] == words(content)
    finally:
        conn.close()
