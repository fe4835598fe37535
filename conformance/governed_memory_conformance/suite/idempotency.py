"""Idempotency keys: a retried write returns the first result; a reused key conflicts."""

from __future__ import annotations

from governed_memory.errors import MemoryConflictError, MemoryNotFoundError
from governed_memory.records import RecordStatus
from governed_memory.requests import ApproveRequest

from governed_memory_conformance.base import ConformanceBase, scenario
from governed_memory_conformance.capabilities import requires
from governed_memory_conformance.harness import Harness, expect_error
from governed_memory_conformance.scopes import HOME, SIBLING
from governed_memory_conformance.suite.records import assert_same_record
from governed_memory_conformance.suite.review import reviewer


class IdempotencyTests(ConformanceBase):
    @requires("idempotency")
    @scenario
    async def test_same_key_and_request_returns_the_first_record(self, h: Harness) -> None:
        first = await h.add("retried", key="k", metadata={"a": 1}, idempotency_key="idem-1")
        h.advance(30)
        again = await h.add("retried", key="k", metadata={"a": 1}, idempotency_key="idem-1")
        assert_same_record(again, first, "the replayed add")
        assert await h.ids() == [first.id], "a replayed add wrote a second record"

    @requires("idempotency")
    @scenario
    async def test_same_key_with_another_request_conflicts(self, h: Harness) -> None:
        first = await h.add("original", idempotency_key="idem-1")
        for changed in ({"content": "different"},
                        {"content": "original", "metadata": {"a": 1}},
                        {"content": "original", "key": "k"}):
            content = str(changed.pop("content"))
            await expect_error(MemoryConflictError,
                               h.add(content, idempotency_key="idem-1", **changed),
                               f"add reusing an idempotency key with {changed or 'other content'}")
        assert await h.ids() == [first.id], "a conflicting idempotent add wrote something"

    @requires("idempotency")
    @scenario
    async def test_idempotency_keys_belong_to_one_scope(self, h: Harness) -> None:
        mine = await h.add("shared words", idempotency_key="idem-1")
        theirs = await h.add("shared words", scope=SIBLING, idempotency_key="idem-1")
        assert theirs.id != mine.id, "another scope's write was answered with this scope's record"
        assert theirs.scope_hash == SIBLING.scope_hash
        assert await h.ids(HOME) == [mine.id]
        assert await h.ids(SIBLING) == [theirs.id]

    @requires("idempotency")
    @scenario
    async def test_idempotent_update_replays_the_first_result(self, h: Harness) -> None:
        record = await h.add("v1")
        expected = record.revision if h.capabilities.compare_and_set else None
        first = await h.update(record.id, expected_revision=expected, content="v2",
                               idempotency_key="upd-1")
        h.advance(10)
        again = await h.update(record.id, expected_revision=expected, content="v2",
                               idempotency_key="upd-1")
        assert_same_record(again, first, "the replayed update")
        assert (await h.get(record.id)).version == 2, "a replayed update wrote a new version"
        await expect_error(MemoryConflictError,
                           h.update(record.id, content="v3", idempotency_key="upd-1"),
                           "update reusing an idempotency key with other content")
        assert (await h.get(record.id)).content == "v2"

    @requires("idempotency", "soft_delete")
    @scenario
    async def test_idempotent_delete_replays_the_first_result(self, h: Harness) -> None:
        record = await h.add("to delete")
        first = await h.delete(record.id, idempotency_key="del-1")
        again = await h.delete(record.id, idempotency_key="del-1")
        assert again == first, "a retried delete must return the first result, not fail"
        assert await h.is_invisible(record)

    @requires("idempotency")
    @scenario
    async def test_a_replay_returns_the_first_result_not_the_record_as_it_is_now(
        self, h: Harness
    ) -> None:
        """A retry answers with what the first attempt returned (its version, revision,
        content and times), even after later writes moved the record on: the caller is
        finishing the first attempt, not reading the record again."""
        first = await h.add("as first written", key="k", idempotency_key="add-1")
        h.advance(10)
        await h.update(first.id, content="changed since", importance=0.9)
        h.advance(10)
        again = await h.add("as first written", key="k", idempotency_key="add-1")
        assert_same_record(again, first, "an add retried after the record was updated")

        edited = await h.update(first.id, content="edited once", idempotency_key="upd-1")
        h.advance(10)
        await h.update(first.id, content="edited twice")
        replayed = await h.update(first.id, content="edited once", idempotency_key="upd-1")
        assert_same_record(replayed, edited, "an update retried after a later update")
        current = await h.get(first.id)
        assert (current.version, current.content) == (4, "edited twice"), (
            "a replayed update wrote to the record")
        if h.capabilities.review:
            pending = await h.add("held words", status=RecordStatus.PENDING_REVIEW)
            request = ApproveRequest(scope=HOME, record_id=pending.id,
                                     idempotency_key="approve-1")
            reviewer(h)  # the accessor answers when review is declared
            approved = await h.send(request, h.ctx())
            await h.update(pending.id, content="held words, edited after approval")
            assert_same_record(await h.send(request, h.ctx()), approved,
                               "an approve retried after the record was updated")

    @requires("idempotency")
    @scenario
    async def test_idempotency_keys_belong_to_one_operation(self, h: Harness) -> None:
        """An idempotency key names one write of one operation in one scope: an update
        (or a delete, or an approve) with the key an add used is a write of its own,
        applied as asked, and never answered with the add's result."""
        record = await h.add("first words", idempotency_key="shared")
        h.advance(5)
        try:
            updated = await h.update(record.id, content="second words",
                                     idempotency_key="shared")
        except MemoryConflictError as exc:
            raise AssertionError("an update was refused for reusing the idempotency key of "
                                 f"an add: keys belong to one operation ({exc})") from exc
        assert (updated.id, updated.version, updated.content) == (
            record.id, 2, "second words"), (
            f"an update with an add's idempotency key returned version {updated.version} "
            f"({updated.content!r}): the add was replayed instead of the update applied")
        again = await h.add("first words", idempotency_key="shared")
        assert_same_record(again, record, "the add retried after an update used its key")
        if h.capabilities.review:
            pending = await h.add("held words", status=RecordStatus.PENDING_REVIEW,
                                  idempotency_key="held")
            reviewer(h)  # the accessor answers when review is declared
            approved = await h.send(
                ApproveRequest(scope=HOME, record_id=pending.id, idempotency_key="held"),
                h.ctx())
            assert (approved.status, approved.version) == (RecordStatus.ACTIVE, 2), (
                "an approve with an add's idempotency key replayed the add")
        if h.capabilities.soft_delete:
            result = await h.delete(record.id, idempotency_key="shared")
            assert (result.record_id, result.hard) == (record.id, False)
            await expect_error(MemoryNotFoundError, h.get(record.id),
                               "get after a delete that reused an update's idempotency key")
