"""Zero and empty are values: ``0``, ``0.0``, ``""``, ``False``, ``{}`` and ``()`` are kept
as given, never taken for "not given".

In Python every one of them is falsy, so ``request.occurred_at or None``,
``if request.importance:`` and ``request.metadata or current.metadata`` each read as
fine and each lose a value: an event that happened at the epoch becomes "happened when
written", an importance lowered to 0 stays where it was, metadata cleared with ``{}``
comes back. "Not given" is ``None`` and only ``None``.
"""

from __future__ import annotations

from typing import Any

from governed_memory.records import MemoryRecord

from governed_memory_conformance.base import ConformanceBase, scenario
from governed_memory_conformance.harness import Harness
from governed_memory_conformance.scopes import HOME
from governed_memory_conformance.suite.records import assert_same_record
from governed_memory_conformance.suite.search import require_search

FALSY_METADATA = {"zero": 0, "zero_float": 0.0, "empty": "", "false": False, "null": None,
                  "list": [], "object": {}}


def _zeros(record: MemoryRecord) -> tuple[object, ...]:
    return (record.occurred_at, record.event_time, record.importance, record.valid_from,
            dict(record.metadata), record.entity_ids)


class ZeroValueTests(ConformanceBase):
    @scenario
    async def test_zero_and_empty_values_are_stored_as_given(self, h: Harness) -> None:
        """An add with ``occurred_at=0.0`` (the epoch), ``importance=0.0``,
        ``valid_from=0.0``, falsy metadata values and no entities keeps each of them
        exactly, on every read."""
        expected = (0.0, 0.0, 0.0, 0.0, FALSY_METADATA, ())
        epoch = await h.add("the walrus at the epoch", occurred_at=0.0, importance=0.0,
                            valid_from=0.0, metadata=FALSY_METADATA, entity_ids=())
        assert _zeros(epoch) == expected, (
            f"add returned {_zeros(epoch)} for {expected} (occurred_at, event_time, "
            "importance, valid_from, metadata, entity_ids)")
        assert_same_record(await h.get(epoch.id), epoch, "get of a record of zero values")
        (listed,) = await h.list_all()
        assert_same_record(listed, epoch, "list of a record of zero values")
        if h.capabilities.history:
            (version,) = await h.history(epoch.id)
            assert _zeros(version.record) == expected, "history lost a zero value"
        ended = await h.add("a walrus valid until the epoch", invalid_at=0.0)
        assert ended.invalid_at == 0.0, "invalid_at=0.0 was taken for 'no end'"
        assert (await h.get(ended.id)).invalid_at == 0.0
        if h.capabilities.expiry:
            gone = await h.add("a walrus that expired at the epoch", expires_at=0.0)
            assert gone.expires_at == 0.0
            await h.assert_invisible(gone, "a record added with expires_at=0.0")
        plain = await h.add("a walrus with no metadata")
        assert (dict(plain.metadata), plain.occurred_at) == ({}, None)
        assert plain.event_time == plain.created_at == h.clock.now()

    @scenario
    async def test_an_update_to_zero_or_empty_sets_it(self, h: Harness) -> None:
        """An update naming ``occurred_at=0.0``, ``importance=0.0``, ``metadata={}`` or
        ``entity_ids=()`` sets exactly that, each as a new version."""
        record = await h.add("the walrus arrived", occurred_at=5_000.0, importance=0.8,
                             metadata={"a": 1}, entity_ids=("walrus",))
        changes: list[tuple[str, Any]] = [("occurred_at", 0.0), ("importance", 0.0),
                                          ("metadata", {}), ("entity_ids", ())]
        current = record
        for name, value in changes:
            current = await h.update(record.id, HOME, **{name: value})
            stored = getattr(current, name)
            assert (dict(stored) if name == "metadata" else stored) == value, (
                f"update({name}={value!r}) left {name} at {stored!r}")
        assert current.version == 1 + len(changes)
        assert _zeros(current) == (0.0, 0.0, 0.0, None, {}, ())
        assert_same_record(await h.get(record.id), current, "get after updates to zero")
        if h.capabilities.expiry:
            ended = await h.update(record.id, expires_at=0.0)
            assert ended.expires_at == 0.0, "update(expires_at=0.0) left the expiry unset"
            await h.assert_invisible(ended, "a record updated to expire at the epoch")

    @scenario
    async def test_the_epoch_bounds_a_search_like_any_time(self, h: Harness) -> None:
        """``occurred_at=0.0`` is an event time, and ``occurred_since=0.0``,
        ``occurred_before=...`` and ``as_of=0.0`` are bounds, not "no bound": a search
        as of the epoch sees only what had happened by then."""
        require_search(h)
        epoch = await h.add("the walrus at the epoch", occurred_at=0.0, valid_from=0.0)
        later = await h.add("the walrus in 1970", occurred_at=86_400.0)
        written = await h.add("the walrus today")

        async def found(**window: float) -> set[str]:
            result = await h.search("walrus", (HOME,), 100, **window)
            return {hit.record.id for hit in result.hits}

        everything = {epoch.id, later.id, written.id}
        assert await found() == everything
        assert await found(as_of=0.0) == {epoch.id}, "as_of=0.0 is the epoch, not 'now'"
        assert await found(occurred_before=1.0) == {epoch.id}, (
            "occurred_before=1.0 keeps the event at the epoch only")
        assert await found(occurred_since=0.0) == everything
        assert await found(occurred_since=0.0, occurred_before=86_400.0) == {epoch.id}
        assert await found(occurred_since=1.0) == {later.id, written.id}, (
            "an event at the epoch happened before 1.0")
        assert await found(occurred_before=0.0) == set(), (
            "occurred_before=0.0 is a bound (nothing happened before the epoch)")
        invalid = await h.add("the walrus that was never valid", invalid_at=0.0)
        assert invalid.invalid_at == 0.0
        assert invalid.id not in await found(), "invalid_at=0.0 is in the past, not unset"
