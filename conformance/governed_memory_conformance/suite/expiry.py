"""Expiry: invisible the moment ``expires_at <= now``; purged in bounded pages."""

from __future__ import annotations

from governed_memory.errors import MemoryConflictError, MemoryNotFoundError
from governed_memory.records import CleanupPage
from governed_memory.requests import PurgeExpiredRequest
from governed_memory.scope import Scope

from governed_memory_conformance.base import ConformanceBase, scenario
from governed_memory_conformance.capabilities import requires
from governed_memory_conformance.harness import Harness, expect_error
from governed_memory_conformance.scopes import HOME, SIBLING


async def purge_all(h: Harness, scope: Scope, limit: int) -> list[CleanupPage]:
    pages: list[CleanupPage] = []
    after: str | None = None
    while True:
        request = PurgeExpiredRequest(scope=scope, limit=limit, after=after)
        page = await h.send(request, h.ctx(scope.tenant_id))
        assert 0 <= page.deleted <= limit, (
            f"one purge page of limit {limit} deleted {page.deleted} records")
        pages.append(page)
        if page.next_cursor is None:
            return pages
        assert len(pages) <= 1_000, "purge_expired keeps issuing cursors"
        after = page.next_cursor


class ExpiryTests(ConformanceBase):
    @requires("expiry")
    @scenario
    async def test_expired_record_is_invisible_at_once(self, h: Harness) -> None:
        now = h.clock.now()
        expiring = await h.add("short lived walrus", key="k", expires_at=now + 10)
        lasting = await h.add("long lived walrus")
        h.advance(9.5)
        assert not await h.is_invisible(expiring), "a record vanished before its expiry"
        h.advance(0.5)  # now == expires_at: expired
        await h.assert_invisible(expiring, "a record whose expires_at has come")
        assert await h.ids() == [lasting.id]

    @requires("expiry", "lexical_search")
    @scenario
    async def test_a_repeated_search_drops_a_record_once_it_expires(self, h: Harness) -> None:
        expiring = await h.add("ephemeral heron", expires_at=h.clock.now() + 10)
        lasting = await h.add("lasting heron")
        before = await h.search("heron")
        assert {hit.record.id for hit in before.hits} == {expiring.id, lasting.id}
        h.advance(10)
        after = await h.search("heron")
        assert [hit.record.id for hit in after.hits] == [lasting.id], (
            "a search repeated after a record expired still returned it")

    @requires("expiry")
    @scenario
    async def test_update_moves_or_clears_the_expiry(self, h: Harness) -> None:
        now = h.clock.now()
        record = await h.add("renewable", expires_at=now + 10)
        renewed = await h.update(record.id, expires_at=now + 100)
        assert renewed.expires_at == now + 100
        h.advance(50)
        cleared = await h.update(record.id, clear_expires_at=True)
        assert cleared.expires_at is None
        h.advance(10_000)
        assert (await h.get(record.id)).expires_at is None, "a cleared expiry came back"
        ended = await h.update(record.id, expires_at=h.clock.now())
        await h.assert_invisible(ended, "a record updated to expire now")

    @requires("expiry")
    @scenario
    async def test_expired_record_cannot_be_updated(self, h: Harness) -> None:
        record = await h.add("gone soon", expires_at=h.clock.now() + 1)
        h.advance(1)
        await expect_error(MemoryNotFoundError, h.update(record.id, content="revived"),
                           "update of an expired record")
        if h.capabilities.compare_and_set:
            await expect_error(MemoryConflictError,
                               h.update(record.id, expected_revision=record.revision,
                                        content="revived"),
                               "update of an expired record with its last revision")
        await h.assert_invisible(record, "an expired record after refused updates")

    @requires("expiry")
    @scenario
    async def test_key_of_an_expired_record_is_free(self, h: Harness) -> None:
        await h.add("old holder", key="k", expires_at=h.clock.now() + 5)
        h.advance(5)
        newcomer = await h.add("new holder", key="k")
        assert (await h.get_key("k")).id == newcomer.id

    @requires("expiry", "purge_expired")
    @scenario
    async def test_purge_expired_removes_expired_records_in_bounded_pages(
        self, h: Harness
    ) -> None:
        now = h.clock.now()
        live, expired = [], []
        for n in range(10):
            if n % 3 == 0:
                live.append(await h.add(f"live {n}", expires_at=now + 1_000 if n else None))
            else:
                expired.append(await h.add(f"expiring {n}", expires_at=now + n))
        neighbours = [await h.add(f"next door {n}", scope=SIBLING, expires_at=now + 1)
                      for n in range(2)]
        h.advance(50)
        pages = await purge_all(h, HOME, limit=3)
        assert sum(page.deleted for page in pages) == len(expired), (
            f"purge removed {sum(p.deleted for p in pages)} of {len(expired)} expired records")
        assert len(pages) <= 10 // 3 + 2, f"purge over 10 records took {len(pages)} pages"
        assert await h.ids() == sorted(record.id for record in live), "purge touched live records"
        if h.capabilities.history:
            for record in expired:
                await expect_error(MemoryNotFoundError, h.history(record.id),
                                   "history of a purged record")
        again = await purge_all(h, HOME, limit=3)
        assert sum(page.deleted for page in again) == 0, "a second purge found more"
        elsewhere = await purge_all(h, SIBLING, limit=100)
        assert sum(page.deleted for page in elsewhere) == len(neighbours), (
            "purging one scope must leave another scope's expired records for its own purge")

    @requires("expiry", "purge_expired")
    @scenario
    async def test_purge_expired_keeps_a_cursor_over_pages_that_purge_nothing(
        self, h: Harness
    ) -> None:
        """A page that inspected ``limit`` records and found none expired still returns a
        cursor: stopping there would leave every later expired record in storage."""
        now = h.clock.now()
        live = [await h.add(f"live {n}") for n in range(4)]
        expired = [await h.add(f"expiring {n}", expires_at=now + 1) for n in range(3)]
        h.advance(1)
        pages = await purge_all(h, HOME, limit=2)
        assert sum(page.deleted for page in pages) == len(expired), (
            f"purge in pages of 2 removed {sum(p.deleted for p in pages)} of "
            f"{len(expired)} expired records behind {len(live)} live ones "
            f"(pages: {[(p.deleted, p.next_cursor is not None) for p in pages]})")
        assert await h.ids() == sorted(record.id for record in live)
