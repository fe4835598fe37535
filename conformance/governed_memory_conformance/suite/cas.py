"""Compare-and-set on ``expected_revision``: stale revisions, deleted records, races."""

from __future__ import annotations

import asyncio

from governed_memory.errors import MemoryConflictError, MemoryNotFoundError

from governed_memory_conformance.base import ConformanceBase, scenario
from governed_memory_conformance.capabilities import requires
from governed_memory_conformance.harness import Harness, expect_error
from governed_memory_conformance.suite.crud import GHOST_ID
from governed_memory_conformance.suite.records import assert_same_record


class CompareAndSetTests(ConformanceBase):
    @requires("compare_and_set")
    @scenario
    async def test_stale_revision_conflicts_and_changes_nothing(self, h: Harness) -> None:
        first = await h.add("first")
        second = await h.update(first.id, expected_revision=first.revision, content="second")
        await expect_error(MemoryConflictError,
                           h.update(first.id, expected_revision=first.revision, content="third"),
                           "update with a stale expected_revision")
        await expect_error(MemoryConflictError,
                           h.delete(first.id, expected_revision=first.revision,
                                    hard=not h.capabilities.soft_delete),
                           "delete with a stale expected_revision")
        assert_same_record(await h.get(first.id), second, "the record after refused writes")
        third = await h.update(first.id, content="third")
        assert third.version == 3, "an update without expected_revision is unconditional"

    @requires("compare_and_set")
    @scenario
    async def test_revision_of_a_deleted_or_missing_record_conflicts(self, h: Harness) -> None:
        record = await h.add("to be deleted")
        result = await h.delete(record.id, expected_revision=record.revision,
                                hard=not h.capabilities.soft_delete)
        assert result.record_id == record.id
        revisions = [record.revision] + ([result.revision] if result.revision else [])
        for revision in revisions:
            await expect_error(MemoryConflictError,
                               h.update(record.id, expected_revision=revision, content="x"),
                               "update of a deleted record with an expected_revision")
            await expect_error(MemoryConflictError,
                               h.delete(record.id, expected_revision=revision,
                                        hard=not h.capabilities.soft_delete),
                               "deleting a deleted record again with an expected_revision")
        await expect_error(MemoryNotFoundError, h.update(record.id, content="x"),
                           "update of a deleted record without expected_revision")
        await expect_error(MemoryConflictError,
                           h.update(GHOST_ID, expected_revision=record.revision, content="x"),
                           "update of a never-existing record with an expected_revision")
        assert await h.is_invisible(record), "a refused update revived a deleted record"

    @requires("compare_and_set")
    @scenario
    async def test_concurrent_compare_and_set_updates_lose_no_update(self, h: Harness) -> None:
        writers = self.conformance_settings.concurrent_writers
        record = await h.add("0")
        # Every writer reads before any writes, so the first round is a real race.
        everyone_read = asyncio.Barrier(writers)
        conflicts = 0

        async def increment() -> None:
            nonlocal conflicts
            first_round = True
            for _ in range(writers * 4):
                current = await h.get(record.id)
                if first_round:
                    first_round = False
                    await everyone_read.wait()
                await asyncio.sleep(0)
                try:
                    await h.update(record.id, expected_revision=current.revision,
                                   content=str(int(current.content) + 1))
                    return
                except MemoryConflictError:
                    conflicts += 1
            raise AssertionError("a writer kept losing compare-and-set; is the lock fair?")

        await asyncio.gather(*(increment() for _ in range(writers)))
        final = await h.get(record.id)
        assert final.content == str(writers), (
            f"{writers} compare-and-set increments ended at {final.content}: updates were lost")
        assert final.version == writers + 1
        assert conflicts >= writers - 1, "the racing writers did not conflict"
        if h.capabilities.history:
            versions = await h.history(record.id)
            assert [v.record.content for v in versions] == [str(n) for n in range(writers + 1)]
