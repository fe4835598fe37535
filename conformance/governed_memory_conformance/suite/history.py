"""History: every version, ascending, with its operation and time."""

from __future__ import annotations

from governed_memory.errors import MemoryNotFoundError
from governed_memory.records import RecordStatus, VersionOperation

from governed_memory_conformance.base import ConformanceBase, scenario
from governed_memory_conformance.capabilities import requires
from governed_memory_conformance.harness import Harness, expect_error
from governed_memory_conformance.scopes import HOME, NEIGHBOURS
from governed_memory_conformance.suite.records import record_fields, vandalize


class HistoryTests(ConformanceBase):
    @requires("history")
    @scenario
    async def test_history_lists_versions_ascending_with_operation_and_time(
        self, h: Harness
    ) -> None:
        start = h.clock.now()
        record = await h.add("v1")
        expected = [(1, VersionOperation.ADD, "v1", start, RecordStatus.ACTIVE)]
        for n in (2, 3):
            h.advance(10)
            await h.update(record.id, content=f"v{n}")
            expected.append((n, VersionOperation.UPDATE, f"v{n}", h.clock.now(),
                             RecordStatus.ACTIVE))
        if h.capabilities.soft_delete:
            h.advance(10)
            await h.delete(record.id)
            expected.append((4, VersionOperation.DELETE, "v3", h.clock.now(),
                             RecordStatus.DELETED))
        versions = await h.history(record.id)
        actual = [(v.record.version, v.operation, v.record.content, v.recorded_at,
                   v.record.status) for v in versions]
        assert actual == expected
        assert all(v.record.id == record.id and v.record.scope_hash == HOME.scope_hash
                   for v in versions)
        revisions = [v.record.revision for v in versions]
        assert len(set(revisions)) == len(revisions), "two versions share a revision"
        assert all(v.record.created_at == start for v in versions), (
            "created_at must stay the same in every version")

    @requires("history")
    @scenario
    async def test_history_returns_detached_copies(self, h: Harness) -> None:
        record = await h.add("v1", metadata={"tags": ["a"]})
        await h.update(record.id, content="v2", metadata={"tags": ["b"]})
        pristine = [record_fields(v.record) for v in await h.history(record.id)]
        for version in await h.history(record.id):
            vandalize(version.record)
        assert [record_fields(v.record) for v in await h.history(record.id)] == pristine

    @requires("history")
    @scenario
    async def test_history_of_another_scopes_record_is_not_found(self, h: Harness) -> None:
        record = await h.add("mine")
        for scope in NEIGHBOURS:
            await expect_error(MemoryNotFoundError, h.history(record.id, scope),
                               f"history of a record of {HOME} asked from {scope}")

    @requires("history", "expiry")
    @scenario
    async def test_history_of_an_expired_record_is_not_found(self, h: Harness) -> None:
        """An expired record is gone for every read, ``history`` included: a provider may
        purge it at any moment, so an answer would depend on when the purge ran."""
        record = await h.add("v1", expires_at=h.clock.now() + 10)
        await h.update(record.id, content="v2")
        assert len(await h.history(record.id)) == 2
        h.advance(10)
        await expect_error(MemoryNotFoundError, h.history(record.id),
                           "history of an expired record")
        if h.capabilities.soft_delete:
            tombstoned = await h.add("deleted, then expired", expires_at=h.clock.now() + 10)
            await h.delete(tombstoned.id)
            assert len(await h.history(tombstoned.id)) == 2, "a tombstone's history is shown"
            h.advance(10)
            await expect_error(MemoryNotFoundError, h.history(tombstoned.id),
                               "history of a soft-deleted record whose expiry passed")
