"""BM25 statistics come from the searched scopes only, and every backend scores alike.

A score is a function of the corpus it is computed over. That corpus is the requested
scopes' visible records: another tenant's (or scope's) writes, expired or pending
records must not move it, or a caller could read foreign term frequencies off its own
scores. And SQLite and PostgreSQL, given the same data as the memory backend, must
return its hits in its order with its scores (equal floats, not close ones) and its
candidate counts, under every filter.
"""

from __future__ import annotations

import asyncio
import itertools
import tempfile
from pathlib import Path
from typing import Any

import attrs
from governed_memory import MemoryType, Principal, RecordStatus, Scope, SearchResult
from governed_memory.clock import ManualClock
from governed_memory.operation_context import OperationContext
from governed_memory.requests import AddRequest, DeleteRequest, SearchRequest, UpdateRequest
from governed_memory_native import NativeMemoryProvider, build_native_provider
from hypothesis import given
from hypothesis import strategies as st
from native_support import (
    OTHER_TENANT,
    OTHER_USER,
    TENANT_SCOPE,
    USER_SCOPE,
    config_for,
    examples,
    make_ctx,
    note,
    require_backend,
)


def _scored(result: SearchResult) -> list[tuple[str, float]]:
    return [(hit.record.id, hit.score) for hit in result.hits]


async def test_scores_ignore_every_record_outside_the_corpus(
        provider: NativeMemoryProvider, clock: ManualClock) -> None:
    ctx = make_ctx(clock)
    await provider.add(note("project zebra launch"), ctx)
    await provider.add(note("zebra zebra crossing near the office"), ctx)
    await provider.add(note("lunch with carol"), ctx)
    await provider.add(note("an unrelated thing"), ctx)
    query = SearchRequest(scopes=(USER_SCOPE,), query="zebra launch")
    before = await provider.search(query, ctx)
    assert len(before.hits) == 2

    # another tenant, other scopes of the same tenant, and this scope's invisible records
    for i in range(30):
        for scope in (OTHER_TENANT, OTHER_USER, TENANT_SCOPE):
            await provider.add(note(f"zebra note {i} launch", scope=scope), ctx)
    await provider.add(note("zebra pending launch", status=RecordStatus.PENDING_REVIEW), ctx)
    expiring = [await provider.add(note("zebra zebra expiring", expires_at=clock.now() + 1),
                                   ctx) for _ in range(5)]
    deleted = await provider.add(note("zebra soon deleted launch"), ctx)
    await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=deleted.id), ctx)
    clock.advance(1)

    after = await provider.search(query, make_ctx(clock))
    assert _scored(after) == _scored(before)
    assert after.candidates == before.candidates
    assert all(record.id not in {hit.record.id for hit in after.hits} for record in expiring)


async def test_two_scopes_are_one_corpus(provider: NativeMemoryProvider,
                                         clock: ManualClock) -> None:
    """A search over several scopes scores against their union, exactly like one scope
    holding the same records would: adding the second scope's records changes scores."""
    ctx = make_ctx(clock)
    mine = await provider.add(note("green tea"), ctx)
    await provider.add(note("green green green"), ctx)
    alone = await provider.search(SearchRequest(scopes=(USER_SCOPE,), query="tea"), ctx)
    for i in range(4):
        await provider.add(note(f"tea {i}", scope=TENANT_SCOPE), ctx)
    both = await provider.search(
        SearchRequest(scopes=(USER_SCOPE, TENANT_SCOPE), query="tea"), ctx)
    still = await provider.search(SearchRequest(scopes=(USER_SCOPE,), query="tea"), ctx)
    assert _scored(still) == _scored(alone)
    assert len(both.hits) == 5
    mine_in_both = next(hit.score for hit in both.hits if hit.record.id == mine.id)
    assert mine_in_both != alone.hits[0].score  # "tea" is common in the union: lower idf


# -- differential property: SQLite and PostgreSQL agree exactly with memory -----------

WORDS = ("tea", "green", "hike", "zebra", "Café", "ﬁnal")
SCOPES = (Scope("t1", user_id="u1"), Scope("t1", user_id="u2"), Scope("t1"),
          Scope("t2", user_id="u1"))
TYPES = (MemoryType.NOTE, MemoryType.FACT)


@attrs.frozen
class Write:
    scope: Scope
    content: str
    memory_type: MemoryType
    pending: bool
    expires_in: float | None
    entity_ids: tuple[str, ...]
    tag: int | str
    then: str  # keep | soft | hard | update
    new_content: str


@attrs.frozen
class Query:
    scopes: tuple[Scope, ...]
    text: str
    limit: int
    memory_types: tuple[MemoryType, ...]
    entity_ids: tuple[str, ...]
    metadata_filter: dict[str, Any]


# "..." has no words: a record may add nothing but its zero length to the corpus
contents = st.lists(st.sampled_from((*WORDS, "...")), min_size=1, max_size=8).map(" ".join)
writes = st.builds(
    Write,
    scope=st.sampled_from(SCOPES),
    content=contents,
    memory_type=st.sampled_from(TYPES),
    pending=st.sampled_from((False, False, False, True)),
    expires_in=st.sampled_from((None, None, -1.0, 100.0)),
    entity_ids=st.lists(st.sampled_from(("e1", "e2")), max_size=2, unique=True).map(tuple),
    tag=st.sampled_from((1, 2, "1")),
    then=st.sampled_from(("keep", "keep", "keep", "soft", "hard", "update")),
    new_content=contents,
)
queries = st.builds(
    Query,
    scopes=st.sampled_from(((SCOPES[0],), (SCOPES[1],), (SCOPES[0], SCOPES[2]),
                            (SCOPES[0], SCOPES[1], SCOPES[2]), (SCOPES[3],))),
    text=st.lists(st.sampled_from((*WORDS, "absent")), min_size=1, max_size=3).map(" ".join),
    limit=st.integers(1, 6),
    memory_types=st.sampled_from(((), (), (MemoryType.FACT,))),
    entity_ids=st.sampled_from(((), (), ("e1",))),
    metadata_filter=st.sampled_from(({}, {}, {"tag": 1}, {"tag": "1"})),
)


def _ctx(clock: ManualClock, tenant_id: str) -> OperationContext:
    return OperationContext(
        operation_id="diff", now=clock.now(),
        principal=Principal(principal_id="svc", kind="service", tenant_id=tenant_id,
                            permissions=["memory:admin"]),
    )


async def _apply(provider: NativeMemoryProvider, clock: ManualClock, number: int,
                 write: Write) -> None:
    ctx = _ctx(clock, write.scope.tenant_id)
    record = await provider.add(AddRequest(
        scope=write.scope, content=write.content, key=f"r{number}",
        memory_type=write.memory_type, entity_ids=write.entity_ids,
        metadata={"tag": write.tag},
        status=RecordStatus.PENDING_REVIEW if write.pending else RecordStatus.ACTIVE,
        expires_at=None if write.expires_in is None else clock.now() + write.expires_in,
    ), ctx)
    live = not write.pending and write.expires_in != -1.0
    if write.then == "hard" or (write.then == "soft" and write.expires_in != -1.0):
        await provider.delete(DeleteRequest(scope=write.scope, record_id=record.id,
                                            hard=write.then == "hard"), ctx)
    elif write.then == "update" and live:
        await provider.update(UpdateRequest(scope=write.scope, record_id=record.id,
                                            content=write.new_content), ctx)


async def _differential(backend: str, directory: Path, plan: list[Write],
                        asks: list[Query]) -> None:
    """Apply ``plan`` to the memory backend and to ``backend``, then ask both ``asks``."""
    clock = ManualClock()
    providers = [build_native_provider(config_for(name, directory), clock)
                 for name in ("memory", backend)]
    for provider in providers:
        await provider.start()
    try:
        for number, write in enumerate(plan):
            for provider in providers:  # interleaved: ids rise in the same order in both
                await _apply(provider, clock, number, write)
        for ask in asks:
            request = SearchRequest(scopes=ask.scopes, query=ask.text, limit=ask.limit,
                                    memory_types=ask.memory_types, entity_ids=ask.entity_ids,
                                    metadata_filter=ask.metadata_filter)
            ctx = _ctx(clock, ask.scopes[0].tenant_id)
            memory, other = [await provider.search(request, ctx) for provider in providers]
            assert memory.candidates == other.candidates, ask
            # the same records, in the same order, with the same scores: not merely close
            # ones (to 1e-9), since both score with bm25.document_score on equal inputs
            assert [(hit.record.key, hit.score) for hit in memory.hits] == [
                (hit.record.key, hit.score) for hit in other.hits], ask
            assert [hit.rank for hit in memory.hits] == [hit.rank for hit in other.hits]
    finally:
        for provider in providers:
            await provider.close()


def test_every_backend_returns_identical_hits_and_scores(sql_backend: str) -> None:
    require_backend(sql_backend)

    @examples(sql_backend, sqlite=40, postgres=25)
    @given(plan=st.lists(writes, min_size=1, max_size=12),
           asks=st.lists(queries, min_size=1, max_size=4))
    def identical(plan: list[Write], asks: list[Query]) -> None:
        with tempfile.TemporaryDirectory() as directory:
            asyncio.run(_differential(sql_backend, Path(directory), plan, asks))

    identical()


async def test_many_exact_ties_break_by_id_in_every_backend(sql_backend: str,
                                                            tmp_path: Path) -> None:
    """Hundreds of equal scores around the cutoff: each backend picks the lowest ids, as
    the memory backend does."""
    await _differential(sql_backend, tmp_path, [
        Write(scope=SCOPES[0], content=content, memory_type=MemoryType.NOTE, pending=False,
              expires_in=None, entity_ids=(), tag=1, then="keep", new_content="")
        for content in itertools.islice(itertools.cycle(
            ["tea green", "green tea", "tea tea", "hike"]), 300)
    ], [Query(scopes=(SCOPES[0],), text="tea green", limit=limit, memory_types=(),
              entity_ids=(), metadata_filter={}) for limit in (1, 5, 100)])
