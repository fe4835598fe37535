"""Durability: what a ``durable`` provider acknowledged is there after it is closed and
opened again over the same storage (``reopen_provider``)."""

from __future__ import annotations

from governed_memory.errors import MemoryConflictError
from governed_memory.records import MemoryRecord, RecordStatus, VersionOperation

from governed_memory_conformance.base import ConformanceBase
from governed_memory_conformance.capabilities import requires
from governed_memory_conformance.harness import Harness, expect_error
from governed_memory_conformance.suite.records import assert_same_record

Seen = tuple[MemoryRecord, MemoryRecord, MemoryRecord, MemoryRecord]


class DurabilityTests(ConformanceBase):
    @requires("durable")
    def test_acknowledged_writes_survive_a_reopen(self) -> None:
        async def before(h: Harness) -> Seen:
            added = await h.add("kept across a restart", key="k",
                                metadata={"tags": ["a", "b"], "n": 1}, entity_ids=("e1",))
            h.advance(5)
            updated = await h.update(added.id, content="kept across a restart, edited")
            retried = await h.add("written once", idempotency_key="idem-durable")
            gone = await h.add("deleted before the restart")
            await h.remove(gone.id)
            pending = await h.add("held for review", status=RecordStatus.PENDING_REVIEW)
            return updated, retried, gone, pending

        async def after(h: Harness, seen: Seen) -> None:
            updated, retried, gone, pending = seen
            assert_same_record(await h.get(updated.id), updated, "get after a reopen")
            assert_same_record(await h.get_key("k"), updated, "get by key after a reopen")
            assert await h.ids() == sorted([updated.id, retried.id]), (
                "list after a reopen does not show exactly the live records")
            assert await h.is_invisible(gone), "a deleted record came back after a reopen"
            assert await h.is_invisible(pending), "a pending record became visible"
            caps = h.capabilities
            if caps.history:
                versions = await h.history(updated.id)
                assert [(v.record.version, v.operation) for v in versions] == [
                    (1, VersionOperation.ADD), (2, VersionOperation.UPDATE)], (
                    "history after a reopen")
            if caps.idempotency:
                again = await h.add("written once", idempotency_key="idem-durable")
                assert_same_record(again, retried, "an idempotent retry after a reopen")
                await expect_error(MemoryConflictError,
                                   h.add("written twice", idempotency_key="idem-durable"),
                                   "reusing an idempotency key for other content after a reopen")
            if caps.lexical_search:
                found = await h.search("restart")
                assert [hit.record.id for hit in found.hits] == [updated.id], (
                    "search after a reopen")
            if caps.compare_and_set:
                await expect_error(MemoryConflictError,
                                   h.update(updated.id, expected_revision="r-stale",
                                            content="x"),
                                   "a stale expected_revision after a reopen")
                newer = await h.update(updated.id, expected_revision=updated.revision,
                                       content="edited after the restart")
                assert newer.version == 3, "the revision stored before the restart is current"
            assert (await h.add("a new record")).id not in {updated.id, retried.id, gone.id,
                                                            pending.id}

        self.run_across_reopen(before, after)
