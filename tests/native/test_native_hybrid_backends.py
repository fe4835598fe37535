"""SQLite and PostgreSQL rank hybrid searches exactly as the memory backend does (same ids,
scores, ranks and per-signal explanations for lexical + vector fusion) over random
stores, and no backend returns anything a hard filter excludes."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from governed_memory import MemoryType
from governed_memory.clock import ManualClock
from governed_memory.indexing import IndexingSettings, RankingConfig
from governed_memory.requests import SearchRequest
from governed_memory.scope import Scope
from governed_memory_native import NativeMemoryProvider, build_native_provider
from hypothesis import given
from hypothesis import strategies as st
from indexing_support import ControlledEmbedder
from native_support import config_for, examples, make_ctx, note, require_backend

WORDS = ("tea", "teas", "green", "coffee", "morning", "linux", "laptop", "dark", "mode",
         "jasmine", "runs", "drinks")
SCOPES = (Scope("acme", user_id="alice"), Scope("acme", user_id="bob"),
          Scope("acme", user_id="alice", session_id="s1"))
RANKING = RankingConfig(modes=("lexical", "vector"),
                        weights={"lexical": 1.0, "vector": 2.0, "importance": 0.5})

records = st.lists(
    st.tuples(st.sampled_from(range(len(SCOPES))),
              st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join),
              st.sampled_from([MemoryType.FACT, MemoryType.NOTE]),
              st.sampled_from([0.1, 0.5, 0.9]),
              st.booleans()),
    min_size=1, max_size=14)
queries = st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join)


async def _run(backend: str, directory: Path, stored: list[tuple[int, str, MemoryType, float,
                                                                 bool]],
               query: str, scope_picks: tuple[int, ...], facts_only: bool) -> list[object]:
    clock = ManualClock()
    provider: NativeMemoryProvider = build_native_provider(config_for(backend, directory),
                                                           clock)
    provider.configure_indexing(IndexingSettings(embedder=ControlledEmbedder(),
                                                 ranking=RANKING))
    await provider.start()
    try:
        for index, (scope, content, kind, importance, expiring) in enumerate(stored):
            await provider.add(note(content, scope=SCOPES[scope], memory_type=kind,
                                    importance=importance, key=f"k{index}",
                                    expires_at=clock.now() + 5 if expiring else None),
                               make_ctx(clock))
            clock.advance(1)
        clock.advance(10)  # every expiring record has expired
        request = SearchRequest(scopes=tuple(SCOPES[i] for i in scope_picks), query=query, limit=10,
                                memory_types=(MemoryType.FACT,) if facts_only else ())
        result = await provider.search(request, make_ctx(clock))
        searched = {SCOPES[i].scope_hash for i in scope_picks}
        for hit in result.hits:
            key = int(str(hit.record.key)[1:])
            scope, _, kind, _, expiring = stored[key]
            assert SCOPES[scope].scope_hash in searched and not expiring
            assert not facts_only or kind is MemoryType.FACT
        return [(hit.record.key, hit.score, hit.rank, hit.explanation) for hit in result.hits]
    finally:
        await provider.close()


def test_backends_agree_on_hybrid_rankings(sql_backend: str) -> None:
    require_backend(sql_backend)

    @examples(sql_backend, sqlite=25, postgres=10)
    @given(records, queries, st.sets(st.sampled_from(range(len(SCOPES))), min_size=1)
           .map(lambda picks: tuple(sorted(picks))), st.booleans())
    def agree(stored: list[tuple[int, str, MemoryType, float, bool]], query: str,
              scope_picks: tuple[int, ...], facts_only: bool) -> None:
        with tempfile.TemporaryDirectory() as directory:
            memory = asyncio.run(_run("memory", Path(directory), stored, query, scope_picks,
                                      facts_only))
            other = asyncio.run(_run(sql_backend, Path(directory), stored, query,
                                     scope_picks, facts_only))
        assert memory == other

    agree()
