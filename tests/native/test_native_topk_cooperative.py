"""A cooperative top-k (PostgreSQL's, whose ranking runs on the event loop) gives the
loop back while it takes a common word's postings, and ranks exactly as a search that
never yields. SQLite's and the memory backend's never yield: a SQLite unit of work runs
in a thread and may await nothing but its transaction."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from governed_memory_native.retrieval.lexical import SLICE, OneTermAtATime, Statistics, top_k

DOCS = 6 * SLICE


class _CommonWords(OneTermAtATime[int]):
    """Every document holds "common"; every seventh holds "rare" too."""

    def __init__(self) -> None:
        self.postings_by_term = {
            "common": [(doc, 1 + doc % 3, 10 + doc % 7) for doc in range(DOCS)],
            "rare": [(doc, 1, 10 + doc % 7) for doc in range(0, DOCS, 7)],
        }

    async def statistics(self, terms: Sequence[str]) -> Statistics[int]:
        total = sum(length for _, _, length in self.postings_by_term["common"])
        return Statistics(DOCS, total, {term: len(self.postings_by_term.get(term, ()))
                                        for term in terms})

    async def postings_of(self, term: str) -> Sequence[tuple[int, int, int]]:
        return self.postings_by_term.get(term, [])

    async def probe_of(self, term: str, docs: Sequence[int]) -> Mapping[int, int]:
        held = {doc: frequency for doc, frequency, _ in self.postings_by_term.get(term, ())}
        return {doc: held[doc] for doc in docs if doc in held}

    async def identify(self, docs: Sequence[int]) -> Mapping[int, str]:
        return {doc: f"r{doc:06d}" for doc in docs}


async def _ticks_during(cooperative: bool) -> tuple[int, object]:
    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    before = ticks
    found = await top_k(_CommonWords(), ["common", "common"], 10, cooperative=cooperative)
    during = ticks - before
    done.set()
    await task
    return during, found


async def test_a_cooperative_search_yields_while_taking_a_common_word() -> None:
    during, found = await _ticks_during(cooperative=True)
    assert during >= DOCS // SLICE - 1  # a turn for the loop between slices
    _, alone = await _ticks_during(cooperative=False)
    assert found == alone  # same ranking, same scores, same candidates
    assert len(alone.ranked) == 10 and alone.candidates == DOCS


def test_only_postgresql_ranks_cooperatively() -> None:
    from governed_memory_native.postgres.lexical import PostgresLexicalSearch
    from governed_memory_native.sql.records import SqlLexicalSearch
    from governed_memory_native.sqlite.statements import SqliteLexicalSearch

    assert PostgresLexicalSearch.cooperative and not SqliteLexicalSearch.cooperative
    assert not SqlLexicalSearch.cooperative


async def test_a_search_that_is_not_cooperative_never_yields() -> None:
    during, _ = await _ticks_during(cooperative=False)
    assert during == 0  # the memory backend relies on it: no suspension between awaits
