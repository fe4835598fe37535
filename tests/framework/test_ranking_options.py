"""Per-search ranking options: bounded by the profile, applied by the provider, and
recorded in the search's snapshot (what replay reports)."""

from __future__ import annotations

from typing import Any

import pytest
from governed_memory import GovernedMemoryManager, MemoryValidationError, Principal, Scope
from governed_memory.events import InMemoryEventSink
from governed_memory.profiles import parse_profile
from governed_memory.ranking_options import RankingOptions

ALICE = Principal("user:alice", "user", tenant_id="acme", user_id="alice",
                  permissions=["memory:read", "memory:write"])
MINE = Scope("acme", user_id="alice")


def _profile(**retrieval: Any) -> Any:
    return parse_profile({
        "id": "ranked", "version": "1.0.0",
        "provider": {"name": "native", "config": {"backend": "memory"}},
        "stores": {"embedder": {"kind": "hashing"}}, "indexing": {"mode": "sync"},
        "retrieval": {"modes": ["lexical", "vector"], **retrieval}})


def _signals(result: Any) -> set[str]:
    return {s.name for hit in result.hits for s in hit.explanation.signals}


async def _seeded(spec: Any, sink: InMemoryEventSink | None = None) -> GovernedMemoryManager:
    manager = GovernedMemoryManager.from_profile(spec, sinks=[sink] if sink else [])
    await manager.start()
    for text in ("Alice moved to Lisbon in May", "the Lisbon office opens at nine",
                 "Alice's cello lessons are on Tuesdays", "a note about trains"):
        await manager.add(ALICE, MINE, text)
    return manager


async def test_a_search_runs_and_records_the_ranking_it_asked_for() -> None:
    manager = await _seeded(_profile())
    try:
        hybrid = await manager.search(ALICE, MINE, "Lisbon move")
        lexical = await manager.search(ALICE, MINE, "Lisbon move",
                                       ranking=RankingOptions(modes=("lexical",)))
        assert "vector" in " ".join(_signals(hybrid))
        assert not any("vector" in s for s in _signals(lexical))
        weighted = await manager.search(ALICE, MINE, "Lisbon move",
                                        ranking=RankingOptions(weights={"lexical": 3.0}))
        replayed = await manager.replay(ALICE, weighted.snapshot_id)  # type: ignore[arg-type]
        assert replayed.ranking["weights"]["lexical"] == 3.0
        assert replayed.ranking["modes"] == ["lexical", "vector"]
        plain = await manager.replay(ALICE, hybrid.snapshot_id)  # type: ignore[arg-type]
        assert "lexical" not in plain.ranking["weights"]
        assert replayed.ranking != plain.ranking
    finally:
        await manager.close()


@pytest.mark.parametrize(("options", "field"), [
    (RankingOptions(weights={"lexical": 5.0}), "ranking.weights.lexical"),
    (RankingOptions(weights={"novelty": 1.0}), "ranking.weights.novelty"),
    (RankingOptions(weights={"vector": -1.0}), "ranking.weights.vector"),
    (RankingOptions(modes=()), "ranking.modes"),
    (RankingOptions(modes=("lexical", "lexical")), "ranking.modes"),
    (RankingOptions(modes=("graph",)), "ranking.modes[0]"),
    (RankingOptions(modes=("lexical",), weights={"vector": 1.0}), "ranking.weights.vector"),
    (RankingOptions(recency=True), "ranking.recency"),
])
async def test_options_outside_the_profiles_bounds_are_refused(options: RankingOptions,
                                                               field: str) -> None:
    sink = InMemoryEventSink()
    manager = await _seeded(_profile(), sink)
    try:
        with pytest.raises(MemoryValidationError) as refused:
            await manager.search(ALICE, MINE, "Lisbon", ranking=options)
        assert refused.value.field == field
        assert sink.events[-1].outcome in ("invalid", "rejected") or (
            sink.events[-1].type.endswith(".rejected"))
    finally:
        await manager.close()


async def test_a_profile_bounds_modes_weights_and_may_refuse_options() -> None:
    lexical_only = parse_profile({
        "id": "plain", "version": "1.0.0",
        "provider": {"name": "native", "config": {"backend": "memory"}},
        "retrieval": {"request_ranking": {"max_weight": 2.0}}})
    closed = parse_profile({
        "id": "closed", "version": "1.0.0",
        "provider": {"name": "native", "config": {"backend": "memory"}},
        "retrieval": {"request_ranking": {"allowed": False}}})
    for spec, options, field in (
            (lexical_only, RankingOptions(modes=("vector",)), "ranking.modes"),
            (lexical_only, RankingOptions(weights={"lexical": 2.5}),
             "ranking.weights.lexical"),
            (closed, RankingOptions(weights={"lexical": 1.0}), "ranking")):
        async with GovernedMemoryManager.from_profile(spec) as manager:
            with pytest.raises(MemoryValidationError) as refused:
                await manager.search(ALICE, MINE, "x", ranking=options)
            assert refused.value.field == field
    async with GovernedMemoryManager.from_profile(lexical_only) as manager:
        await manager.add(ALICE, MINE, "with recency off")
        found = await manager.search(ALICE, MINE, "recency",
                                     ranking=RankingOptions(recency=False,
                                                            weights={"importance": 1.0}))
        assert found.hits


async def test_without_a_profile_the_provider_refuses_modes_it_cannot_run() -> None:
    async with GovernedMemoryManager.from_plugins("native", {"backend": "memory"}) as manager:
        with pytest.raises(MemoryValidationError) as refused:
            await manager.search(ALICE, MINE, "x", ranking=RankingOptions(modes=("vector",)))
        assert refused.value.field == "ranking.modes"
        with pytest.raises(MemoryValidationError):
            await manager.search(ALICE, MINE, "x",
                                 ranking=RankingOptions(weights={"lexical": 4.5}))


async def test_the_search_cache_keeps_two_rankings_apart() -> None:
    cached = parse_profile({
        "id": "cached", "version": "1.0.0",
        "provider": {"name": "native", "config": {"backend": "memory"}},
        "stores": {"embedder": {"kind": "hashing"}}, "indexing": {"mode": "sync"},
        "retrieval": {"modes": ["lexical", "vector"]}, "cache": {"enabled": True}})
    manager = await _seeded(cached)
    try:
        first = await manager.search(ALICE, MINE, "Lisbon move")
        other = await manager.search(ALICE, MINE, "Lisbon move",
                                     ranking=RankingOptions(modes=("lexical",)))
        again = await manager.search(ALICE, MINE, "Lisbon move")
        assert _signals(first) == _signals(again) != _signals(other)
    finally:
        await manager.close()
