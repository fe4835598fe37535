"""Expiry: invisible the moment ``expires_at <= now``; purged in bounded pages, one
scope at a time or every scope at once."""

from __future__ import annotations

import asyncio

from governed_memory.errors import MemoryConflictError, MemoryNotFoundError
from governed_memory.maintenance import PurgeExpiredAllRequest
from governed_memory.records import CleanupPage, MemoryRecord
from governed_memory.requests import PurgeExpiredRequest
from governed_memory.scope import Scope

from governed_memory_conformance.base import ConformanceBase, scenario
from governed_memory_conformance.capabilities import requires
from governed_memory_conformance.harness import Harness, expect_error
from governed_memory_conformance.scopes import ELSEWHERE, HOME, PARENT, SIBLING


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

    @requires("expiry", "purge_expired_all")
    @scenario
    async def test_purge_expired_all_removes_expired_records_of_every_scope(
        self, h: Harness
    ) -> None:
        """Every scope's expired records go, earliest expiry first, in bounded batches
        whose counts add up exactly; nothing unexpired goes, in any scope."""
        now = h.clock.now()
        scopes = (HOME, SIBLING, PARENT, ELSEWHERE)
        expired: list[MemoryRecord] = []
        for n in range(9):  # expiries interleaved across scopes, so id order is not theirs
            expired.append(await h.add(f"short-lived {n}", scope=scopes[n % len(scopes)],
                                       expires_at=now + 50 - n))
        kept = {scope: [await h.add("kept a while", scope=scope, expires_at=now + 1_000),
                        await h.add("kept for good", scope=scope)] for scope in scopes}
        h.advance(100)
        earliest = sorted(expired, key=lambda record: (record.expires_at, record.id))
        first = await h.send(PurgeExpiredAllRequest(limit=2))
        assert (first.records, first.more) == (2, True), (
            f"a batch of 2 over 9 expired records removed {first.records} "
            f"(more: {first.more})")
        assert set(first.scopes) == {(r.scope.tenant_id, r.scope_hash) for r in earliest[:2]}, (
            "the first batch names other scopes than those of the two earliest expiries")
        removed = first.records
        for _ in range(20):
            batch = await h.send(PurgeExpiredAllRequest(limit=2))
            assert 0 <= batch.records <= 2, f"a batch of 2 removed {batch.records}"
            removed += batch.records
            if not batch.more:
                break
        assert removed == len(expired), (
            f"batches removed {removed} of {len(expired)} expired records")
        for scope, records in kept.items():
            assert await h.ids(scope) == sorted(record.id for record in records), (
                f"purging every scope touched an unexpired record of {scope}")
        again = await h.send(PurgeExpiredAllRequest(limit=100))
        assert (again.records, again.more) == (0, False), "a second purge found more"
        if h.capabilities.purge_expired:
            for scope in scopes:
                pages = await purge_all(h, scope, limit=100)
                assert sum(page.deleted for page in pages) == 0, (
                    f"purge_expired still found expired records in {scope}")

    @requires("expiry", "purge_expired_all")
    @scenario
    async def test_concurrent_purges_of_every_scope_count_each_record_once(
        self, h: Harness
    ) -> None:
        now = h.clock.now()
        scopes = (HOME, SIBLING, ELSEWHERE)
        for n in range(24):
            await h.add(f"short-lived {n}", scope=scopes[n % 3], expires_at=now + 1 + n % 5)
        kept = [await h.add("kept", scope=scope) for scope in scopes]
        h.advance(10)

        async def drain() -> int:
            total = 0
            for _ in range(100):
                batch = await h.send(PurgeExpiredAllRequest(limit=3))
                total += batch.records
                if not batch.more:
                    break
            return total

        counts = await asyncio.gather(*(drain() for _ in range(4)))
        assert sum(counts) == 24, (
            f"four concurrent purges counted {counts} for 24 expired records")
        for record in kept:
            assert not await h.is_invisible(record), "a concurrent purge removed a live record"
