"""Event time: ``occurred_at`` is kept exactly, bounds a search's window, and an as-of
search answers for its moment.

A record's ``event_time`` is when what it tells happened (``occurred_at``), or its first
write when nobody said. Conversations are often stored long after they took place, so
a provider that drops the field, or filters on the write time instead, answers "what
happened last week?" with whatever was imported last week.
"""

from __future__ import annotations

import math

from governed_memory.errors import MemoryValidationError

from governed_memory_conformance.base import ConformanceBase, scenario
from governed_memory_conformance.capabilities import requires
from governed_memory_conformance.harness import Harness, expect_error
from governed_memory_conformance.scopes import HOME
from governed_memory_conformance.suite.records import assert_same_record
from governed_memory_conformance.suite.search import require_search

DAY = 86_400.0


async def _found(h: Harness, **window: float) -> set[str]:
    result = await h.search("walrus", (HOME,), 100, **window)
    return {hit.record.id for hit in result.hits}


class EventTimeTests(ConformanceBase):
    @scenario
    async def test_occurred_at_is_kept_on_every_read(self, h: Harness) -> None:
        told = await h.add("the walrus was seen at the pier", occurred_at=1_000.5)
        assert told.occurred_at == 1_000.5 and told.event_time == 1_000.5
        untold = await h.add("a walrus with no date")
        assert untold.occurred_at is None
        assert untold.event_time == untold.created_at == h.clock.now()
        assert_same_record(await h.get(told.id), told, "get")
        listed = {record.id: record for record in await h.list_all()}
        assert_same_record(listed[told.id], told, "list")
        assert listed[untold.id].occurred_at is None

    @scenario
    async def test_an_update_sets_occurred_at_or_keeps_it(self, h: Harness) -> None:
        record = await h.add("the walrus arrived", occurred_at=5_000.0)
        h.advance(10)
        kept = await h.update(record.id, content="the walrus arrived by boat")
        assert kept.occurred_at == 5_000.0, "an update that does not name occurred_at keeps it"
        moved = await h.update(record.id, occurred_at=6_000.0)
        assert moved.occurred_at == 6_000.0 and moved.version == kept.version + 1
        assert moved.created_at == record.created_at
        assert (await h.get(record.id)).occurred_at == 6_000.0

    @requires("history")
    @scenario
    async def test_history_keeps_each_versions_event_time(self, h: Harness) -> None:
        record = await h.add("the walrus arrived", occurred_at=5_000.0)
        await h.update(record.id, occurred_at=6_000.0)
        versions = await h.history(record.id)
        assert [v.record.occurred_at for v in versions] == [5_000.0, 6_000.0]

    @scenario
    async def test_bad_event_times_are_refused(self, h: Harness) -> None:
        for bad in (-1.0, math.nan, math.inf, True, "yesterday"):
            await expect_error(MemoryValidationError, h.add("walrus", occurred_at=bad),
                               f"add with occurred_at={bad!r}")
        record = await h.add("walrus")
        await expect_error(MemoryValidationError, h.update(record.id, occurred_at=-5.0),
                           "update with a negative occurred_at")
        windows: list[dict[str, float]] = [
            {"occurred_since": 10.0, "occurred_before": 10.0},
            {"occurred_since": 20.0, "occurred_before": 10.0},
            {"occurred_before": math.nan}, {"as_of": -1.0}]
        for window in windows:
            await expect_error(MemoryValidationError, h.search("walrus", (HOME,), 10, **window),
                               f"search with {window}")
        assert [r.id for r in await h.list_all()] == [record.id], "a refusal wrote nothing"

    @scenario
    async def test_search_keeps_the_event_window_half_open(self, h: Harness) -> None:
        require_search(h)
        now = h.clock.now()
        first = await h.add("walrus one", occurred_at=now - 3 * DAY)
        second = await h.add("walrus two", occurred_at=now - 2 * DAY)
        third = await h.add("walrus three", occurred_at=now - DAY)
        written = await h.add("walrus written now")  # its event time is its write time
        everything = {first.id, second.id, third.id, written.id}
        assert await _found(h) == everything
        assert await _found(h, occurred_since=now - 2 * DAY) == {second.id, third.id,
                                                                 written.id}
        assert await _found(h, occurred_before=now - DAY) == {first.id, second.id}
        assert await _found(h, occurred_since=now - 2 * DAY,
                            occurred_before=now - DAY) == {second.id}
        assert await _found(h, occurred_since=now) == {written.id}
        assert await _found(h, occurred_before=now - 3 * DAY) == set()
        moved = await h.update(written.id, occurred_at=now - 10 * DAY)
        assert await _found(h, occurred_before=now - 3 * DAY) == {moved.id}, (
            "a search must see the event time an update set")

    @scenario
    async def test_as_of_answers_for_its_moment(self, h: Harness) -> None:
        require_search(h)
        now = h.clock.now()
        then, later = now - 30 * DAY, now - 10 * DAY
        old = await h.add("the walrus lives in tank one", occurred_at=then, valid_from=then,
                          invalid_at=later)
        new = await h.add("the walrus lives in tank two", occurred_at=later,
                          valid_from=later)
        assert await _found(h) == {new.id}, "an invalid fact is not answered now"
        assert await _found(h, as_of=then + DAY) == {old.id}
        assert await _found(h, as_of=later) == {new.id}, "validity is [valid_from, invalid_at)"
        assert await _found(h, as_of=then - DAY) == set(), "nothing had happened yet"
        assert await _found(h, as_of=then) == {old.id}, "as_of includes its own moment"
        assert await _found(h, as_of=later + DAY, occurred_before=later) == set()
        h.advance(60)
        fresh = await h.add("a walrus noted just now")
        assert await _found(h, as_of=now) == {new.id}, (
            "a record written after as_of, with no event time, had not happened then")
        assert await _found(h) == {new.id, fresh.id}

    @requires("soft_delete")
    @scenario
    async def test_as_of_never_brings_back_what_is_gone(self, h: Harness) -> None:
        require_search(h)
        now = h.clock.now()
        gone = await h.add("the walrus was sold", occurred_at=now - DAY)
        await h.delete(gone.id)
        assert await _found(h, as_of=now - 1) == set(), "a deleted record stays deleted"
