"""Delete: soft leaves a tombstone and hides the record; hard erases it with history."""

from __future__ import annotations

from governed_memory.errors import MemoryNotFoundError
from governed_memory.records import RecordStatus, VersionOperation

from governed_memory_conformance.base import ConformanceBase, scenario
from governed_memory_conformance.capabilities import requires
from governed_memory_conformance.harness import Harness, expect_error


class DeletionTests(ConformanceBase):
    @requires("soft_delete")
    @scenario
    async def test_soft_delete_hides_the_record(self, h: Harness) -> None:
        record = await h.add("soft delete walrus", key="k")
        h.advance(3)
        result = await h.delete(record.id)
        assert (result.record_id, result.scope_hash, result.hard) == (
            record.id, record.scope_hash, False)
        if result.version is not None:
            assert result.version == record.version + 1, "a tombstone is the next version"
        await h.assert_invisible(record, "a soft-deleted record")
        await expect_error(MemoryNotFoundError, h.delete(record.id),
                           "soft delete of a soft-deleted record")
        await expect_error(MemoryNotFoundError, h.update(record.id, content="x"),
                           "update of a soft-deleted record")
        successor = await h.add("successor", key="k")
        assert (await h.get_key("k")).id == successor.id, "a tombstone still holds its key"

    @requires("soft_delete", "history")
    @scenario
    async def test_soft_delete_leaves_a_tombstone_in_history(self, h: Harness) -> None:
        record = await h.add("tombstoned")
        h.advance(7)
        result = await h.delete(record.id)
        versions = await h.history(record.id)
        assert [v.operation for v in versions] == [VersionOperation.ADD, VersionOperation.DELETE]
        tombstone = versions[-1]
        assert tombstone.record.status is RecordStatus.DELETED
        assert tombstone.record.version == record.version + 1
        assert tombstone.recorded_at == record.created_at + 7
        assert tombstone.record.content == record.content
        if result.revision is not None:
            assert tombstone.record.revision == result.revision

    @requires("hard_delete")
    @scenario
    async def test_hard_delete_removes_the_record_and_its_history(self, h: Harness) -> None:
        record = await h.add("hard delete walrus", key="k")
        await h.update(record.id, content="hard delete walrus, edited")
        result = await h.delete(record.id, hard=True)
        assert (result.record_id, result.hard) == (record.id, True)
        await h.assert_invisible(record, "a hard-deleted record")
        if h.capabilities.history:
            await expect_error(MemoryNotFoundError, h.history(record.id),
                               "history of a hard-deleted record")
        await expect_error(MemoryNotFoundError, h.delete(record.id, hard=True),
                           "hard delete of a hard-deleted record")
        successor = await h.add("successor", key="k")
        assert (await h.get_key("k")).id == successor.id

    @requires("soft_delete", "hard_delete")
    @scenario
    async def test_hard_delete_erases_a_tombstone(self, h: Harness) -> None:
        record = await h.add("first soft, then hard")
        await h.delete(record.id)
        result = await h.delete(record.id, hard=True)
        assert (result.record_id, result.hard) == (record.id, True)
        if h.capabilities.history:
            await expect_error(MemoryNotFoundError, h.history(record.id),
                               "history after a hard delete of a tombstone")
        await expect_error(MemoryNotFoundError, h.delete(record.id, hard=True),
                           "hard delete of an erased record")
