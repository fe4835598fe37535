"""Rebuilding the PostgreSQL lexical index from the records, when the analyzer changes.

SQLite rebuilds in SQL, because its migrations can call the analyzer as a registered
function (``gm_index_text``); PostgreSQL cannot run Python, and its own text search
stems by other rules, so the terms are computed here, from each record's content,
with :func:`tokens.words`, exactly as every write computes them. It runs inside the
migration's transaction, under the schema's exclusive lock: no writer sees a half-built
index, and a failure leaves the old one in place.

Records are read through a server-side cursor in pages, so memory holds one page and
the per-scope counters, never the corpus; documents and postings go in by COPY, the
statistics are summed in SQL afterwards.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Final

from psycopg import AsyncConnection

from governed_memory_native.postgres.rows import decode_text
from governed_memory_native.retrieval.tokens import words

PAGE: Final = 2_000
"""Records read per round trip."""


async def rebuild_lexical_index(conn: AsyncConnection[dict[str, Any]]) -> int:
    """Empty every lexical table and index each active record's content again; every
    record's ``token_count`` is recounted. Returns how many records were indexed."""
    await conn.execute(
        "TRUNCATE lexical_postings, lexical_terms, lexical_docs, lexical_scopes")
    await conn.execute(
        "CREATE TEMPORARY TABLE gm_token_counts (seq bigint PRIMARY KEY,"
        " token_count integer NOT NULL) ON COMMIT DROP")
    cursor = await conn.execute(
        "INSERT INTO lexical_scopes (scope_hash, documents, total_length)"
        " SELECT DISTINCT scope_hash, 0, 0 FROM memory_records WHERE status = 'active'"
        " ORDER BY scope_hash RETURNING scope_id, scope_hash")
    scope_ids = {str(row["scope_hash"]): int(row["scope_id"])
                 for row in await cursor.fetchall()}
    indexed = 0
    async with conn.cursor(name="gm_lexical_rebuild") as records:
        await records.execute(
            "SELECT seq, scope_hash, status, content, visibility, valid_from, invalid_at"
            " FROM memory_records ORDER BY seq")
        while page := await records.fetchmany(PAGE):
            indexed += await _write_page(conn, page, scope_ids)
    await conn.execute(
        "UPDATE memory_records AS r SET token_count = c.token_count"
        " FROM gm_token_counts AS c WHERE c.seq = r.seq"
        " AND r.token_count IS DISTINCT FROM c.token_count")
    await conn.execute(
        "UPDATE lexical_scopes AS s SET documents = d.documents, total_length = d.total"
        " FROM (SELECT scope_id, count(*) AS documents, sum(length) AS total"
        " FROM lexical_docs GROUP BY scope_id) AS d WHERE d.scope_id = s.scope_id")
    await conn.execute(
        "INSERT INTO lexical_terms (scope_id, term, documents)"
        " SELECT scope_id, term, count(*) FROM lexical_postings GROUP BY scope_id, term")
    # The tables changed shape at once: fresh planner statistics (see _bulk_index).
    await conn.execute("ANALYZE lexical_postings, lexical_terms, lexical_docs, lexical_scopes")
    return indexed


async def _write_page(conn: AsyncConnection[dict[str, Any]], page: list[dict[str, Any]],
                      scope_ids: dict[str, int]) -> int:
    """One page of records: every record's token count, and documents and postings of
    the active ones."""
    counted: list[tuple[int, int]] = []
    documents: list[tuple[int, int, int]] = []
    postings: list[tuple[Any, ...]] = []
    for row in page:
        terms = words(decode_text(row["content"]) or "")
        seq = int(row["seq"])
        counted.append((seq, len(terms)))
        if row["status"] != "active":
            continue
        scope_id = scope_ids[str(row["scope_hash"])]
        documents.append((seq, scope_id, len(terms)))
        postings.extend((scope_id, term, seq, tf, len(terms), row["visibility"],
                         row["valid_from"], row["invalid_at"])
                        for term, tf in Counter(terms).items())
    async with conn.cursor() as cursor:
        async with cursor.copy("COPY gm_token_counts (seq, token_count) FROM STDIN") as copy:
            for count in counted:
                await copy.write_row(count)
        async with cursor.copy("COPY lexical_docs (doc, scope_id, length) FROM STDIN") as copy:
            for document in documents:
                await copy.write_row(document)
        async with cursor.copy(
                "COPY lexical_postings (scope_id, term, doc, tf, length, visibility,"
                " valid_from, invalid_at) FROM STDIN") as copy:
            for posting in postings:
                await copy.write_row(posting)
    return len(documents)
