"""Idempotency keys: a retried write returns the first result; a reused key conflicts."""

from __future__ import annotations

from governed_memory.errors import MemoryConflictError

from governed_memory_conformance.base import ConformanceBase, scenario
from governed_memory_conformance.capabilities import requires
from governed_memory_conformance.harness import Harness, expect_error
from governed_memory_conformance.scopes import HOME, SIBLING
from governed_memory_conformance.suite.records import assert_same_record


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
