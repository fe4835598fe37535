"""``list``: ascending stable order, every limit, cursors across concurrent writes."""

from __future__ import annotations

import asyncio

from governed_memory.errors import MemoryValidationError
from governed_memory.records import MemoryRecord, MemoryType
from governed_memory.requests import ListRequest, PurgeExpiredRequest

from governed_memory_conformance.base import ConformanceBase, scenario
from governed_memory_conformance.harness import Harness, expect_error
from governed_memory_conformance.scopes import HOME, SIBLING


async def purge_scope(h: Harness) -> None:
    """Run ``purge_expired`` over ``HOME`` to the end of its cursor."""
    after: str | None = None
    while True:
        page = await h.send(
            PurgeExpiredRequest(scope=HOME, limit=100, after=after), h.ctx())
        if page.next_cursor is None:
            return
        after = page.next_cursor


async def walk(h: Harness, limit: int) -> list[list[str]]:
    """Every page of ``HOME`` at ``limit``, checking the shape of each on the way."""
    pages: list[list[str]] = []
    cursor: str | None = None
    while True:
        page = await h.page(HOME, limit=limit, cursor=cursor)
        ids = [record.id for record in page.items]
        assert len(ids) <= limit, f"a page of limit {limit} held {len(ids)} records"
        if len(ids) == limit:
            assert page.next_cursor is not None, f"a full page (limit {limit}) has no cursor"
        else:
            assert page.next_cursor is None, (
                f"a short page ({len(ids)} of {limit}) still carries a cursor")
        pages.append(ids)
        if page.next_cursor is None:
            return pages
        assert len(pages) <= 1_000, "list keeps issuing cursors"
        cursor = page.next_cursor


class PaginationTests(ConformanceBase):
    @scenario
    async def test_list_ascends_by_id_in_a_stable_order(self, h: Harness) -> None:
        added = [(await h.add(f"note {n}")).id for n in range(7)]
        await h.add("not mine", scope=SIBLING)
        listed = await h.ids()
        assert listed == sorted(listed), "list must ascend by id"
        assert set(listed) == set(added), "list must return exactly the scope's live records"
        assert await h.ids() == listed, "two listings of an unchanged scope differ"

    @scenario
    async def test_list_pages_through_every_limit(self, h: Harness) -> None:
        expected = sorted([(await h.add(f"note {n}")).id for n in range(7)])
        largest = h.capabilities.max_page_size
        for limit in sorted({1, 2, 3, 6, 7, 8, largest}):
            pages = await walk(h, limit)
            flat = [record_id for page in pages for record_id in page]
            assert flat == expected, f"paging at limit {limit} returned {flat}"
        for limit in (0, -1, 101):
            await expect_error(MemoryValidationError, h.page(HOME, limit=limit),
                               f"list with limit {limit}")

    @scenario
    async def test_list_fills_a_page_of_the_maximum_size(self, h: Harness) -> None:
        largest = h.capabilities.max_page_size
        expected = sorted([(await h.add(f"note {n}")).id for n in range(largest + 1)])
        pages = await walk(h, largest)
        assert [len(page) for page in pages] == [largest, 1]
        assert [record_id for page in pages for record_id in page] == expected

    @scenario
    async def test_cursor_continues_across_concurrent_inserts(self, h: Harness) -> None:
        existing = {(await h.add(f"existing {n}")).id for n in range(10)}
        seen: list[str] = []
        cursor: str | None = None
        inserted = 0
        while True:
            page = await h.page(HOME, limit=3, cursor=cursor)
            seen.extend(record.id for record in page.items)
            # Writers land between pages: in this scope and next door.
            for _ in range(2):
                await h.add(f"inserted {inserted}")
                inserted += 1
            await h.add("next door", scope=SIBLING)
            if page.next_cursor is None:
                break
            assert len(seen) < 1_000, "the cursor never ends while records keep arriving"
            cursor = page.next_cursor
        assert len(seen) == len(set(seen)), "a cursor walk returned a record twice"
        assert existing <= set(seen), "a cursor walk skipped records that existed before it"
        mine = set(await h.ids())
        assert set(seen) <= mine, "a cursor walk returned a record of another scope"

        # And with the inserts truly concurrent with the walk.
        before = set(await h.ids())

        async def walker() -> list[str]:
            found: list[str] = []
            after: str | None = None
            while True:
                page = await h.page(HOME, limit=4, cursor=after)
                found.extend(record.id for record in page.items)
                await asyncio.sleep(0)
                if page.next_cursor is None:
                    return found
                after = page.next_cursor

        async def inserter() -> None:
            for n in range(15):
                await h.add(f"racing {n}")
                await asyncio.sleep(0)

        found, _ = await asyncio.gather(walker(), inserter())
        assert len(found) == len(set(found)), "a concurrent walk returned a record twice"
        assert before <= set(found), "a concurrent walk skipped pre-existing records"

    @scenario
    async def test_cursor_survives_deleting_the_record_it_points_at(self, h: Harness) -> None:
        ids = sorted([(await h.add(f"note {n}")).id for n in range(6)])
        page = await h.page(HOME, limit=2)
        assert [record.id for record in page.items] == ids[:2]
        assert page.next_cursor is not None
        await h.remove(ids[1])  # the record the cursor points at
        await h.remove(ids[2])  # a record the walk has not reached yet
        rest: list[str] = []
        cursor: str | None = page.next_cursor
        while cursor is not None:
            next_page = await h.page(HOME, limit=2, cursor=cursor)
            rest.extend(record.id for record in next_page.items)
            cursor = next_page.next_cursor
        assert rest == ids[3:], f"after deleting the cursor's record the walk gave {rest}"

    @scenario
    async def test_cursor_survives_hard_deletes_and_purges_between_pages(
        self, h: Harness
    ) -> None:
        """A cursor is a position in the id order, not an offset and not a pointer that
        must still exist: between pages, records already seen and the very record the
        cursor points at are hard-deleted, expired and purged, and soft-deleted, and
        every page is still exactly the next live records by id, with no record twice
        and none skipped."""
        caps = h.capabilities
        now = h.clock.now()
        expiring = caps.expiry
        ids = sorted([(await h.add(f"note {n}")).id for n in range(12)])
        if expiring:
            for record_id in ids[4:6]:
                await h.update(record_id, expires_at=now + 10)

        async def page(cursor: str | None) -> tuple[list[str], str | None]:
            found = await h.page(HOME, limit=3, cursor=cursor)
            return [record.id for record in found.items], found.next_cursor

        async def erase(record_id: str) -> None:
            await h.delete(record_id, hard=caps.hard_delete or not caps.soft_delete)

        first, cursor = await page(None)
        assert first == ids[0:3]
        await erase(ids[2])  # the record the cursor points at
        await erase(ids[0])  # a record already seen
        second, cursor = await page(cursor)
        assert second == ids[3:6], (
            f"after erasing records at and before the cursor, the next page is {second}")
        if expiring:
            h.advance(10)  # ids[4] and ids[5] expire; the cursor points at ids[5]
            if caps.purge_expired:
                await purge_scope(h)
        else:
            await h.remove(ids[5])
            await h.remove(ids[4])
        third, cursor = await page(cursor)
        assert third == ids[6:9], (
            f"after the cursor's record expired (and was purged), the next page is {third}")
        await h.remove(ids[8])
        await h.remove(ids[6])
        await h.remove(ids[3])
        fourth, cursor = await page(cursor)
        assert fourth == ids[9:12], (
            f"after soft deletes at and before the cursor, the next page is {fourth}")
        assert cursor is not None, "a full page has a cursor"
        last, cursor = await page(cursor)
        assert (last, cursor) == ([], None)
        assert await h.ids() == [ids[1], ids[7], *ids[9:12]]

    @scenario
    async def test_empty_page_with_a_cursor_is_valid(self, h: Harness) -> None:
        empty = await h.page(HOME, limit=5)
        assert empty.items == () and empty.next_cursor is None, "an empty scope lists nothing"
        for n in range(3):
            await h.add(f"note {n}")
        full = await h.page(HOME, limit=3)
        assert len(full.items) == 3 and full.next_cursor is not None
        tail = await h.page(HOME, limit=3, cursor=full.next_cursor)
        assert tail.items == () and tail.next_cursor is None, (
            "following the cursor of the last full page gives an empty final page")
        newcomer: MemoryRecord = await h.add("arrived later")
        resumed = await h.page(HOME, limit=3, cursor=full.next_cursor)
        assert [record.id for record in resumed.items] == [newcomer.id], (
            "a cursor kept after an empty page must pick up records added since")

    @scenario
    async def test_cursor_of_another_scope_or_a_forged_one_is_refused(self, h: Harness) -> None:
        for n in range(3):
            await h.add(f"note {n}")
            await h.add(f"next door {n}", scope=SIBLING)
        cursor = (await h.page(HOME, limit=1)).next_cursor
        assert cursor is not None
        await expect_error(MemoryValidationError, h.page(SIBLING, limit=1, cursor=cursor),
                           "list of one scope with a cursor issued for another")
        for forged in ("not-a-cursor", cursor[:-2], cursor + "x"):
            await expect_error(MemoryValidationError, h.page(HOME, limit=1, cursor=forged),
                               f"list with the forged cursor {forged!r}")
        if h.capabilities.purge_expired:
            request = PurgeExpiredRequest(scope=HOME, limit=10, after=cursor)
            await expect_error(MemoryValidationError,
                               h.send(request, h.ctx()),
                               "purge_expired with a list cursor as `after`")

    @scenario
    async def test_list_filters_by_memory_type(self, h: Harness) -> None:
        fact = await h.add("a fact", memory_type=MemoryType.FACT)
        await h.add("a note", memory_type=MemoryType.NOTE)
        preference = await h.add("a preference", memory_type=MemoryType.PREFERENCE)
        request = ListRequest(scope=HOME, limit=10,
                              memory_types=(MemoryType.FACT, MemoryType.PREFERENCE))
        page = await h.send(request, h.ctx())
        assert [record.id for record in page.items] == sorted([fact.id, preference.id])
