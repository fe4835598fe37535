"""Reading a SQLite store's lexical index as a search sees it, and checking it against
the index rebuilt from the records alone.

A search sees the main tables minus the tombstoned postings plus the delta (see
``sqlite_lexical``); these helpers compute that view straight from the tables with plain
SQL and Python, independently of the code under test, and check every invariant the
module promises, so a test can call :func:`check_sqlite_index` after any sequence of
writes, merges, crashes or cancellations.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import attrs
from governed_memory_native.retrieval.tokens import words


@attrs.frozen
class ScopeIndex:
    """One scope's lexical index as a search sees it."""

    documents: int
    total_length: int
    frequencies: dict[str, int]
    """Per word: how many counted records contain it."""
    postings: dict[tuple[str, int], tuple[int, int, str, Any, Any]]
    """Per (word, record seq): (tf, length, visibility, valid_from, invalid_at)."""


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA query_only = ON")
    return conn


def table_counts(path: Path) -> dict[str, int]:
    conn = _connect(path)
    try:
        return {table: int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
                for table in ("lexical_scopes", "lexical_docs", "lexical_terms",
                              "lexical_postings", "lexical_delta", "lexical_tombstones")}
    finally:
        conn.close()


def stored_index(path: Path) -> dict[str, ScopeIndex]:
    """Main postings not tombstoned, plus the delta, per scope hash; checks on the way
    that the tables agree with each other (counts, pending, one place per record)."""
    conn = _connect(path)
    try:
        scopes = {int(sid): (str(hash_), int(docs), int(total), int(pending))
                  for sid, hash_, docs, total, pending in conn.execute(
                      "SELECT scope_id, scope_hash, documents, total_length, pending"
                      " FROM lexical_scopes")}
        main = {(int(sid), str(term), int(doc)): (int(tf), int(length), str(vis), vf, ia)
                for sid, term, doc, tf, length, vis, vf, ia in conn.execute(
                    "SELECT scope_id, term, doc, tf, length, visibility, valid_from,"
                    " invalid_at FROM lexical_postings")}
        terms = {(int(sid), str(term)): int(n) for sid, term, n in conn.execute(
            "SELECT scope_id, term, documents FROM lexical_terms")}
        tombstones = {(int(sid), int(doc)) for sid, doc in conn.execute(
            "SELECT scope_id, doc FROM lexical_tombstones")}
        delta = {(int(sid), int(doc)): (int(length), json.loads(text), str(vis), vf, ia)
                 for sid, doc, length, text, vis, vf, ia in conn.execute(
                     "SELECT scope_id, doc, length, terms, visibility, valid_from, invalid_at"
                     " FROM lexical_delta")}
        docs = {int(doc): (int(sid), int(length)) for doc, sid, length in conn.execute(
            "SELECT doc, scope_id, length FROM lexical_docs")}
    finally:
        conn.close()
    # lexical_terms counts every main posting, dead or alive, and nothing else
    assert terms == dict(Counter((sid, term) for sid, term, _ in main)), "lexical_terms"
    assert all(n > 0 for n in terms.values())
    pending = Counter(sid for sid, _ in tombstones) + Counter(sid for sid, _ in delta)
    for sid, (_, documents, _, stored_pending) in scopes.items():
        assert stored_pending == pending.get(sid, 0), ("pending", sid)
        assert documents > 0 or stored_pending > 0, ("an empty scope row", sid)
    named = ({sid for sid, _, _ in main} | {sid for sid, _ in tombstones}
             | {sid for sid, _ in delta} | {sid for sid, _ in docs.values()})
    assert named <= set(scopes), "a row names a scope that has no row"
    main_docs = {(sid, doc) for sid, _, doc in main}
    assert tombstones <= main_docs, "a tombstone without postings"
    for key in delta:
        assert key[1] in docs, ("a delta row of an uncounted record", key)
        assert key in tombstones or key not in main_docs, ("words in two places", key)
    index: dict[str, ScopeIndex] = {}
    for sid, (hash_, documents, total, _) in scopes.items():
        postings = {(term, doc): value for (s, term, doc), value in main.items()
                    if s == sid and (sid, doc) not in tombstones}
        for (s, doc), (length, counts, vis, vf, ia) in delta.items():
            if s == sid:
                postings.update({(term, doc): (int(tf), length, vis, vf, ia)
                                 for term, tf in counts.items()})
        live_docs = {doc for _, doc in postings}
        assert all(docs.get(doc, (None,))[0] == sid for doc in live_docs), "uncounted"
        assert documents == sum(1 for s, _ in docs.values() if s == sid), ("documents", sid)
        assert total == sum(n for s, n in docs.values() if s == sid), ("length", sid)
        index[hash_] = ScopeIndex(documents, total,
                                  dict(Counter(term for term, _ in postings)), postings)
    return index


def rebuilt_index(path: Path) -> dict[str, ScopeIndex]:
    """The index the active records call for, from ``memory_records`` alone."""
    conn = _connect(path)
    try:
        rows = conn.execute(
            "SELECT seq, scope_hash, content, visibility, valid_from, invalid_at"
            " FROM memory_records WHERE status = 'active'").fetchall()
    finally:
        conn.close()
    grouped: dict[str, list[Any]] = {}
    for row in rows:
        grouped.setdefault(str(row[1]), []).append(row)
    index: dict[str, ScopeIndex] = {}
    for hash_, records in grouped.items():
        postings = {}
        total = 0
        for seq, _, content, vis, vf, ia in records:
            found = words(content)
            total += len(found)
            postings.update({(term, int(seq)): (tf, len(found), str(vis), vf, ia)
                             for term, tf in Counter(found).items()})
        index[hash_] = ScopeIndex(len(records), total,
                                  dict(Counter(term for term, _ in postings)), postings)
    return index


def check_sqlite_index(path: Path) -> dict[str, ScopeIndex]:
    """Every invariant of the stored index, and that it is exactly the rebuilt one."""
    stored = {hash_: scope for hash_, scope in stored_index(path).items() if scope.documents}
    assert stored == rebuilt_index(path)
    return stored
