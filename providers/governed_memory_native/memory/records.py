"""The in-memory records and their lexical index, which every record write keeps.

A record's row and its place in its scope's :class:`~memory.state.ScopeLexicon` change
together, through the transaction's journal, as the SQL backends' inserts carry their
``lexical_*`` rows; a lexical search then ranks over those lexicons with
:mod:`retrieval.lexical`, exactly as it does over the SQL tables. Erasure
(:mod:`memory.repositories`) takes records out through :meth:`MemoryRecords.unindex`
and :meth:`MemoryRecords.release_key`.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import attrs
from governed_memory.errors import MemoryConflictError
from governed_memory.records import IndexState, MemoryRecord, MemoryType, RecordStatus

from governed_memory_native.memory.state import (
    Repository,
    Row,
    ScopeLexicon,
    State,
    passes_filters,
)
from governed_memory_native.retrieval.lexical import (
    ExpiredDocument,
    OneTermAtATime,
    Statistics,
    top_k,
)
from governed_memory_native.storage.values import ScoredRecord, SearchPage, SearchQuery


class MemoryRecords(Repository):
    __slots__ = ()

    async def get(self, scope_hash: str, record_id: str) -> MemoryRecord | None:
        row = self._state.rows.get(record_id)
        if row is None or row.record.scope_hash != scope_hash:
            return None
        return row.record

    async def by_key(self, scope_hash: str, key: str) -> MemoryRecord | None:
        record_id = self._state.keys.get((scope_hash, key))
        return None if record_id is None else self._state.rows[record_id].record

    async def visible(
        self, scope_hash: str, after_id: str | None, limit: int,
        memory_types: tuple[MemoryType, ...], now: float,
    ) -> list[MemoryRecord]:
        found = sorted(
            (row.record for row in self._state.rows.values()
             if row.record.scope_hash == scope_hash and row.record.is_visible(now)
             and (after_id is None or row.record.id > after_id)
             and (not memory_types or row.record.memory_type in memory_types)),
            key=lambda record: record.id,
        )
        return found[:limit]

    async def pending(self, scope_hash: str, after_id: str | None, limit: int,
                           now: float) -> list[MemoryRecord]:
        found = sorted(
            (row.record for row in self._state.rows.values()
             if row.record.scope_hash == scope_hash
             and row.record.status is RecordStatus.PENDING_REVIEW
             and not row.record.is_expired(now)
             and (after_id is None or row.record.id > after_id)),
            key=lambda record: record.id)
        return found[:limit]

    async def canonical(self, scope_hash: str, content_hash: str,
                                   key: str | None, now: float) -> MemoryRecord | None:
        found = [row.record for row in self._state.rows.values()
                 if row.record.scope_hash == scope_hash
                 and row.record.content_hash == content_hash and row.record.key == key
                 and is_canonical(row.record, now)]
        return min(found, key=lambda record: record.id, default=None)

    async def by_ids(self, scope_hashes: Sequence[str],
                             record_ids: Sequence[str]) -> list[MemoryRecord]:
        scopes = set(scope_hashes)
        rows = (self._state.rows.get(record_id) for record_id in dict.fromkeys(record_ids))
        return [row.record for row in rows if row is not None and row.record.scope_hash in scopes]

    async def scan(
        self, scope_hash: str, after_id: str | None, limit: int
    ) -> list[MemoryRecord]:
        found = sorted(
            (row.record for row in self._state.rows.values()
             if row.record.scope_hash == scope_hash
             and (after_id is None or row.record.id > after_id)),
            key=lambda record: record.id,
        )
        return found[:limit]

    async def ids_in_scope(
        self, scope_hash: str, after_id: str | None, limit: int
    ) -> list[str]:
        return [record.id for record in await self.scan(scope_hash, after_id, limit)]

    async def ids_of_user(self, tenant_id: str, user_id: str, limit: int) -> list[str]:
        return sorted(
            record_id for record_id, row in self._state.rows.items()
            if row.record.scope.tenant_id == tenant_id and row.record.scope.user_id == user_id
        )[:limit]

    async def usage(self, tenant_id: str, scope_hash: str | None, now: float) -> tuple[int, int]:
        counted = [row.record for row in self._state.rows.values()
                   if row.record.scope.tenant_id == tenant_id
                   and (scope_hash is None or row.record.scope_hash == scope_hash)
                   and row.record.status is not RecordStatus.DELETED
                   and not row.record.is_expired(now)]
        return len(counted), sum(len(record.content.encode("utf-8")) for record in counted)

    async def live_count(self, now: float) -> int:
        return sum(1 for row in self._state.rows.values()
                   if row.record.status is not RecordStatus.DELETED
                   and not row.record.is_expired(now))

    async def expired(self, now: float, limit: int) -> list[tuple[str, str]]:
        found = heapq.nsmallest(
            limit, ((expires, row.record.id, row.record.scope.tenant_id)
                    for row in self._state.rows.values()
                    if (expires := row.record.expires_at) is not None and expires <= now))
        return [(record_id, tenant_id) for _, record_id, tenant_id in found]

    async def expired_among(self, tenant_id: str, record_ids: Sequence[str],
                            now: float) -> list[str]:
        rows = (self._state.rows.get(record_id) for record_id in set(record_ids))
        return sorted(row.record.id for row in rows
                      if row is not None and row.record.scope.tenant_id == tenant_id
                      and row.record.is_expired(now))

    async def insert(self, record: MemoryRecord) -> None:
        if record.id in self._state.rows:
            raise MemoryConflictError("a record with this id already exists")
        self._claim_key(record)
        row = Row.of(record)
        self._journal.set(self._state.rows, record.id, row)
        self._index(row)
        self._advance(record.scope_hash)

    async def replace(self, record: MemoryRecord, expected_revision: str) -> bool:
        current = self._state.rows.get(record.id)
        if current is None or current.record.revision != expected_revision:
            return False
        self.release_key(current.record)
        self._claim_key(record)
        self.unindex(current)
        row = Row.of(record)
        self._journal.set(self._state.rows, record.id, row)
        self._index(row)
        self._advance(record.scope_hash)
        return True

    async def mark_indexed(self, record_id: str, version: int) -> None:
        row = self._state.rows.get(record_id)
        if (row is not None and row.record.version == version
                and row.record.index_state is not IndexState.INDEXED):
            self._journal.set(self._state.rows, record_id,
                      attrs.evolve(row, record=attrs.evolve(row.record,
                                                            index_state=IndexState.INDEXED)))
            self._advance(row.record.scope_hash)

    def _index(self, row: Row) -> None:
        """Count an active record in its scope's statistics and postings."""
        document = row.document
        if document is None:
            return
        scope_hash = row.record.scope_hash
        lexicon = self._state.lexicon.get(scope_hash)
        if lexicon is None:
            lexicon = ScopeLexicon()
            self._journal.set(self._state.lexicon, scope_hash, lexicon)
        lexicon.add(document, row.record.expires_at is not None)
        self._journal.log(lambda: lexicon.remove(document))

    def unindex(self, row: Row) -> None:
        """Take a record out of its scope's statistics and postings (exactly: a scope
        left with no record has no lexicon at all)."""
        document = row.document
        if document is None:
            return
        scope_hash = row.record.scope_hash
        lexicon = self._state.lexicon[scope_hash]
        expires = row.record.expires_at is not None
        lexicon.remove(document)
        self._journal.log(lambda: lexicon.add(document, expires))
        if not lexicon.documents:
            self._journal.pop(self._state.lexicon, scope_hash)

    def _claim_key(self, record: MemoryRecord) -> None:
        if record.key is None or record.status is RecordStatus.DELETED:
            return
        slot = (record.scope_hash, record.key)
        holder = self._state.keys.get(slot)
        if holder is not None and holder != record.id:
            raise MemoryConflictError("the key is already used by a record in this scope")
        self._journal.set(self._state.keys, slot, record.id)

    def release_key(self, record: MemoryRecord) -> None:
        slot = (record.scope_hash, record.key) if record.key is not None else None
        if slot is not None and self._state.keys.get(slot) == record.id:
            self._journal.pop(self._state.keys, slot)


class MemoryLexicalSearch(Repository):
    __slots__ = ()

    async def search(self, query: SearchQuery) -> SearchPage:
        """:func:`lexical_topk.top_k` over the requested scopes' :class:`ScopeLexicon`."""
        found = await top_k(_MemoryPostings(self._state, query), query.tokens, query.limit)
        rows = self._state.rows
        return SearchPage(
            matches=tuple(ScoredRecord(rows[doc].record, score) for doc, score in found.ranked),
            candidates=found.candidates)


class _MemoryPostings(OneTermAtATime[str]):
    """:class:`lexical_topk.PostingsSource` over the in-memory lexicons of one search;
    a document is its record id."""

    def __init__(self, state: State, query: SearchQuery) -> None:
        self._rows = state.rows
        self._query = query
        self._lexicons = [state.lexicon[scope_hash]
                          for scope_hash in dict.fromkeys(query.scope_hashes)
                          if scope_hash in state.lexicon]

    async def statistics(self, terms: Sequence[str]) -> Statistics[str]:
        now = self._query.now
        expired = [
            ExpiredDocument(record_id, lexicon.lengths[record_id], {
                term: lexicon.postings[term][record_id] for term in terms
                if record_id in lexicon.postings.get(term, {})})
            for lexicon in self._lexicons for record_id in sorted(lexicon.expiring)
            if self._rows[record_id].record.is_expired(now)
        ]
        return Statistics(
            documents=sum(lexicon.documents for lexicon in self._lexicons),
            total_length=sum(lexicon.total_length for lexicon in self._lexicons),
            containing={term: sum(len(lexicon.postings.get(term, {}))
                                  for lexicon in self._lexicons) for term in terms},
            expired=expired)

    async def postings_of(self, term: str) -> list[tuple[str, int, int]]:
        query, rows = self._query, self._rows
        return [(record_id, frequency, lexicon.lengths[record_id])
                for lexicon in self._lexicons
                for record_id, frequency in lexicon.postings.get(term, {}).items()
                if passes_filters(rows[record_id].record, query)]

    async def probe_of(self, term: str, docs: Sequence[str]) -> dict[str, int]:
        holders = [lexicon.postings.get(term, {}) for lexicon in self._lexicons]
        found: dict[str, int] = {}
        for doc in docs:
            for held in holders:
                frequency = held.get(doc)
                if frequency:
                    found[doc] = frequency
        return found

    async def identify(self, docs: Sequence[str]) -> dict[str, str]:
        return {doc: doc for doc in docs}


def is_canonical(record: MemoryRecord, now: float) -> bool:
    """Active or pending, not expired, valid at ``now``: what a new identical record
    would duplicate (``records.canonical``, the SQL backends' predicate)."""
    return (record.status in (RecordStatus.ACTIVE, RecordStatus.PENDING_REVIEW)
            and not record.is_expired(now) and record.is_valid_at(now))
