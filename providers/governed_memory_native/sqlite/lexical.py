"""The scope-local lexical index on SQLite: its upkeep on every write, the batched merge
of its delta, and the postings a search reads.

Why a delta. The main index keeps the postings of a word in a scope as one B-tree range
(``lexical_postings``, keyed by scope, word and record) and the word's document count as
one row (``lexical_terms``): that is what lets a search read a few ranges and never count
the corpus. But a new record's dozen words then land on a dozen different leaf pages of
each table, and every dirty page is a 4 KiB frame the commit writes to the WAL before its
fsync. So a write puts the record's words into one ``lexical_delta`` row instead (rows of
a scope are keyed by the record's ever-growing ``seq``, so they append to one page), and
taking a merged record out of the index without erasing it (an update, a soft delete)
writes one ``lexical_tombstones`` row instead of deleting its postings and decrementing
its words. A search adds the delta and subtracts the tombstones of the scopes it reads,
so statistics, scores and ``candidates`` stay exactly the memory backend's. When a
scope's delta and tombstones reach ``lexical_delta_max`` rows, a merge
(:mod:`retrieval.merger`, a background write unit) moves them into the main index at once,
where many records share each page. A full delta that waits for its merge takes no more
rows: writes to that scope then index into the main tables directly, so a search never
reads more than the bound, whether a merger runs or not.

What every statement here keeps true:

- a counted (active) record's words are in exactly one place: live postings in
  ``lexical_postings``, or its ``lexical_delta`` row;
- a tombstone marks its record's rows in ``lexical_postings`` dead (they are the words of
  content the record no longer has); such a record has no live postings there;
- ``lexical_terms`` counts every row of ``lexical_postings``, dead or alive;
- ``lexical_scopes.pending`` is the scope's delta rows plus tombstones, and a scope's row
  stays while it counts a record or has anything pending (so a scope id is never reused
  while a row still names it);
- erasure removes the record's postings, word counts, delta row and tombstone physically,
  in its own transaction (the words of erased content are content).

Only SQLite keeps a delta: the memory and PostgreSQL backends index eagerly, and all three
rank alike because :mod:`retrieval.lexical` sees the same statistics and postings from each.
"""

from __future__ import annotations

import bisect
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Final, Protocol, cast

from governed_memory.records import MemoryRecord, RecordStatus

from governed_memory_native.retrieval.lexical import ExpiredDocument, OneTermAtATime, Statistics
from governed_memory_native.storage.port import SearchQuery

_CHUNK: Final = 500
"""Ids bound per statement; far below SQLite's variable limit."""

_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
"""Delta rows hold ``{"word":tf,...}`` in this exact form, so ``"word":`` found in the
text is that key (a word is letters and digits only: no quote can start or end inside)."""


class Statements(Protocol):
    """What the index needs of a transaction: statements with bound parameters."""

    async def fetch(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Rows as tuples (of a SELECT, or of a write with ``RETURNING``)."""
        ...

    async def execute(self, sql: str, params: Sequence[Any]) -> int:
        """Run a write; how many rows it changed."""
        ...


def _marks(count: int) -> str:
    return ", ".join("?" * count)


def _chunks(items: Sequence[int]) -> Iterable[Sequence[int]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start:start + _CHUNK]


def delta_terms(terms: Sequence[str]) -> str:
    """A record's words and their frequencies as its delta row stores them."""
    return _ENCODER.encode(Counter(terms))


class LexicalWrites:
    """The index's upkeep in one write transaction. ``delta_max`` 0 indexes every
    write into the main tables (no delta). ``due`` collects the scopes this transaction
    left with a full delta, for the backend to hand to a merger after the commit."""

    def __init__(self, db: Statements, delta_max: int) -> None:
        self._db = db
        self._max = delta_max
        self.due: set[int] = set()
        self._full: set[str] = set()
        """Scope hashes found full in this transaction: a batch of inserts (seeding
        through the port) stops claiming delta slots it would only give back."""

    def _note(self, scope_id: int, pending: int) -> None:
        if self._max and pending >= self._max:
            self.due.add(scope_id)

    async def add(self, seq: int, record: MemoryRecord, terms: Sequence[str]) -> None:
        """Count a new record (if active) in its scope and index its words."""
        await self._count(seq, record, terms, tombstoned=False)

    async def _count(self, seq: int, record: MemoryRecord, terms: Sequence[str], *,
                     tombstoned: bool) -> None:
        """Count a record the index does not count yet. ``tombstoned``: it may have a
        tombstone (it was merged once, then taken out), which must go before its words
        can be posted to the main tables."""
        if record.status is not RecordStatus.ACTIVE:
            return
        claim = 1 if terms and self._max and record.scope_hash not in self._full else 0
        rows = await self._db.fetch(
            "INSERT INTO lexical_scopes (scope_hash, documents, total_length, pending)"
            " VALUES (?, 1, ?, ?) ON CONFLICT (scope_hash) DO UPDATE SET"
            " documents = documents + 1, total_length = total_length + excluded.total_length,"
            " pending = pending + excluded.pending RETURNING scope_id, pending",
            (record.scope_hash, len(terms), claim))
        scope_id, pending = int(rows[0][0]), int(rows[0][1])
        await self._db.execute("INSERT INTO lexical_docs (doc, scope_id, length)"
                               " VALUES (?, ?, ?)", (seq, scope_id, len(terms)))
        if not terms:
            return
        if claim and pending <= self._max:
            await self._put_delta(scope_id, seq, record, terms)
            self._note(scope_id, pending)
            return
        if claim:  # the delta is full: give the slot back, post to the main tables
            await self._db.execute(
                "UPDATE lexical_scopes SET pending = pending - 1 WHERE scope_id = ?",
                (scope_id,))
            self._full.add(record.scope_hash)
        if self._max:
            self.due.add(scope_id)
        if tombstoned:
            await self._settle_tombstone(scope_id, seq)
        await self._post(scope_id, seq, record, terms)

    async def replace(self, seq: int, record: MemoryRecord, terms: Sequence[str]) -> None:
        """Re-index a record whose row was just replaced (new content, status, validity
        or visibility): its old words leave the index and its new ones (if it is still
        active) enter it, through the delta whenever the delta has room."""
        rows = await self._db.fetch(
            "SELECT d.scope_id, d.length, s.pending, EXISTS (SELECT 1 FROM lexical_delta AS x"
            " WHERE x.scope_id = d.scope_id AND x.doc = d.doc)"
            " FROM lexical_docs AS d JOIN lexical_scopes AS s USING (scope_id) WHERE d.doc = ?",
            (seq,))
        if not rows:  # not counted (pending review, superseded, deleted): nothing to take out
            await self._count(seq, record, terms, tombstoned=True)
            return
        scope_id, old_length, pending, in_delta = (int(value) for value in rows[0])
        active = record.status is RecordStatus.ACTIVE
        new_row = 1 if active and terms else 0
        change = 0  # to the scope's pending rows
        eager = False
        if in_delta:  # never merged: drop its row (which frees the slot its new one takes)
            await self._db.execute(
                "DELETE FROM lexical_delta WHERE scope_id = ? AND doc = ?", (scope_id, seq))
            change -= 1
        elif old_length:  # merged: live postings in the main tables
            if self._max and pending + 1 + new_row <= self._max:
                await self._db.execute(
                    "INSERT INTO lexical_tombstones (scope_id, doc) VALUES (?, ?)",
                    (scope_id, seq))
                change += 1
            else:
                await self._drop_postings([seq])
                eager = True
        else:  # counted without words: nothing indexed to take out
            eager = not (self._max and pending + new_row <= self._max)
        if new_row:
            if eager:
                await self._settle_tombstone(scope_id, seq)
                await self._post(scope_id, seq, record, terms)
            else:
                await self._put_delta(scope_id, seq, record, terms)
                change += 1
        if eager and self._max:
            self.due.add(scope_id)
        if active:
            await self._db.execute(
                "UPDATE lexical_scopes SET total_length = total_length + ?,"
                " pending = pending + ? WHERE scope_id = ?",
                (len(terms) - old_length, change, scope_id))
            if len(terms) != old_length:
                await self._db.execute("UPDATE lexical_docs SET length = ? WHERE doc = ?",
                                       (len(terms), seq))
        else:
            await self._db.execute(
                "UPDATE lexical_scopes SET documents = documents - 1,"
                " total_length = total_length - ?, pending = pending + ? WHERE scope_id = ?",
                (old_length, change, scope_id))
            await self._db.execute("DELETE FROM lexical_docs WHERE doc = ?", (seq,))
            await self._db.execute(
                "DELETE FROM lexical_scopes WHERE scope_id = ? AND documents <= 0"
                " AND pending <= 0", (scope_id,))
        self._note(scope_id, pending + change)

    async def erase(self, seqs: Sequence[int]) -> int:
        """Take records out of the index physically and exactly; how many it counted.

        Their delta rows, tombstones and postings go, word counts and scope statistics
        shrink by what they contributed, and a word (or scope) left with nothing loses
        its row, so an erased word leaves nothing behind (``secure_delete`` zeroes the
        freed bytes)."""
        docs = _marks(len(seqs))
        scopes = [int(row[0]) for row in await self._db.fetch(
            "SELECT DISTINCT s.scope_id FROM memory_records AS r JOIN lexical_scopes AS s"
            f" ON s.scope_hash = r.scope_hash WHERE r.seq IN ({docs})", seqs)]
        if not scopes:  # no scope row: nothing of these records is indexed
            return 0
        held: Counter[int] = Counter()
        for table in ("lexical_delta", "lexical_tombstones"):
            held.update(int(row[0]) for row in await self._db.fetch(
                f"DELETE FROM {table} WHERE scope_id IN ({_marks(len(scopes))})"
                f" AND doc IN ({docs}) RETURNING scope_id", [*scopes, *seqs]))
        for scope_id, count in sorted(held.items()):
            await self._db.execute(
                "UPDATE lexical_scopes SET pending = pending - ? WHERE scope_id = ?",
                (count, scope_id))
        await self._drop_postings(seqs)
        await self._db.execute(
            "UPDATE lexical_scopes SET"
            " documents = documents - (SELECT count(*) FROM lexical_docs AS d"
            f" WHERE d.doc IN ({docs}) AND d.scope_id = lexical_scopes.scope_id),"
            " total_length = total_length - (SELECT coalesce(sum(d.length), 0)"
            f" FROM lexical_docs AS d WHERE d.doc IN ({docs})"
            " AND d.scope_id = lexical_scopes.scope_id)"
            f" WHERE scope_id IN ({_marks(len(scopes))})", [*seqs, *seqs, *scopes])
        await self._db.execute(
            "DELETE FROM lexical_scopes WHERE documents <= 0 AND pending <= 0"
            f" AND scope_id IN ({_marks(len(scopes))})", scopes)
        return await self._db.execute(f"DELETE FROM lexical_docs WHERE doc IN ({docs})",
                                      seqs)

    async def merge(self, scope_ids: Sequence[int], at_least: int) -> int:
        """Merge the delta and tombstones of each of ``scope_ids`` that holds at least
        ``at_least`` (and at least one) of them into the main tables; how many rows were
        merged. Another writer (another process's merger) may have merged a scope since
        it was reported: it is then skipped."""
        merged = 0
        for chunk in _chunks(sorted(set(scope_ids))):
            rows = await self._db.fetch(
                "SELECT scope_id, pending FROM lexical_scopes"
                f" WHERE scope_id IN ({_marks(len(chunk))}) AND pending >= ? AND pending > 0",
                [*chunk, at_least])
            for scope_id, pending in rows:
                await self._merge_scope(int(scope_id))
                merged += int(pending)
        return merged

    async def _merge_scope(self, scope_id: int) -> None:
        dead = ("SELECT p.term FROM lexical_tombstones AS t JOIN lexical_postings AS p"
                " ON p.scope_id = t.scope_id AND p.doc = t.doc WHERE t.scope_id = ?")
        # Each word's count moves by its delta records minus its tombstoned postings.
        await self._db.execute(
            "INSERT INTO lexical_terms (scope_id, term, documents)"
            " SELECT ?, term, sum(n) FROM (SELECT j.key AS term, 1 AS n"
            " FROM lexical_delta AS d, json_each(d.terms) AS j WHERE d.scope_id = ?"
            f" UNION ALL SELECT term, -1 FROM ({dead})) WHERE true"
            " GROUP BY term HAVING sum(n) <> 0 ON CONFLICT (scope_id, term)"
            " DO UPDATE SET documents = documents + excluded.documents",
            (scope_id, scope_id, scope_id))
        await self._db.execute(
            f"DELETE FROM lexical_terms WHERE scope_id = ? AND documents <= 0 AND term IN ({dead})",
            (scope_id, scope_id))
        await self._db.execute(
            "DELETE FROM lexical_postings WHERE doc IN"
            " (SELECT doc FROM lexical_tombstones WHERE scope_id = ?)", (scope_id,))
        await self._db.execute(
            "INSERT INTO lexical_postings (scope_id, term, doc, tf, length, visibility,"
            " valid_from, invalid_at) SELECT d.scope_id, j.key, d.doc, j.value, d.length,"
            " d.visibility, d.valid_from, d.invalid_at"
            " FROM lexical_delta AS d, json_each(d.terms) AS j WHERE d.scope_id = ?"
            " ORDER BY j.key, d.doc", (scope_id,))
        await self._db.execute("DELETE FROM lexical_delta WHERE scope_id = ?", (scope_id,))
        await self._db.execute("DELETE FROM lexical_tombstones WHERE scope_id = ?",
                               (scope_id,))
        await self._db.execute("UPDATE lexical_scopes SET pending = 0 WHERE scope_id = ?",
                               (scope_id,))
        await self._db.execute(
            "DELETE FROM lexical_scopes WHERE scope_id = ? AND documents <= 0", (scope_id,))

    async def _put_delta(self, scope_id: int, seq: int, record: MemoryRecord,
                         terms: Sequence[str]) -> None:
        await self._db.execute(
            "INSERT INTO lexical_delta (scope_id, doc, length, terms, visibility, valid_from,"
            " invalid_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (scope_id, seq, len(terms), delta_terms(terms), record.visibility.value,
             record.valid_from, record.invalid_at))

    async def _post(self, scope_id: int, seq: int, record: MemoryRecord,
                    terms: Sequence[str]) -> None:
        """Write a record's postings and word counts into the main tables directly."""
        counts = delta_terms(terms)
        await self._db.execute(
            "INSERT INTO lexical_postings (scope_id, term, doc, tf, length, visibility,"
            " valid_from, invalid_at) SELECT ?, key, ?, value, ?, ?, ?, ? FROM json_each(?)",
            (scope_id, seq, len(terms), record.visibility.value, record.valid_from,
             record.invalid_at, counts))
        await self._db.execute(
            "INSERT INTO lexical_terms (scope_id, term, documents)"
            " SELECT ?, key, 1 FROM json_each(?) WHERE true"
            " ON CONFLICT (scope_id, term) DO UPDATE SET documents = documents + 1",
            (scope_id, counts))

    async def _settle_tombstone(self, scope_id: int, seq: int) -> None:
        """Apply a record's tombstone now, if it has one: its dead postings go."""
        if await self._db.execute(
                "DELETE FROM lexical_tombstones WHERE scope_id = ? AND doc = ?",
                (scope_id, seq)):
            await self._db.execute(
                "UPDATE lexical_scopes SET pending = pending - 1 WHERE scope_id = ?",
                (scope_id,))
            await self._drop_postings([seq])

    async def _drop_postings(self, seqs: Sequence[int]) -> None:
        """Delete the records' rows of ``lexical_postings`` and the word counts they made."""
        docs = _marks(len(seqs))
        terms_of = f"SELECT scope_id, term FROM lexical_postings WHERE doc IN ({docs})"
        await self._db.execute(
            "UPDATE lexical_terms SET documents = documents - (SELECT count(*)"
            f" FROM lexical_postings AS p WHERE p.doc IN ({docs})"
            " AND p.scope_id = lexical_terms.scope_id AND p.term = lexical_terms.term)"
            f" WHERE (scope_id, term) IN ({terms_of})", [*seqs, *seqs])
        await self._db.execute(
            f"DELETE FROM lexical_terms WHERE documents <= 0 AND (scope_id, term) IN ({terms_of})",
            seqs)
        await self._db.execute(f"DELETE FROM lexical_postings WHERE doc IN ({docs})", seqs)


def _statistics_sql(scopes: int, terms: int, wanted: str, join: str) -> str:
    """A search's statistics in one statement, read once per search: each scope's id,
    record count and total length; each query term's document count in the main tables,
    summed over the scopes; the expired records the stored statistics still count, with
    their query terms' frequencies there; the delta records holding a query term, with
    its frequency and whether they pass the filters; the tombstoned postings of the
    query terms. Binds the scope hashes, the terms, the terms, the scope hashes, now,
    the filter's parameters, (term, JSON path, needle) per term, the terms."""
    words = _marks(terms)
    needles = ", ".join("(?, ?, ?)" for _ in range(terms))
    return (
        "WITH s AS (SELECT scope_id, documents, total_length, pending FROM lexical_scopes"
        f" WHERE scope_hash IN ({_marks(scopes)}))"
        " SELECT 'scope', NULL, scope_id, documents, total_length, NULL FROM s"
        " UNION ALL SELECT 'term', t.term, NULL, sum(t.documents), NULL, NULL"
        " FROM lexical_terms AS t JOIN s USING (scope_id)"
        f" WHERE t.term IN ({words}) GROUP BY t.term"
        " UNION ALL SELECT 'expired', p.term, r.seq, r.token_count, p.tf, NULL"
        " FROM memory_records AS r LEFT JOIN lexical_postings AS p"
        f" ON p.doc = r.seq AND p.term IN ({words})"
        f" WHERE r.scope_hash IN ({_marks(scopes)}) AND r.status = 'active'"
        " AND r.expires_at <= ?"
        " UNION ALL SELECT 'delta', q.column1, p.doc, p.length,"
        f" json_extract(p.terms, q.column2), {wanted}"
        f" FROM s JOIN lexical_delta AS p ON p.scope_id = s.scope_id {join}"
        f" JOIN (VALUES {needles}) AS q ON instr(p.terms, q.column3) > 0"
        " WHERE s.pending > 0"
        # CROSS JOIN fixes the order: each tombstone probes the postings by key (the
        # other way round would walk every posting of a common word).
        " UNION ALL SELECT 'dead', p.term, p.doc, NULL, NULL, NULL"
        " FROM s CROSS JOIN lexical_tombstones AS t CROSS JOIN lexical_postings AS p"
        f" WHERE s.pending > 0 AND t.scope_id = s.scope_id AND p.scope_id = t.scope_id"
        f" AND p.term IN ({words}) AND p.doc = t.doc"
    )


def _without(rows: list[tuple[int, int, int]], docs: set[int], *,
             sorted_by_doc: bool) -> list[tuple[int, int, int]]:
    """``rows`` less those of ``docs`` (a few tombstoned records). One scope's postings
    come in ``doc`` order, so each is found by bisection instead of walking the ten
    thousand postings of a common word; several scopes' postings are filtered."""
    if not sorted_by_doc:
        return [row for row in rows if row[0] not in docs]
    for doc in sorted(docs, reverse=True):
        at = bisect.bisect_left(rows, (doc,))
        if at < len(rows) and rows[at][0] == doc:
            del rows[at]
    return rows


class SqlitePostings(OneTermAtATime[int]):
    """:class:`lexical_topk.PostingsSource` over the ``lexical_*`` tables for one search;
    a document is its record's ``seq``. Every statement reads by ``(scope, term)`` or by
    key through an index; none counts or scans the corpus. The searched scopes' delta
    and tombstones (at most ``lexical_delta_max`` rows each) are read once, with the
    statistics, and folded into every answer.

    ``wanted`` is the search's filters as one SQL boolean over ``p`` (a posting or delta
    row: validity and visibility are copied in) and, when ``join`` brings it in, ``r``
    (the record)."""

    def __init__(self, db: Statements, query: SearchQuery, wanted: tuple[str, list[Any]],
                 join: str) -> None:
        self._db = db
        self._query = query
        self._scope_ids: list[int] = []
        self._wanted, self._wanted_params = wanted
        self._join = join
        self._delta: dict[str, dict[int, tuple[int, int, bool]]] = {}
        """Per query term: the delta records holding it, ``(tf, length, passes filters)``."""
        self._dead: dict[str, set[int]] = {}
        """Per query term: the tombstoned records whose main postings hold it."""

    async def statistics(self, terms: Sequence[str]) -> Statistics[int]:
        scopes = list(dict.fromkeys(self._query.scope_hashes))
        needles = [value for term in terms
                   for value in (term, "$." + _ENCODER.encode(term),
                                 _ENCODER.encode(term) + ":")]
        rows = await self._db.fetch(
            _statistics_sql(len(scopes), len(terms), self._wanted, self._join),
            [*scopes, *terms, *terms, *scopes, self._query.now, *self._wanted_params,
             *needles, *terms])
        documents = total = 0
        containing: dict[str, int] = {}
        main_expired: dict[int, tuple[int, list[tuple[str, int]]]] = {}
        delta, dead = self._delta, self._dead
        for kind, term, a, b, c, d in rows:
            if kind == "scope":
                self._scope_ids.append(int(a))
                documents += int(b)
                total += int(c)
            elif kind == "term":
                containing[term] = int(b)
            elif kind == "expired":
                found = main_expired.setdefault(int(a), (int(b), []))[1]
                if term is not None:
                    found.append((term, int(c)))
            elif kind == "delta":
                if c is not None:  # the key itself (a needle is never a false match)
                    delta.setdefault(term, {})[int(a)] = (int(c), int(b), bool(d))
            else:
                dead.setdefault(term, set()).add(int(a))
        for term, held in delta.items():
            containing[term] = containing.get(term, 0) + len(held)
        for term, gone in dead.items():
            containing[term] = containing.get(term, 0) - len(gone)
        expired = []
        for doc, (length, found) in sorted(main_expired.items()):
            frequencies = {term: tf for term, tf in found if doc not in dead.get(term, ())}
            for term, held in delta.items():
                if doc in held:
                    frequencies[term] = held[doc][0]
            expired.append(ExpiredDocument(doc, length, frequencies))
        return Statistics(documents, total, containing, expired)

    async def postings_of(self, term: str) -> list[tuple[int, int, int]]:
        """Integers straight from SQLite (the columns are INTEGER), unconverted."""
        if not self._scope_ids:
            return []
        single = len(self._scope_ids) == 1
        # One scope's range is already in doc order: the ORDER BY costs no sort (it only
        # pins the order should a filter's join make the planner start elsewhere).
        rows = cast(list[tuple[int, int, int]], await self._db.fetch(
            f"SELECT p.doc, p.tf, p.length FROM lexical_postings AS p {self._join}"
            f" WHERE p.scope_id IN ({_marks(len(self._scope_ids))}) AND p.term = ?"
            f" AND {self._wanted}" + (" ORDER BY p.doc" if single else ""),
            [*self._scope_ids, term, *self._wanted_params]))
        gone = self._dead.get(term)
        if gone:
            rows = _without(rows, gone, sorted_by_doc=single)
        held = self._delta.get(term)
        if held:
            rows.extend((doc, tf, length) for doc, (tf, length, wanted) in held.items()
                        if wanted)
        return rows

    async def probe(self, terms: Sequence[str], docs: Sequence[int], *,
                    next_read: str | None = None) -> dict[str, dict[int, int]]:
        """Every term at once: one statement per chunk of documents, each lookup by the
        primary key (scope, term, doc)."""
        found: dict[str, dict[int, int]] = {term: {} for term in terms}
        if self._scope_ids and terms:
            where = (f"scope_id IN ({_marks(len(self._scope_ids))})"
                     f" AND term IN ({_marks(len(terms))})")
            for chunk in _chunks(list(docs)):
                rows = cast(list[tuple[str, int, int]], await self._db.fetch(
                    f"SELECT term, doc, tf FROM lexical_postings WHERE {where}"
                    f" AND doc IN ({_marks(len(chunk))})",
                    [*self._scope_ids, *terms, *chunk]))
                for term, doc, tf in rows:
                    found[term][doc] = tf
        for term, held in found.items():
            for doc in self._dead.get(term, ()):
                held.pop(doc, None)
            delta = self._delta.get(term)
            if delta:
                for doc in docs:
                    if doc in delta:
                        held[doc] = delta[doc][0]
        return found

    async def identify(self, docs: Sequence[int]) -> dict[int, str]:
        found: dict[int, str] = {}
        for chunk in _chunks(list(docs)):
            rows = await self._db.fetch(
                f"SELECT seq, id FROM memory_records WHERE seq IN ({_marks(len(chunk))})",
                chunk)
            found.update((int(row[0]), str(row[1])) for row in rows)
        return found
