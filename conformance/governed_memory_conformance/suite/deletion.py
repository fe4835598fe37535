"""Delete: soft leaves a tombstone and hides the record; hard erases it with history."""

from __future__ import annotations

from governed_memory.errors import MemoryConflictError, MemoryNotFoundError
from governed_memory.records import MemoryRecord, RecordStatus, VersionOperation

from governed_memory_conformance.base import ConformanceBase, scenario
from governed_memory_conformance.capabilities import requires
from governed_memory_conformance.harness import Harness, expect_error
from governed_memory_conformance.model import Outcome


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

    @requires("hard_delete", "idempotency")
    @scenario
    async def test_hard_delete_leaves_no_idempotent_replay_of_the_record(
        self, h: Harness
    ) -> None:
        record = await h.add("erased walrus", key="k", idempotency_key="add-1")
        edited = await h.update(record.id, content="erased walrus, edited",
                                idempotency_key="upd-1")
        await h.delete(record.id, hard=True)
        await assert_not_replayed(h, record, edited, "a hard delete")


async def assert_not_replayed(h: Harness, record: MemoryRecord, edited: MemoryRecord,
                              erasure: str) -> None:
    """After ``erasure``, retrying the add and the update that wrote ``record`` (with
    their idempotency keys) must not hand back the erased content: a replay entry that
    still holds it is erased content left in storage. Refusing the retry (a conflict)
    or treating it as a new write are both faithful."""
    scope = record.scope
    try:
        again = await h.add(record.content, scope=scope, key=record.key,
                            idempotency_key="add-1")
    except MemoryConflictError:
        pass
    else:
        assert again.id != record.id, (
            f"after {erasure}, retrying the add returned the erased record")
    try:
        replayed = await h.update(record.id, scope, content=edited.content,
                                  idempotency_key="upd-1")
    except (MemoryConflictError, MemoryNotFoundError):
        pass
    else:
        raise AssertionError(f"after {erasure}, retrying the update returned the erased "
                             f"record's content (version {replayed.version})")
    await expect_error(MemoryNotFoundError, h.get(record.id, scope),
                       f"get of a record erased by {erasure}")


class ExpiredDeletionTests(ConformanceBase):
    """The rule for deleting a record whose expiry has passed, as the native provider
    implements it: an expired record is gone for every read and every soft write, so a
    soft delete of it is refused like a soft delete of a missing record
    (``MemoryNotFoundError``; ``MemoryConflictError`` when an ``expected_revision``
    is given). A hard delete may still erase it (or find it already purged)."""

    @requires("soft_delete", "expiry")
    @scenario
    async def test_soft_delete_of_an_expired_record_is_refused(self, h: Harness) -> None:
        record = await h.add("expiring walrus", key="k", expires_at=h.clock.now() + 5)
        h.advance(5)
        await expect_error(MemoryNotFoundError, h.delete(record.id),
                           "soft delete of an expired record")
        if h.capabilities.compare_and_set:
            await expect_error(MemoryConflictError,
                               h.delete(record.id, expected_revision=record.revision),
                               "soft delete of an expired record with its last revision")
        if h.capabilities.hard_delete:
            try:
                result = await h.delete(record.id, hard=True)
            except MemoryNotFoundError:
                outcome = Outcome.NOT_FOUND
            else:
                outcome = Outcome.OK
                assert (result.record_id, result.hard) == (record.id, True)
            assert outcome in (Outcome.OK, Outcome.NOT_FOUND)
        await h.assert_invisible(record, "an expired record after refused deletes")
        assert (await h.add("successor", key="k")).key == "k", "an expired record held its key"
