"""Search over Mem0 through the governed API, on both clients.

The suite's search tests need ``lexical_search``, which Mem0 (a vector store) does not
declare; these hold the same rules for vector ranking with the deterministic hashing
embedder, where a record sharing no word with the query scores 0.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from actors import ADMIN, ALICE_SCOPE, BOB_SCOPE
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryValidationError
from governed_memory.manager import GovernedMemoryManager
from governed_memory.operation_context import OperationContext
from governed_memory.records import MemoryType
from governed_memory.scope import Scope
from governed_memory_mem0 import build_mem0_provider
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mem0_support import local_config, platform_config, wire_server

CHILD = ALICE_SCOPE.replace(session_id="s1")


@pytest.fixture(params=["local", "platform"])
async def manager(request: pytest.FixtureRequest,
                  tmp_path: Path) -> AsyncIterator[tuple[GovernedMemoryManager, ManualClock]]:
    clock = ManualClock()
    config = (local_config(tmp_path) if request.param == "local"
              else platform_config(wire_server(), tmp_path))
    async with GovernedMemoryManager(build_mem0_provider(config, clock),
                                     clock=clock) as governed:
        yield governed, clock


async def ids(governed: GovernedMemoryManager, scopes: Scope | list[Scope], query: str,
              **options: object) -> list[str]:
    result = await governed.search(ADMIN, scopes, query, **options)  # type: ignore[arg-type]
    ranks = [hit.rank for hit in result.hits]
    assert ranks == list(range(1, len(ranks) + 1))
    scores = [hit.score for hit in result.hits]
    assert scores == sorted(scores, reverse=True)
    return [hit.record.id for hit in result.hits]


async def test_best_match_first_and_only_the_requested_scopes(
    manager: tuple[GovernedMemoryManager, ManualClock]
) -> None:
    governed, _ = manager
    both = await governed.add(ADMIN, ALICE_SCOPE, "green tea with lemon")
    one = await governed.add(ADMIN, ALICE_SCOPE, "green bicycle")
    child = await governed.add(ADMIN, CHILD, "green tea in the session")
    await governed.add(ADMIN, BOB_SCOPE, "green tea with lemon")
    await governed.add(ADMIN, Scope("acme", project_id="p"), "green tea with lemon")
    found = await ids(governed, ALICE_SCOPE, "green tea lemon", limit=10)
    assert found == [both.id, one.id], "more shared words rank first; nothing of others"
    across = await ids(governed, [ALICE_SCOPE, CHILD], "green tea", limit=10)
    assert set(across) <= {both.id, one.id, child.id} and child.id in across
    with pytest.raises(MemoryValidationError):
        await governed.search(ADMIN, [ALICE_SCOPE, Scope("globex", user_id="alice")], "tea")


async def test_limit_and_a_stable_order_for_equal_scores(
    manager: tuple[GovernedMemoryManager, ManualClock]
) -> None:
    governed, _ = manager
    for _ in range(6):
        await governed.add(ADMIN, ALICE_SCOPE, "identical walrus words")
    first = await ids(governed, ALICE_SCOPE, "walrus", limit=10)
    assert len(first) == 6 and first == sorted(first), "ties break by id ascending"
    assert await ids(governed, ALICE_SCOPE, "walrus", limit=3) == first[:3]
    for limit in (0, 101):
        with pytest.raises(MemoryValidationError):
            await governed.search(ADMIN, ALICE_SCOPE, "walrus", limit=limit)


async def test_never_a_deleted_expired_or_pending_record(
    manager: tuple[GovernedMemoryManager, ManualClock]
) -> None:
    from governed_memory.records import RecordStatus
    from governed_memory.requests import AddRequest

    governed, clock = manager
    live = await governed.add(ADMIN, ALICE_SCOPE, "zebra crossing")
    soft = await governed.add(ADMIN, ALICE_SCOPE, "zebra soft deleted")
    await governed.delete(ADMIN, ALICE_SCOPE, soft.id)
    hard = await governed.add(ADMIN, ALICE_SCOPE, "zebra hard deleted")
    await governed.delete(ADMIN, ALICE_SCOPE, hard.id, hard=True)
    await governed.add(ADMIN, ALICE_SCOPE, "zebra expiring", expires_at=clock.now() + 5)
    await governed._provider.add(
        AddRequest(scope=ALICE_SCOPE, content="zebra pending", status=RecordStatus.PENDING_REVIEW),
        _ctx(clock))
    assert len(await ids(governed, ALICE_SCOPE, "zebra", limit=100)) == 2
    clock.advance(5)
    assert await ids(governed, ALICE_SCOPE, "zebra", limit=100) == [live.id]


async def test_filters_by_type_entity_and_metadata_with_json_types(
    manager: tuple[GovernedMemoryManager, ManualClock]
) -> None:
    governed, _ = manager
    number = await governed.add(ADMIN, ALICE_SCOPE, "walrus one", metadata={"n": 1},
                                memory_type=MemoryType.FACT, entity_ids=["walrus"])
    text = await governed.add(ADMIN, ALICE_SCOPE, "walrus two", metadata={"n": "1"},
                              entity_ids=["seal"])
    boolean = await governed.add(ADMIN, ALICE_SCOPE, "walrus three", metadata={"n": True})
    cases: list[tuple[dict[str, object], set[str]]] = [
        ({"n": 1}, {number.id}), ({"n": "1"}, {text.id}), ({"n": True}, {boolean.id}),
        ({"missing": 1}, set())]
    for wanted, expected in cases:
        assert set(await ids(governed, ALICE_SCOPE, "walrus", metadata_filter=wanted)) == expected
    assert await ids(governed, ALICE_SCOPE, "walrus", memory_types=["fact"]) == [number.id]
    assert await ids(governed, ALICE_SCOPE, "walrus", entity_ids=["seal"]) == [text.id]


async def test_every_write_shows_in_the_next_search(
    manager: tuple[GovernedMemoryManager, ManualClock]
) -> None:
    governed, _ = manager
    edited = await governed.add(ADMIN, ALICE_SCOPE, "penguin on the ice")
    await governed.update(ADMIN, ALICE_SCOPE, edited.id, content="albatross over the sea")
    result = await governed.search(ADMIN, ALICE_SCOPE, "albatross")
    assert [(h.record.id, h.record.content, h.record.version) for h in result.hits][:1] == [
        (edited.id, "albatross over the sea", 2)]
    stale = await governed.search(ADMIN, ALICE_SCOPE, "penguin ice")
    assert [(h.record.content, h.score) for h in stale.hits] == [("albatross over the sea", 0.0)]


def _ctx(clock: ManualClock) -> OperationContext:
    """A provider-level context: a pending_review record is only written by governance
    (a review policy), so the test writes it below the manager."""
    return OperationContext(operation_id="op-test", principal=ADMIN, now=clock.now())


WORDS = ("tea", "coffee", "walrus", "kiwi", "zebra", "lemon")
SCOPES = (ALICE_SCOPE, BOB_SCOPE, CHILD, Scope("acme", project_id="p"))


@st.composite
def workloads(draw: st.DrawFn) -> list[tuple[int, str, bool]]:
    return draw(st.lists(st.tuples(st.integers(0, len(SCOPES) - 1),
                                   st.lists(st.sampled_from(WORDS), min_size=1, max_size=3)
                                   .map(" ".join), st.booleans()),
                         min_size=1, max_size=12))


async def _check_property(directory: Path, workload: list[tuple[int, str, bool]],
                          query: str, picks: list[int], limit: int) -> None:
    clock = ManualClock()
    async with GovernedMemoryManager(build_mem0_provider(local_config(directory), clock),
                                     clock=clock) as governed:
        live: dict[str, Scope] = {}
        for scope_index, content, delete in workload:
            scope = SCOPES[scope_index]
            record = await governed.add(ADMIN, scope, content)
            if delete:
                await governed.delete(ADMIN, scope, record.id, hard=scope_index % 2 == 0)
            else:
                live[record.id] = scope
        wanted = [SCOPES[i] for i in dict.fromkeys(picks)]
        result = await governed.search(ADMIN, wanted, query, limit=limit)
        hashes = {scope.scope_hash for scope in wanted}
        assert len(result.hits) <= limit
        for hit in result.hits:
            assert hit.record.id in live, "search returned a deleted record"
            assert hit.record.scope_hash in hashes, "search crossed a scope"
        keys = [(-hit.score, hit.record.id) for hit in result.hits]
        assert keys == sorted(keys)
        in_scope = [rid for rid, scope in live.items() if scope.scope_hash in hashes]
        assert len(result.hits) == min(limit, len(in_scope)), "a live record went missing"


_PROPERTY = settings(max_examples=10, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture,
                                            HealthCheck.too_slow])


@_PROPERTY
@given(workload=workloads(), query=st.sampled_from(WORDS),
       picks=st.lists(st.integers(0, len(SCOPES) - 1), min_size=1, max_size=3),
       limit=st.integers(1, 20))
async def test_search_property(tmp_path_factory: pytest.TempPathFactory,
                               workload: list[tuple[int, str, bool]], query: str,
                               picks: list[int], limit: int) -> None:
    await _check_property(tmp_path_factory.mktemp("prop"), workload, query, picks, limit)


@pytest.mark.slow
@settings(max_examples=500, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(workload=workloads(), query=st.sampled_from(WORDS),
       picks=st.lists(st.integers(0, len(SCOPES) - 1), min_size=1, max_size=3),
       limit=st.integers(1, 20))
async def test_search_property_thorough(tmp_path_factory: pytest.TempPathFactory,
                                        workload: list[tuple[int, str, bool]], query: str,
                                        picks: list[int], limit: int) -> None:
    await _check_property(tmp_path_factory.mktemp("prop"), workload, query, picks, limit)


async def test_faiss_neighbours_cannot_crowd_a_scope_out(tmp_path: Path) -> None:
    """faiss filters by namespace after ranking the whole collection (8 x top_k): a
    busy neighbour's better matches must not hide this scope's."""
    clock = ManualClock()
    async with GovernedMemoryManager(build_mem0_provider(local_config(tmp_path), clock),
                                     clock=clock) as governed:
        for _ in range(120):
            await governed.add(ADMIN, BOB_SCOPE, "walrus")
        mine = {(await governed.add(ADMIN, ALICE_SCOPE, f"a walrus among {n} other words")).id
                for n in range(3)}
        result = await governed.search(ADMIN, ALICE_SCOPE, "walrus", limit=10)
        assert {hit.record.id for hit in result.hits} == mine


async def test_strays_in_a_namespace_cannot_crowd_its_records_out(
    manager: tuple[GovernedMemoryManager, ManualClock]
) -> None:
    """Memories the ledger does not know (orphans of timed-out writes, or written there
    behind the adapter's back) rank but are never shown, and never hide a record."""
    governed, _ = manager
    provider = governed._provider
    namespace = f"{provider._config.namespace_prefix}:{ALICE_SCOPE.scope_hash}"  # type: ignore[attr-defined]
    for n in range(40):
        provider.client.add(namespace, "walrus", {  # type: ignore[attr-defined]
            "id": f"orphan-{n}", "scope_hash": ALICE_SCOPE.scope_hash, "revision": "r"})
    mine = {(await governed.add(ADMIN, ALICE_SCOPE, f"a walrus among {n} other words")).id
            for n in range(3)}
    assert set(await ids(governed, ALICE_SCOPE, "walrus", limit=5)) == mine
