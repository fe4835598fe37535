"""Lexical search on PostgreSQL: BM25 over the ``lexical_*`` tables in a few round trips.

It scores exactly as the other backends do: the ``lexical_*`` tables hold each scope's
statistics and the shared tokenizer's words, kept on every write by the record statements
(:mod:`postgres.statements`), and :mod:`retrieval.lexical` ranks over them, reading postings
by ``(scope, term)`` through the primary key; PostgreSQL's own text search plays no part
(see :class:`PostgresLexicalSearch`). What is PostgreSQL's own here is the round trips: a
search's statistics arrive with its first postings, and a probe brings the next read
along (:data:`READ_AHEAD`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from governed_memory_native.postgres.dialect import PostgresDialect
from governed_memory_native.postgres.filters import filter_clause, needs_records
from governed_memory_native.retrieval.lexical import (
    COMMON_SHARE,
    READ_TOGETHER,
    ExpiredDocument,
    PostingsSource,
    Statistics,
)
from governed_memory_native.sql.dialect import chunks
from governed_memory_native.sql.records import SqlLexicalSearch
from governed_memory_native.storage.values import SearchQuery


def _statistics_sql(postings: str) -> str:
    """A search's statistics and its first postings in one round trip: each scope's id,
    record count and total length; each query term's document frequency summed over
    the scopes; the expired records the stored statistics still count (with their
    query-term frequencies); and the postings (``postings``, the search's filtered
    postings statement over ``wanted_terms``) of the terms
    :func:`retrieval.lexical.first_reads` picks (the same rule, on the stored frequencies:
    the same terms unless a record of the scopes has expired), so the first request of
    the search is answered from here."""
    return (
        "WITH s AS (SELECT scope_id, documents, total_length FROM lexical_scopes"
        " WHERE scope_hash = ANY(%(scopes)s)),"
        " t AS (SELECT t.term, sum(t.documents)::bigint AS df"
        " FROM lexical_terms AS t JOIN s USING (scope_id)"
        " WHERE t.term = ANY(%(terms)s) GROUP BY t.term),"
        " wanted_terms AS (SELECT term FROM (SELECT term, df,"
        " sum(df) OVER (ORDER BY df, term) AS running,"
        " row_number() OVER (ORDER BY df, term) AS n FROM t) AS o"
        " WHERE n = 1 OR (running <= %(together)s"
        " AND df * %(common)s <= (SELECT sum(documents) FROM s)))"
        " SELECT 'scope' AS kind, NULL::text AS term, s.scope_id::bigint AS a,"
        " s.documents AS b, s.total_length AS c FROM s"
        " UNION ALL SELECT 'term', term, NULL, df, NULL FROM t"
        # active records of the scopes that expired by now: counted, but not in the corpus
        " UNION ALL SELECT 'expired', p.term, r.seq, r.token_count::bigint, p.tf::bigint"
        " FROM memory_records AS r LEFT JOIN lexical_postings AS p"
        " ON p.doc = r.seq AND p.term = ANY(%(terms)s)"
        " WHERE r.scope_hash = ANY(%(scopes)s) AND r.status = 'active'"
        " AND r.expires_at <= %(now)s"
        " UNION ALL SELECT 'read', term, NULL, NULL, NULL FROM wanted_terms"
        f" UNION ALL SELECT 'posting', x.term, x.doc, x.tf, x.length FROM ({postings}) AS x"
    )


READ_AHEAD: Final = 2_000
"""Postings of the next term a search may read that a probe brings along (the read then
costs no round trip of its own). It bounds what a read ahead that pruning then spares
costs: a few round trips' worth of rows received and decoded."""

_PREFETCH_SCOPES: Final = "ARRAY(SELECT scope_id FROM s)"
_PREFETCH_TERMS: Final = "ARRAY(SELECT term FROM wanted_terms)"


class PostgresLexicalSearch(SqlLexicalSearch):
    """PostgreSQL's own text search is not used for ranking: its parsers and
    dictionaries split and stem words differently from :mod:`retrieval.tokens`, and ``ts_rank`` is
    not BM25, so neither matches nor scores would equal the other backends'."""

    __slots__ = ("_tx",)

    cooperative = True  # the ranking runs on the event loop, between round trips

    def __init__(self, tx: PostgresDialect) -> None:
        super().__init__(tx)
        self._tx = tx

    def source(self, query: SearchQuery) -> PostingsSource[int]:
        return _PostgresPostings(self._tx, query)


class _PostgresPostings:
    """:class:`retrieval.lexical.PostingsSource` over the ``lexical_*`` tables for one search;
    a document is its record's ``seq``. Every statement reads by ``(scope, term)`` or
    by key through an index; none counts or scans the corpus.

    Round trips: the statistics come with the postings of the terms the search reads
    first (:data:`retrieval.lexical.READ_TOGETHER`); every later request, for any number of
    terms, is one statement; probes of a term whose postings are held are answered
    here. A search is then typically three or four round trips: statistics, one or two
    requests of probes, the winners' rows (:mod:`sql.records`)."""

    def __init__(self, tx: PostgresDialect, query: SearchQuery) -> None:
        self._tx = tx
        self._query = query
        self._scope_ids: list[int] = []
        wanted, self._params = filter_clause(query, copied="p")
        join = "JOIN memory_records AS r ON r.seq = p.doc" if needs_records(query) else ""
        self._postings = ("SELECT p.term AS term, p.doc AS doc, p.tf AS tf,"
                          " p.length AS length"
                          f" FROM lexical_postings AS p {join}"
                          " WHERE p.scope_id = ANY(@scopes) AND p.term = ANY(@terms)"
                          f" AND {wanted}")
        self._held: dict[str, list[tuple[int, int, int]]] = {}
        """Every (filtered) posting of the terms read so far, by term."""
        self._by_doc: dict[str, dict[int, int]] = {}
        self._remote: dict[str, dict[int, int]] = {}
        """Probe answers that came with a read ahead, until the probe returns them."""
        self._containing: dict[str, int] = {}

    async def statistics(self, terms: Sequence[str]) -> Statistics[int]:
        prefetch = self._postings.replace("@scopes", _PREFETCH_SCOPES).replace(
            "@terms", _PREFETCH_TERMS)
        rows = await self._tx.tuples(_statistics_sql(prefetch), {
            **self._params, "scopes": list(dict.fromkeys(self._query.scope_hashes)),
            "terms": list(terms), "now": self._query.now, "together": READ_TOGETHER,
            "common": COMMON_SHARE})
        documents = total = 0
        containing: dict[str, int] = {}
        expired: dict[int, tuple[int, dict[str, int]]] = {}
        held = self._held
        for kind, term, a, b, c in rows:
            if kind == "posting":
                held[term].append((a, b, c))
            elif kind == "read":
                held[term] = []
            elif kind == "scope":
                self._scope_ids.append(int(a))
                documents += int(b)
                total += int(c)
            elif kind == "term":
                containing[str(term)] = int(b)
                self._containing[str(term)] = int(b)
            else:
                found = expired.setdefault(int(a), (int(b), {}))[1]
                if term is not None:
                    found[str(term)] = int(c)
        return Statistics(documents, total, containing, [
            ExpiredDocument(doc, length, found)
            for doc, (length, found) in sorted(expired.items())])

    async def postings(self, terms: Sequence[str]) -> dict[str, list[tuple[int, int, int]]]:
        held = self._held
        missing = [term for term in terms if term not in held]
        if missing:
            rows = await self._tx.tuples(
                self._postings.replace("@scopes", "%(ids)s").replace("@terms", "%(terms)s"),
                {**self._params, "ids": self._scope_ids, "terms": missing})
            for term in missing:
                held[term] = []
            for term, doc, tf, length in rows:
                held[term].append((doc, tf, length))
        return {term: held[term] for term in terms}

    async def probe(self, terms: Sequence[str], docs: Sequence[int], *,
                    next_read: str | None = None) -> dict[str, dict[int, int]]:
        """Terms whose postings are held are answered here; the others in one statement
        per thousand documents, which also brings ``next_read``'s postings when they
        are at most :data:`READ_AHEAD` (the read that likely follows then costs no round
        trip; if pruning spares it, they were read for nothing)."""
        held = self._held
        ahead = (next_read if next_read is not None and next_read not in held
                 and 0 < self._containing.get(next_read, 0) <= READ_AHEAD else None)
        remote = [term for term in terms if term not in held and term != ahead]
        docs = list(docs)
        if ahead is not None:
            probes = ("SELECT 'probe', term, doc, tf, NULL::integer FROM lexical_postings"
                      " WHERE scope_id = ANY(%(ids)s) AND term = ANY(%(probed)s)"
                      " AND doc = ANY(%(docs)s)")
            whole = self._postings.replace("@scopes", "%(ids)s").replace("@terms",
                                                                        "%(ahead)s")
            held[ahead] = []
            for kind, term, doc, tf, length in await self._tx.tuples(
                    f"SELECT 'posting', * FROM ({whole}) AS a UNION ALL {probes}",
                    {**self._params, "ids": self._scope_ids, "ahead": [ahead],
                     "probed": remote, "docs": docs[: self._tx.chunk]}):
                if kind == "posting":
                    held[term].append((doc, tf, length))
                else:
                    self._remote.setdefault(term, {})[doc] = tf
            docs_left = docs[self._tx.chunk:]
        else:
            docs_left = docs
        found: dict[str, dict[int, int]] = {}
        for term in remote:
            found[term] = self._remote.pop(term, {})
        if remote:
            for chunk in chunks(docs_left, self._tx.chunk):
                for term, doc, tf in await self._tx.tuples(
                        "SELECT term, doc, tf FROM lexical_postings WHERE scope_id = ANY(%s)"
                        " AND term = ANY(%s) AND doc = ANY(%s)",
                        (self._scope_ids, remote, chunk)):
                    found[term][doc] = tf
        for term in terms:
            if term in found:
                continue
            by_doc = self._by_doc.get(term)
            if by_doc is None:
                by_doc = self._by_doc[term] = {doc: tf for doc, tf, _ in held[term]}
            found[term] = {doc: by_doc[doc] for doc in docs if doc in by_doc}
        return found

    async def identify(self, docs: Sequence[int]) -> dict[int, str]:
        found: dict[int, str] = {}
        for chunk in chunks(list(docs), self._tx.chunk):
            rows = await self._tx.rows(
                "SELECT seq, id FROM memory_records WHERE seq = ANY(%s)", (list(chunk),))
            found.update((int(row["seq"]), str(row["id"])) for row in rows)
        return found
