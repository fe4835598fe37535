"""Search: within its scopes only, filtered, limited, deterministic, never a hidden record."""

from __future__ import annotations

import pytest
from governed_memory.errors import MemoryValidationError
from governed_memory.records import MemoryType, RecordStatus, SearchResult

from governed_memory_conformance.base import ConformanceBase, scenario
from governed_memory_conformance.capabilities import requires
from governed_memory_conformance.harness import Harness, expect_error
from governed_memory_conformance.scopes import CHILD, ELSEWHERE, HOME, PARENT, SIBLING
from governed_memory_conformance.suite.records import assert_same_record


def require_search(h: Harness) -> None:
    """Skip unless the provider searches at all (by words or by vectors)."""
    caps = h.capabilities
    if not (caps.lexical_search or caps.vector_search):
        pytest.skip("capabilities lexical_search, vector_search not declared")


def check_ranking(result: SearchResult, limit: int) -> None:
    hits = result.hits
    assert len(hits) <= limit, f"search returned {len(hits)} hits for limit {limit}"
    assert [hit.rank for hit in hits] == list(range(1, len(hits) + 1)), "ranks must be 1..n"
    scores = [hit.score for hit in hits]
    assert scores == sorted(scores, reverse=True), "hits must come best score first"
    ids = [hit.record.id for hit in hits]
    assert len(ids) == len(set(ids)), "a record appears twice in one result"


class SearchTests(ConformanceBase):
    @requires("lexical_search")
    @scenario
    async def test_search_finds_the_scopes_matching_records(self, h: Harness) -> None:
        morning = await h.add("green tea in the morning")
        await h.add("black coffee at noon")
        lemon = await h.add("green tea with lemon")
        for scope in (PARENT, SIBLING, CHILD):
            await h.add("green tea for someone else", scope=scope)
        result = await h.search("green tea", limit=10)
        check_ranking(result, 10)
        assert {hit.record.id for hit in result.hits} == {morning.id, lemon.id}
        for hit in result.hits:
            assert_same_record(hit.record, await h.get(hit.record.id), "a search hit")

    @requires("lexical_search")
    @scenario
    async def test_search_respects_the_limit(self, h: Harness) -> None:
        for n in range(6):
            await h.add(f"walrus number {n}")
        for limit in (1, 2, 5, 6, 100):
            result = await h.search("walrus", limit=limit)
            check_ranking(result, limit)
            assert len(result.hits) == min(limit, 6), f"limit {limit} gave {len(result.hits)}"
        for limit in (0, 101):
            await expect_error(MemoryValidationError, h.search("walrus", limit=limit),
                               f"search with limit {limit}")

    @requires("lexical_search")
    @scenario
    async def test_equal_scores_come_in_a_deterministic_order(self, h: Harness) -> None:
        for _ in range(6):
            await h.add("identical words about a walrus")
        first = await h.search("walrus", limit=10)
        assert len(first.hits) == 6
        order = [hit.record.id for hit in first.hits]
        for _ in range(3):
            again = await h.search("walrus", limit=10)
            assert [hit.record.id for hit in again.hits] == order, (
                "the same search over unchanged records changed its order")
        shorter = await h.search("walrus", limit=3)
        assert [hit.record.id for hit in shorter.hits] == order[:3], (
            "a smaller limit must return a prefix of the larger result (a stable tie-break)")

    @requires("lexical_search")
    @scenario
    async def test_search_filters_by_memory_type_and_entity(self, h: Harness) -> None:
        fact = await h.add("walrus fact", memory_type=MemoryType.FACT, entity_ids=("walrus",))
        note = await h.add("walrus note", memory_type=MemoryType.NOTE, entity_ids=("seal",))
        typed = await h.search("walrus", memory_types=(MemoryType.FACT,))
        assert [hit.record.id for hit in typed.hits] == [fact.id]
        both = await h.search("walrus", memory_types=(MemoryType.FACT, MemoryType.NOTE))
        assert {hit.record.id for hit in both.hits} == {fact.id, note.id}
        by_entity = await h.search("walrus", entity_ids=("seal",))
        assert [hit.record.id for hit in by_entity.hits] == [note.id]

    @requires("lexical_search", "metadata_filters")
    @scenario
    async def test_search_filters_by_metadata_with_json_types(self, h: Harness) -> None:
        number = await h.add("walrus one", metadata={"n": 1, "lang": "en"})
        text = await h.add("walrus two", metadata={"n": "1", "lang": "en"})
        boolean = await h.add("walrus three", metadata={"n": True, "lang": "fr"})
        # A list, not a dict: in Python True == 1, which is exactly the trap under test.
        cases: list[tuple[dict[str, object], set[str]]] = [
            ({"lang": "en"}, {number.id, text.id}),
            ({"n": 1}, {number.id}),
            ({"n": "1"}, {text.id}),
            ({"n": True}, {boolean.id}),
            ({"n": 1, "lang": "en"}, {number.id}),
            ({"lang": "de"}, set()),
            ({"missing": 1}, set()),
        ]
        for wanted, expected in cases:
            result = await h.search("walrus", metadata_filter=wanted)
            found = {hit.record.id for hit in result.hits}
            assert found == expected, f"metadata_filter {wanted} matched {found}"

    @requires("metadata_filters")
    @scenario
    async def test_metadata_filters_match_present_keys_and_numbers_by_value(
        self, h: Harness
    ) -> None:
        """The rule for ``metadata_filter`` (the native provider's, on every backend): a
        filter matches a record only if the key is present with an equal value of the
        same JSON type. So ``None`` matches an explicit ``null`` and never a missing key;
        numbers compare by value (``1`` matches ``1.0``, ``0`` matches ``0.0``) and never
        match a boolean or a string; ``0``, ``False``, ``""`` and ``null`` are four
        different values."""
        require_search(h)
        values: dict[str, object] = {"null": None, "one": 1, "one_float": 1.0, "zero": 0,
                                     "zero_float": 0.0, "false": False, "true": True,
                                     "empty": "", "text_one": "1", "half": 2.5}
        records = {name: await h.add(f"walrus {name}", metadata={"n": value, "tag": name})
                   for name, value in values.items()}
        records["missing"] = await h.add("walrus missing", metadata={"tag": "missing"})
        records["bare"] = await h.add("walrus bare")
        cases: list[tuple[dict[str, object], set[str]]] = [
            ({"n": None}, {"null"}),
            ({"n": 1}, {"one", "one_float"}),
            ({"n": 1.0}, {"one", "one_float"}),
            ({"n": 0}, {"zero", "zero_float"}),
            ({"n": 0.0}, {"zero", "zero_float"}),
            ({"n": False}, {"false"}),
            ({"n": True}, {"true"}),
            ({"n": ""}, {"empty"}),
            ({"n": "1"}, {"text_one"}),
            ({"n": 2.5}, {"half"}),
            ({"n": 2}, set()),
            ({"absent": None}, set()),
            ({"n": None, "tag": "null"}, {"null"}),
            ({"n": 1, "tag": "one_float"}, {"one_float"}),
        ]
        ids = {record.id: name for name, record in records.items()}
        for wanted, expected in cases:
            result = await h.search("walrus", (HOME,), 100, metadata_filter=wanted)
            found = {ids.get(hit.record.id, hit.record.id) for hit in result.hits}
            assert found == expected, (
                f"metadata_filter {wanted} matched {sorted(found)}, expected {sorted(expected)}")

    @requires("lexical_search")
    @scenario
    async def test_search_never_returns_deleted_expired_or_pending_records(
        self, h: Harness
    ) -> None:
        active = await h.add("zebra crossing")
        deleted = await h.add("zebra deleted")
        await h.remove(deleted.id)
        await h.add("zebra pending", status=RecordStatus.PENDING_REVIEW)
        if h.capabilities.expiry:
            await h.add("zebra expiring", expires_at=h.clock.now() + 1)
            h.advance(1)
        result = await h.search("zebra", limit=100)
        assert [hit.record.id for hit in result.hits] == [active.id], (
            "search returned a deleted, expired or pending_review record")

    @requires("lexical_search")
    @scenario
    async def test_search_reflects_every_write_at_once(self, h: Harness) -> None:
        """A search repeated after a write sees the write: nothing may answer from a
        snapshot taken before it (a cache, an index that lags behind)."""
        edited = await h.add("penguin on the ice")
        doomed = await h.add("penguin in the water")
        assert {hit.record.id for hit in (await h.search("penguin")).hits} == {
            edited.id, doomed.id}
        await h.update(edited.id, content="albatross over the sea")
        await h.remove(doomed.id)
        newcomer = await h.add("penguin on the beach")
        assert [hit.record.id for hit in (await h.search("penguin")).hits] == [newcomer.id]
        found = (await h.search("albatross")).hits
        assert [hit.record.id for hit in found] == [edited.id]
        assert found[0].record.content == "albatross over the sea"
        assert found[0].record.version == 2

    @requires("lexical_search")
    @scenario
    async def test_search_over_several_scopes_stays_within_them(self, h: Harness) -> None:
        mine = await h.add("kiwi at home")
        child = await h.add("kiwi in the session", scope=CHILD)
        for scope in (PARENT, SIBLING):
            await h.add("kiwi elsewhere", scope=scope)
        await h.add("kiwi in another tenant", scope=ELSEWHERE)
        result = await h.search("kiwi", (HOME, CHILD), limit=100)
        assert {hit.record.id for hit in result.hits} == {mine.id, child.id}
        await expect_error(MemoryValidationError, h.search("kiwi", (HOME, ELSEWHERE)),
                           "a search spanning two tenants")
