"""The stemming analyzer, and the migrations that rebuilt stored indexes for it.

A store written before SQLite v13 / PostgreSQL v9 holds the old analyzer's terms
(plain words: no possessive rule, no stems). Each test writes such a store by running
the code with the old analyzer and the older migration list, then starts today's
provider on it: the lexical index must be exactly the one today's analyzer gives the
stored records (statistics, postings, terms, token counts, nothing left in the delta),
and stemmed searches must find what the old index could not.
"""

from __future__ import annotations

import hashlib
import re
import types
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
import pytest
from governed_memory.clock import ManualClock
from governed_memory.requests import DeleteRequest, SearchRequest, UpdateRequest
from governed_memory_native import NativeMemoryProvider, build_native_provider
from governed_memory_native.postgres import schema as postgres_schema
from governed_memory_native.retrieval import tokens
from governed_memory_native.retrieval.tokens import ANALYZER, index_text, query_tokens, words
from governed_memory_native.sqlite import connection as sqlite_setup
from governed_memory_native.sqlite.schema import MIGRATIONS as SQLITE_MIGRATIONS
from lexical_support import check_sqlite_index, table_counts
from native_support import OTHER_USER, USER_SCOPE, config_for, make_ctx, note
from postgres_support import POSTGRES_DSN

# -- the analyzer --------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "terms"), [
    ("Anna's cooking classes", ["anna", "cook", "class"]),
    ("Anna\u2019s cooked meals", ["anna", "cook", "meal"]),    # typographic apostrophe
    ("ANNA'S COOKS", ["anna", "cook"]),
    ("its' and it's", ["it", "and", "it"]),                    # "it's": the 's goes
    ("don't", ["don", "t"]),                                   # only 's is a possessive
    ("running runs ran", ["run", "run", "ran"]),               # stems, not lemmas
    ("the of and", ["the", "of", "and"]),                      # no stop words
    ("user_42 x² ﬁnance", ["user", "42", "x2", "financ"]),
    ("", []),
])
def test_terms_are_possessive_free_stemmed_words(text: str, terms: list[str]) -> None:
    assert words(text) == terms
    assert index_text(text) == " ".join(terms)
    assert query_tokens(text) == tuple(dict.fromkeys(terms))


# Texts whose terms pin the analyzer: if this hash changes, what words() returns changed,
# and stored indexes hold the old terms. Add a migration that rebuilds them (SQLite: the
# _LEXICAL_BACKFILL statements, PostgreSQL: a version in _REBUILDS), then update ANALYZER
# and this hash.
PINNED = ("The user's favourite teas are jasmine and oolong; she's been brewing them daily.",
          "Meetings were rescheduled: Tuesday's standup moves to 10:30, retro on Fridays.",
          "Caf\u00e9 visits, \ufb01nancial reports, "
          "\uff26\uff35\uff2c\uff2c\uff37\uff29\uff24\uff34\uff28 notes and naïve ideas")
PINNED_SHA256 = "a1e920f72140f005ea1d5afaf601089cc65fe64e8486c676388879c5d0acb058"


def test_the_analyzer_is_pinned() -> None:
    digest = hashlib.sha256("\n".join(index_text(text) for text in PINNED).encode())
    assert (ANALYZER, digest.hexdigest()) == (
        "words/nfkd-casefold + possessive + snowball-english (PyStemmer 3)", PINNED_SHA256)


def test_the_migrations_name_the_analyzer() -> None:
    """The last migration that rebuilt the lexical index names the analyzer it used."""
    sqlite = next(m for m in SQLITE_MIGRATIONS if m.version == 13)
    postgres = next(m for m in postgres_schema.MIGRATIONS if m.version == 9)
    assert ANALYZER in sqlite.description and ANALYZER in postgres.description
    assert not any("lexical index rebuilt" in m.description
                   for m in (*SQLITE_MIGRATIONS, *postgres_schema.MIGRATIONS)
                   if m.version > (13 if m in SQLITE_MIGRATIONS else 9))


# -- a store written by the old analyzer ---------------------------------------------------


class _NoStems:
    """The old analyzer had no stemmer: each word is its own term."""

    @staticmethod
    def stemWords(found: Sequence[str]) -> list[str]:
        return list(found)


def _old_analyzer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokens, "_STEMMERS", types.SimpleNamespace(english=_NoStems()))
    monkeypatch.setattr(tokens, "POSSESSIVE", re.compile(r"(?!)"))  # matches nothing
    assert words("Anna's cooking") == ["anna", "s", "cooking"]


CONTENTS = ["Anna's cooking class on Tuesdays", "she cooked pasta for the cooks",
            "jasmine teas in the morning", "the user's favourite dishes",
            "running shoes and runs", "Bob's garden plans"]


async def _write_old_store(provider: NativeMemoryProvider, clock: ManualClock) -> dict[str, str]:
    """Records in every state the index distinguishes: active in two scopes, updated,
    soft-deleted, superseded by an update with new words, and hard-deleted."""
    ctx = make_ctx(clock)
    ids = {}
    for number, content in enumerate(CONTENTS):
        scope = USER_SCOPE if number % 2 == 0 else OTHER_USER
        ids[content] = (await provider.add(note(content, scope=scope), ctx)).id
    updated = await provider.add(note("Carla's baking notes"), ctx)
    await provider.update(UpdateRequest(scope=USER_SCOPE, record_id=updated.id,
                                        expected_revision=updated.revision,
                                        content="Carla's baked breads"), ctx)
    ids["updated"] = updated.id
    soft = await provider.add(note("Dana's deleted recipes"), ctx)
    await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=soft.id), ctx)
    hard = await provider.add(note("Erin's erased cooking"), ctx)
    await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=hard.id, hard=True), ctx)
    return ids


async def _stemmed_searches_find(provider: NativeMemoryProvider, clock: ManualClock,
                                 ids: dict[str, str]) -> None:
    ctx = make_ctx(clock)

    async def found(query: str, scope: Any = USER_SCOPE) -> set[str]:
        result = await provider.search(SearchRequest(scopes=(scope,), query=query), ctx)
        return {hit.record.id for hit in result.hits}

    # "cook" is the stem of cooking, cooked and cooks; "anna" is the possessive's word
    assert await found("cook") == {ids["Anna's cooking class on Tuesdays"]}
    assert await found("cooks", OTHER_USER) == {ids["she cooked pasta for the cooks"]}
    assert await found("anna") == {ids["Anna's cooking class on Tuesdays"]}
    assert await found("bread") == {ids["updated"]}      # the update's words, stemmed
    assert await found("notes") == set()                 # the old content's are gone
    assert await found("recipe") == set()                # soft-deleted: not indexed
    assert await found("erased") == set()


@pytest.mark.parametrize("delta_max", [64, 2, 0], ids=["delta", "merged", "eager"])
async def test_sqlite_v13_rebuilds_an_old_index_exactly(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, clock: ManualClock,
        delta_max: int) -> None:
    config = config_for("sqlite", tmp_path, lexical_delta_max=delta_max)
    old_migrations = tuple(m for m in SQLITE_MIGRATIONS if m.version < 13)
    with monkeypatch.context() as old:
        _old_analyzer(old)
        old.setattr(sqlite_setup, "MIGRATIONS", old_migrations)
        old.setattr(sqlite_setup, "LATEST_VERSION", 12)
        provider = build_native_provider(config, clock)
        await provider.start()
        try:
            ids = await _write_old_store(provider, clock)
            if provider.lexical_merger is not None:
                await provider.lexical_merger.flush()
        finally:
            await provider.close()
    path = Path(config["path"])
    before = table_counts(path)
    if delta_max == 64:
        assert before["lexical_delta"] > 0  # the rebuild must fold unmerged rows in
    upgraded = build_native_provider(config, clock)
    await upgraded.start()
    try:
        stored = check_sqlite_index(path)  # exactly the index today's analyzer calls for
        assert {term for scope in stored.values() for term in scope.frequencies} >= {"cook", "anna"}
        assert "cooking" not in {term for scope in stored.values() for term in scope.frequencies}
        assert table_counts(path)["lexical_delta"] == 0
        assert table_counts(path)["lexical_tombstones"] == 0
        await _stemmed_searches_find(upgraded, clock, ids)
        # and it keeps indexing exactly afterwards
        await upgraded.add(note("Frank's cookbooks"), make_ctx(clock))
        check_sqlite_index(path)
    finally:
        await upgraded.close()


def _sql(schema: str, query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(POSTGRES_DSN, autocommit=True,
                         options=f"-c search_path={schema}") as conn:
        return list(conn.execute(query).fetchall())


def _postgres_index(schema: str) -> dict[str, Any]:
    return {
        "scopes": sorted(_sql(schema, "SELECT scope_hash, documents, total_length"
                                      " FROM lexical_scopes WHERE documents > 0")),
        "docs": sorted(_sql(schema, "SELECT d.doc, s.scope_hash, d.length FROM lexical_docs"
                                    " AS d JOIN lexical_scopes AS s USING (scope_id)")),
        "postings": sorted(_sql(schema, "SELECT s.scope_hash, p.term, p.doc, p.tf, p.length,"
                                        " p.visibility FROM lexical_postings AS p"
                                        " JOIN lexical_scopes AS s USING (scope_id)")),
        "terms": sorted(_sql(schema, "SELECT s.scope_hash, t.term, t.documents"
                                     " FROM lexical_terms AS t"
                                     " JOIN lexical_scopes AS s USING (scope_id)")),
        "token_counts": sorted(_sql(schema, "SELECT seq, token_count FROM memory_records")),
    }


def _postgres_rebuilt(schema: str) -> dict[str, Any]:
    """The index today's analyzer calls for, from ``memory_records`` alone."""
    rows = _sql(schema, "SELECT seq, scope_hash, status, convert_from(content, 'UTF8'),"
                        " visibility FROM memory_records")
    scopes: Counter[str] = Counter()
    lengths: Counter[str] = Counter()
    terms: Counter[tuple[str, str]] = Counter()
    docs, postings, counts = [], [], []
    for seq, scope_hash, status, content, visibility in rows:
        found = words(content)
        counts.append((seq, len(found)))
        if status != "active":
            continue
        scopes[scope_hash] += 1
        lengths[scope_hash] += len(found)
        docs.append((seq, scope_hash, len(found)))
        for term, tf in Counter(found).items():
            postings.append((scope_hash, term, seq, tf, len(found), visibility))
            terms[scope_hash, term] += 1
    return {"scopes": sorted((h, n, lengths[h]) for h, n in scopes.items()),
            "docs": sorted(docs), "postings": sorted(postings),
            "terms": sorted((h, t, n) for (h, t), n in terms.items()),
            "token_counts": sorted(counts)}


async def test_postgres_v9_rebuilds_an_old_index_exactly(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, clock: ManualClock) -> None:
    config = config_for("postgres", tmp_path)
    with monkeypatch.context() as old:
        _old_analyzer(old)
        old.setattr(postgres_schema, "MIGRATIONS",
                    tuple(m for m in postgres_schema.MIGRATIONS if m.version < 9))
        provider = build_native_provider(config, clock)
        await provider.start()
        try:
            ids = await _write_old_store(provider, clock)
        finally:
            await provider.close()
    schema = config["schema"]
    assert _postgres_index(schema) != _postgres_rebuilt(schema)  # the old terms
    upgraded = build_native_provider(config, clock)
    await upgraded.start()
    try:
        assert _postgres_index(schema) == _postgres_rebuilt(schema)
        await _stemmed_searches_find(upgraded, clock, ids)
        await upgraded.add(note("Frank's cookbooks"), make_ctx(clock))
        assert _postgres_index(schema) == _postgres_rebuilt(schema)
    finally:
        await upgraded.close()
