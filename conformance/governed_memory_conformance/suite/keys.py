"""Keys: every way a record goes away frees its key, and a key added again is a new
record (a new id, version 1), never the old one brought back.

A key is unique among the live and pending records of one scope. The bugs these tests
exist for keep a removed record's claim on its key (a tombstone that still counts, an
erasure that leaves the key index behind) or "revive" the removed record by key,
reusing its id and restarting its version at 1, so a new fact inherits an old fact's
history and an audit trail that named the old id now names the new one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

from governed_memory.errors import MemoryConflictError, MemoryNotFoundError
from governed_memory.records import MemoryRecord, RecordStatus, VersionOperation
from governed_memory.requests import (
    DeleteAllRequest,
    DeleteUserRequest,
    PurgeExpiredRequest,
    RejectRequest,
)
from governed_memory.scope import Scope

from governed_memory_conformance.base import ConformanceBase, scenario
from governed_memory_conformance.harness import Harness, expect_error
from governed_memory_conformance.scopes import CHILD, HOME, TENANT
from governed_memory_conformance.suite.review import reviewer

Removal = Callable[[Harness, MemoryRecord], Awaitable[None]]

ERASED_USER: Final = Scope(TENANT, user_id="carol")
"""Where the ``delete_user`` case writes: erasing carol touches no other case's record."""


async def _remove(h: Harness, record: MemoryRecord) -> None:
    await h.remove(record.id, record.scope)


async def _soft(h: Harness, record: MemoryRecord) -> None:
    await h.delete(record.id, record.scope)


async def _hard(h: Harness, record: MemoryRecord) -> None:
    await h.delete(record.id, record.scope, hard=True)


async def _soft_then_hard(h: Harness, record: MemoryRecord) -> None:
    await h.delete(record.id, record.scope)
    await h.delete(record.id, record.scope, hard=True)


async def _expire(h: Harness, record: MemoryRecord) -> None:
    await h.update(record.id, record.scope, expires_at=h.clock.now())


async def _expire_and_purge(h: Harness, record: MemoryRecord) -> None:
    await _expire(h, record)
    after: str | None = None
    while True:
        page = await h.send(
            PurgeExpiredRequest(scope=record.scope, limit=100, after=after), h.ctx())
        if page.next_cursor is None:
            return
        after = page.next_cursor


async def _delete_all(h: Harness, record: MemoryRecord) -> None:
    await h.send(DeleteAllRequest(scope=record.scope), h.ctx())


async def _delete_user(h: Harness, record: MemoryRecord) -> None:
    user_id = record.scope.user_id
    assert user_id is not None
    await h.send(
        DeleteUserRequest(tenant_id=record.scope.tenant_id, user_id=user_id), h.ctx())


async def _reject(h: Harness, record: MemoryRecord) -> None:
    reviewer(h)  # the accessor answers when review is declared
    await h.send(RejectRequest(scope=record.scope, record_id=record.id), h.ctx())


REMOVALS: Final[tuple[tuple[str, tuple[str, ...], Scope, Removal, bool], ...]] = (
    # name, capabilities needed, scope, how, whether the record is added pending
    ("delete", (), HOME, _remove, False),
    ("soft delete", ("soft_delete",), HOME, _soft, False),
    ("hard delete", ("hard_delete",), HOME, _hard, False),
    ("soft then hard delete", ("soft_delete", "hard_delete"), HOME, _soft_then_hard, False),
    ("expiry", ("expiry",), HOME, _expire, False),
    ("expiry and purge", ("expiry", "purge_expired"), HOME, _expire_and_purge, False),
    ("reject", ("review",), HOME, _reject, True),
    ("delete_all", ("delete_all",), CHILD, _delete_all, False),
    ("delete_user", ("delete_user",), ERASED_USER, _delete_user, False),
)


class KeyTests(ConformanceBase):
    @scenario
    async def test_every_removal_frees_the_key(self, h: Harness) -> None:
        """Each way a record goes away that the provider declares (a delete, soft and
        hard, expiry, a purge, a rejected review, ``delete_all``, ``delete_user``) frees
        its key at once: adding the key again makes a new record, which
        ``get`` by key, ``list`` and a later update find."""
        for index, (name, needs, scope, remove, pending) in enumerate(REMOVALS):
            if not all(getattr(h.capabilities, flag) for flag in needs):
                continue
            key = f"key-{index}"
            status = RecordStatus.PENDING_REVIEW if pending else RecordStatus.ACTIVE
            old = await h.add(f"first holder, removed by {name}", scope=scope, key=key,
                              status=status)
            await remove(h, old)
            try:
                new = await h.add(f"second holder, after {name}", scope=scope, key=key)
            except MemoryConflictError as exc:
                raise AssertionError(f"after {name}, the removed record still holds its "
                                     f"key: {exc}") from exc
            assert new.id != old.id, f"after {name}, adding the key again reused the old id"
            assert new.version == 1, (
                f"after {name}, the new holder starts at version {new.version}")
            found = await h.get_key(key, scope)
            assert found.id == new.id, (
                f"after {name}, get by key found {found.id}, not the new holder")
            listed = [record.id for record in await h.list_all(scope) if record.key == key]
            assert listed == [new.id], f"after {name}, list shows {listed} holding the key"
            edited = await h.update(new.id, scope, content=f"second holder, edited ({name})")
            assert (edited.id, edited.version) == (new.id, 2)
            await expect_error(MemoryConflictError, h.add("a third holder", scope=scope, key=key),
                               f"adding the key again while the holder after {name} is live")

    @scenario
    async def test_a_key_added_again_is_a_new_record(self, h: Harness) -> None:
        """A record added under the key of a removed one is a new record: a new id and
        revision, version 1, ``created_at`` now and a history of its own. The removed
        record stays removed (and, soft-deleted, keeps its own history untouched)."""
        soft = h.capabilities.soft_delete
        old = await h.add("Alice lives in Lyon", key="home")
        h.advance(10)
        edited = await h.update(old.id, content="Alice lives in Lyon, France")
        h.advance(10)
        await h.remove(old.id)
        h.advance(10)
        new = await h.add("Alice lives in Paris", key="home")
        assert new.id != old.id, "the key's new record reused the removed record's id"
        assert new.version == 1, f"the key's new record starts at version {new.version}"
        assert new.revision not in (old.revision, edited.revision)
        assert new.created_at == new.updated_at == h.clock.now(), (
            "the key's new record took the removed record's times")
        await expect_error(MemoryNotFoundError, h.get(old.id), "get of the removed record")
        await expect_error(MemoryNotFoundError, h.update(old.id, content="x"),
                           "update of the removed record after its key was taken again")
        if h.capabilities.history:
            versions = await h.history(new.id)
            assert [(v.record.version, v.operation) for v in versions] == [
                (1, VersionOperation.ADD)], "the key's new record has history it never had"
            if soft:
                kept = await h.history(old.id)
                assert [(v.record.id, v.record.version, v.operation) for v in kept] == [
                    (old.id, 1, VersionOperation.ADD), (old.id, 2, VersionOperation.UPDATE),
                    (old.id, 3, VersionOperation.DELETE)], (
                    "the removed record's history changed when its key was taken again")
        await h.remove(new.id)
        third = await h.add("Alice lives in Rome", key="home")
        assert third.id not in (old.id, new.id) and third.version == 1
        assert (await h.get_key("home")).id == third.id

    @scenario
    async def test_keys_and_idempotency_keys_are_compared_exactly(self, h: Harness) -> None:
        """Keys are exact, like scopes: keys that differ only in case, width or Unicode
        normal form are different keys of one scope, each with its own holder; and so
        are idempotency keys."""
        spellings = ("cl\u00e9", "cle\u0301", "CL\u00c9", "\uff43\uff4c\uff45")
        holders = {key: await h.add(f"held under {key!r}", key=key) for key in spellings}
        assert len({record.id for record in holders.values()}) == len(spellings)
        for key, record in holders.items():
            found = await h.get_key(key)
            assert found.id == record.id, (
                f"get by key {key!r} found the holder of another spelling")
        if h.capabilities.idempotency:
            first = await h.add("written under Idem", idempotency_key="Idem-1")
            other = await h.add("written under idem", idempotency_key="idem-1")
            assert other.id != first.id and other.content == "written under idem", (
                "idempotency keys that differ in case were taken for one key")
