"""Review and usage: deciding ``pending_review`` records, and counting what a quota counts."""

from __future__ import annotations

from governed_memory.errors import MemoryConflictError, MemoryNotFoundError
from governed_memory.provider import ReviewingProvider
from governed_memory.records import MemoryRecord, RecordStatus, VersionOperation
from governed_memory.requests import ApproveRequest, ListPendingRequest, RejectRequest
from governed_memory.scope import Scope
from governed_memory.usage import Usage, UsageQuery

from governed_memory_conformance.base import ConformanceBase, scenario
from governed_memory_conformance.capabilities import requires
from governed_memory_conformance.harness import Harness, expect_error
from governed_memory_conformance.scopes import ELSEWHERE, HOME, SIBLING, TENANT
from governed_memory_conformance.suite.crud import GHOST_ID
from governed_memory_conformance.suite.records import assert_same_record


def reviewer(h: Harness) -> ReviewingProvider:
    review = h.provider.review
    assert review is not None, "the provider declares review but its review accessor is None"
    return review


async def approve(h: Harness, record_id: str, scope: Scope = HOME,
                  expected_revision: str | None = None,
                  idempotency_key: str | None = None) -> MemoryRecord:
    request = ApproveRequest(scope=scope, record_id=record_id,
                             expected_revision=expected_revision,
                             idempotency_key=idempotency_key)
    return await h.send(request, h.ctx(scope.tenant_id))


async def reject(h: Harness, record_id: str, scope: Scope = HOME,
                 expected_revision: str | None = None,
                 idempotency_key: str | None = None) -> object:
    request = RejectRequest(scope=scope, record_id=record_id,
                            expected_revision=expected_revision,
                            idempotency_key=idempotency_key)
    return await h.send(request, h.ctx(scope.tenant_id))


async def pending_page(h: Harness, scope: Scope = HOME, limit: int = 100,
                       cursor: str | None = None) -> tuple[list[str], str | None]:
    page = await h.send(ListPendingRequest(scope=scope, limit=limit,
                                                             cursor=cursor),
                                          h.ctx(scope.tenant_id))
    return [record.id for record in page.items], page.next_cursor


class ReviewTests(ConformanceBase):
    @requires("review")
    @scenario
    async def test_the_review_queue_lists_pending_records_of_one_scope(self, h: Harness) -> None:
        """``list_pending`` pages through the pending, unexpired records of the exact
        scope by id; decided, active, expired and other scopes' records are not in it."""
        held = [await h.add(f"held {n}", status=RecordStatus.PENDING_REVIEW)
                for n in range(5)]
        await h.add("an active record")
        await h.add("held elsewhere", scope=SIBLING, status=RecordStatus.PENDING_REVIEW)
        await h.add("held briefly", status=RecordStatus.PENDING_REVIEW,
                    expires_at=h.clock.now() + 1)
        h.advance(2)
        first, cursor = await pending_page(h, limit=3)
        assert first == [r.id for r in held[:3]], "the first page of the queue, by id"
        assert cursor is not None, "a full page must give a cursor"
        rest, end = await pending_page(h, limit=3, cursor=cursor)
        assert rest == [r.id for r in held[3:]] and end is None
        await approve(h, held[0].id)
        await reject(h, held[1].id)
        remaining, _ = await pending_page(h)
        assert remaining == [r.id for r in held[2:]], "decided records left the queue"

    @requires("review")
    @scenario
    async def test_approve_makes_a_pending_record_visible_as_a_new_version(
        self, h: Harness
    ) -> None:
        pending = await h.add("reviewed walrus", key="k", status=RecordStatus.PENDING_REVIEW)
        h.advance(5)
        approved = await approve(h, pending.id, expected_revision=pending.revision)
        assert approved.status is RecordStatus.ACTIVE
        assert approved.version == pending.version + 1
        assert approved.revision != pending.revision
        assert approved.created_at == pending.created_at
        assert approved.updated_at == pending.created_at + 5
        assert (await h.get_key("k")).id == pending.id
        assert await h.ids() == [pending.id]
        if h.capabilities.lexical_search:
            assert [hit.record.id for hit in (await h.search("walrus")).hits] == [pending.id]
        if h.capabilities.history:
            versions = await h.history(pending.id)
            assert [v.operation for v in versions] == [VersionOperation.ADD,
                                                       VersionOperation.APPROVE]

    @requires("review")
    @scenario
    async def test_reject_erases_a_pending_record(self, h: Harness) -> None:
        pending = await h.add("rejected walrus", key="k", status=RecordStatus.PENDING_REVIEW)
        result = await reject(h, pending.id)
        assert (getattr(result, "record_id", None), getattr(result, "hard", None)) == (
            pending.id, True), f"reject must return a hard DeleteResult, got {result!r}"
        await h.assert_invisible(pending, "a rejected record")
        if h.capabilities.history:
            await expect_error(MemoryNotFoundError, h.history(pending.id),
                               "history of a rejected record")
        assert (await h.add("successor", key="k")).key == "k", "a rejected record held its key"

    @requires("review")
    @scenario
    async def test_review_needs_a_pending_record_of_the_scope(self, h: Harness) -> None:
        active = await h.add("already active")
        pending = await h.add("still pending", status=RecordStatus.PENDING_REVIEW)
        for decide in (approve, reject):
            await expect_error(MemoryConflictError, decide(h, active.id),
                               f"{decide.__name__} of an active record")
            await expect_error(MemoryNotFoundError, decide(h, GHOST_ID),
                               f"{decide.__name__} of an unknown id")
            await expect_error(MemoryNotFoundError, decide(h, pending.id, SIBLING),
                               f"{decide.__name__} of another scope's record")
            await expect_error(MemoryConflictError,
                               decide(h, pending.id, expected_revision="r-stale"),
                               f"{decide.__name__} with a stale expected_revision")
        assert await h.ids() == [active.id], "a refused review decision changed something"


    @requires("review", "idempotency")
    @scenario
    async def test_review_decisions_replay_their_idempotency_keys(self, h: Harness) -> None:
        approved_one = await h.add("approved walrus", status=RecordStatus.PENDING_REVIEW)
        rejected_one = await h.add("rejected walrus", status=RecordStatus.PENDING_REVIEW)
        first = await approve(h, approved_one.id, idempotency_key="review-1")
        h.advance(10)
        again = await approve(h, approved_one.id, idempotency_key="review-1")
        assert_same_record(again, first, "a retried approve")
        assert (await h.get(approved_one.id)).version == first.version, (
            "a retried approve wrote another version")
        await expect_error(MemoryConflictError,
                           approve(h, rejected_one.id, idempotency_key="review-1"),
                           "approve reusing an idempotency key for another record")
        assert await h.is_invisible(rejected_one), "a conflicting approve approved something"
        refused = await reject(h, rejected_one.id, idempotency_key="review-2")
        assert await reject(h, rejected_one.id, idempotency_key="review-2") == refused, (
            "a retried reject must return the first result, not fail")
        await expect_error(MemoryConflictError,
                           reject(h, approved_one.id, idempotency_key="review-2"),
                           "reject reusing an idempotency key for another record")
        assert not await h.is_invisible(approved_one), "a conflicting reject erased something"

    @requires("review")
    @scenario
    async def test_a_decided_record_cannot_be_decided_again(self, h: Harness) -> None:
        pending = await h.add("walrus under review", status=RecordStatus.PENDING_REVIEW)
        approved = await approve(h, pending.id)
        for decide in (approve, reject):
            await expect_error(MemoryConflictError, decide(h, pending.id),
                               f"{decide.__name__} of an approved record")
        assert_same_record(await h.get(pending.id), approved, "an approved record")
        rejected = await h.add("walrus refused", status=RecordStatus.PENDING_REVIEW)
        await reject(h, rejected.id)
        for decide in (approve, reject):
            await expect_error(MemoryNotFoundError, decide(h, rejected.id),
                               f"{decide.__name__} of a rejected record")

    @requires("review")
    @scenario
    async def test_a_pending_record_holds_its_key_and_hides_from_every_read(
        self, h: Harness
    ) -> None:
        pending = await h.add("pending walrus", key="k", status=RecordStatus.PENDING_REVIEW)
        await expect_error(MemoryConflictError, h.add("another walrus", key="k"),
                           "add of a key a pending record holds")
        for scope in (SIBLING, ELSEWHERE):
            await expect_error(MemoryNotFoundError, approve(h, pending.id, scope),
                               f"approve of a pending record from {scope}")
        await h.assert_invisible(pending, "a pending record")
        if h.capabilities.expiry:
            expiring = await h.add("pending, then expired", status=RecordStatus.PENDING_REVIEW,
                                   expires_at=h.clock.now() + 5)
            h.advance(5)
            for decide in (approve, reject):
                await expect_error(MemoryNotFoundError, decide(h, expiring.id),
                                   f"{decide.__name__} of an expired pending record")
        approved = await approve(h, pending.id)
        assert (await h.get_key("k")).id == approved.id


class UsageTests(ConformanceBase):
    @requires("usage")
    @scenario
    async def test_usage_counts_live_and_pending_records_and_their_bytes(
        self, h: Harness
    ) -> None:
        meter = h.provider.usage_meter
        assert meter is not None, "the provider declares usage but its usage_meter is None"
        counted = [await h.add("plain"), await h.add("café au lait"),
                   await h.add("held for review", status=RecordStatus.PENDING_REVIEW)]
        deleted = await h.add("deleted")
        await h.remove(deleted.id)
        if h.capabilities.expiry:
            await h.add("expired", expires_at=h.clock.now() + 1)
            h.advance(1)
        neighbour = await h.add("next door", scope=SIBLING)
        await h.add("another tenant", scope=ELSEWHERE)

        def size(records: list[MemoryRecord]) -> Usage:
            return Usage(len(records), sum(len(r.content.encode()) for r in records))

        scope_usage = await meter.usage(UsageQuery(TENANT, HOME), h.ctx())
        assert scope_usage == size(counted), "usage of one scope"
        tenant_usage = await meter.usage(UsageQuery(TENANT), h.ctx())
        assert tenant_usage == size([*counted, neighbour]), "usage of a whole tenant"
        counted[0] = await h.update(counted[0].id, content="plain, and longer since")
        assert await meter.usage(UsageQuery(TENANT, HOME), h.ctx()) == size(counted), (
            "usage after an update counts the record's current content")
