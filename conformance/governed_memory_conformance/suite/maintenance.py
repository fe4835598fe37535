"""Maintenance: erase one exact scope, erase one user, and never "everything"."""

from __future__ import annotations

from governed_memory.errors import MemoryNotFoundError, MemoryValidationError
from governed_memory.requests import DeleteAllRequest, DeleteUserRequest
from governed_memory.scope import Scope

from governed_memory_conformance.base import ConformanceBase, scenario
from governed_memory_conformance.capabilities import requires
from governed_memory_conformance.harness import Harness, expect_error
from governed_memory_conformance.scopes import (
    CHILD,
    ELSEWHERE,
    HOME,
    LOOKALIKES,
    OTHER_TENANT,
    PARENT,
    SAME_VALUE_OTHER_DIMENSION,
    SIBLING,
    TENANT,
)

ALICE_EVERYWHERE = (
    HOME,
    CHILD,
    Scope(TENANT, project_id="p1", user_id="alice"),
    Scope(TENANT, workspace_id="w1", user_id="alice", agent_id="helper"),
)
NOT_ALICE_HERE = (
    PARENT,
    SIBLING,
    SAME_VALUE_OTHER_DIMENSION,
    ELSEWHERE,
    Scope(TENANT, project_id="p1"),
    # alice in other case or width, and alice in the tenant spelt in other case
    *(scope for scope in LOOKALIKES if (scope.tenant_id, scope.user_id) != (TENANT, "alice")),
)


async def delete_user(h: Harness, tenant_id: str, user_id: str) -> int:
    receipt = await h.send(DeleteUserRequest(tenant_id=tenant_id, user_id=user_id),
                                           h.ctx(tenant_id))
    assert (receipt.tenant_id, receipt.user_id) == (tenant_id, user_id)
    assert receipt.verify(), "the erasure receipt's hash does not cover its fields"
    return int(receipt.counts["records"])


class MaintenanceTests(ConformanceBase):
    @requires("delete_all")
    @scenario
    async def test_delete_all_erases_exactly_one_scope(self, h: Harness) -> None:
        doomed = [await h.add("doomed one", key="k"), await h.add("doomed two")]
        if h.capabilities.expiry:
            doomed.append(await h.add("doomed, expired", expires_at=h.clock.now() + 1))
        survivors = [await h.add(f"survivor in {scope}", scope=scope, key="k")
                     for scope in (PARENT, SIBLING, CHILD, ELSEWHERE, SAME_VALUE_OTHER_DIMENSION)]
        h.advance(5)
        count = await h.send(DeleteAllRequest(scope=HOME), h.ctx())
        assert count == len(doomed), (
            f"delete_all reported {count}; the scope held {len(doomed)} live and expired records")
        assert await h.ids() == [], "delete_all left records in the scope"
        if h.capabilities.history:
            for record in doomed:
                await expect_error(MemoryNotFoundError, h.history(record.id),
                                   "history of a record erased by delete_all")
        for record in survivors:
            assert not await h.is_invisible(record), f"delete_all erased a record of {record.scope}"
        again = await h.send(DeleteAllRequest(scope=HOME), h.ctx())
        assert again == 0, "delete_all of an empty scope must count nothing"
        assert (await h.add("fresh start", key="k")).key == "k", "an erased key is free"

    @requires("delete_user")
    @scenario
    async def test_delete_user_erases_one_user_in_every_scope_of_the_tenant(
        self, h: Harness
    ) -> None:
        doomed = [await h.add(f"alice's note in {scope}", scope=scope)
                  for scope in ALICE_EVERYWHERE]
        if h.capabilities.soft_delete:  # erasure reaches deleted records too
            tombstone = await h.add("alice's deleted note", scope=HOME)
            await h.delete(tombstone.id)
            doomed.append(tombstone)
        survivors = [await h.add(f"kept in {scope}", scope=scope) for scope in NOT_ALICE_HERE]
        erased = await delete_user(h, TENANT, "alice")
        assert erased == len(doomed), (
            f"the receipt counts {erased} records; alice had {len(doomed)}")
        for scope in ALICE_EVERYWHERE:
            assert await h.ids(scope) == [], f"delete_user left records in {scope}"
        if h.capabilities.history:
            for record in doomed:
                await expect_error(MemoryNotFoundError, h.history(record.id, record.scope),
                                   "history of an erased user's record")
        for record in survivors:
            assert not await h.is_invisible(record), (
                f"delete_user of alice in {TENANT} erased a record of {record.scope}")

    @requires("delete_user")
    @scenario
    async def test_delete_user_matches_ids_exactly(self, h: Harness) -> None:
        # LIKE's one-character wildcard, case folding and prefixes are the classic ways
        # to erase too much ('%' and '*' are refused as identifiers before they get here).
        # And normalisation: NFC and NFD spellings of one name, fullwidth letters.
        users = ("a_c", "abc", "a_", "ab", "_", "Bob", "bob", "bo", "zo\u00e9", "zoe\u0301",
                 "\uff42\uff4f\uff42")
        records = {user: await h.add(f"note of {user}", scope=Scope(TENANT, user_id=user))
                   for user in users}
        erased: set[str] = set()
        for user in ("a_c", "a_", "_", "Bob", "zo\u00e9"):
            assert await delete_user(h, TENANT, user) == 1, f"erasing {user!r} miscounted"
            erased.add(user)
            for other, record in records.items():
                gone = await h.is_invisible(record)
                assert gone == (other in erased), (
                    f"after erasing user {user!r}, the record of {other!r} is "
                    f"{'gone' if gone else 'still there'}")

    @scenario
    async def test_scopes_refuse_empty_and_wildcard_values(self, h: Harness) -> None:
        for dimensions in ({"tenant_id": ""}, {"tenant_id": "   "}, {"tenant_id": "*"},
                           {"tenant_id": TENANT, "user_id": "*"},
                           {"tenant_id": TENANT, "user_id": ""},
                           {"tenant_id": TENANT, "project_id": "proj*"},
                           {"tenant_id": TENANT, "user_id": "%"},
                           {"tenant_id": TENANT, "session_id": "s%"}):
            try:
                Scope(**dimensions)
            except MemoryValidationError:
                continue
            raise AssertionError(f"Scope({dimensions}) was accepted")

    @requires("delete_user")
    @scenario
    async def test_delete_user_refuses_empty_or_wildcard_ids(self, h: Harness) -> None:
        kept = [await h.add("kept", scope=scope) for scope in (HOME, SIBLING, ELSEWHERE)]
        for tenant_id, user_id in (("*", "alice"), ("", "alice"), (TENANT, "*"), (TENANT, ""),
                                   (TENANT, " "), (OTHER_TENANT, "al*"), (TENANT, "%"),
                                   (TENANT, "al%"), ("%", "alice")):
            request = DeleteUserRequest(tenant_id=tenant_id, user_id=user_id)
            await expect_error(MemoryValidationError,
                               h.send(request, h.ctx()),
                               f"delete_user(tenant_id={tenant_id!r}, user_id={user_id!r})")
        for record in kept:
            assert not await h.is_invisible(record), "a refused erasure erased something"

    @requires("delete_user", "idempotency")
    @scenario
    async def test_delete_user_leaves_no_idempotent_replay_of_the_users_records(
        self, h: Harness
    ) -> None:
        from governed_memory_conformance.suite.deletion import assert_not_replayed

        record = await h.add("alice's erased note", key="k", idempotency_key="add-1")
        edited = await h.update(record.id, content="alice's erased note, edited",
                                idempotency_key="upd-1")
        kept = await h.add("bob's note", scope=SIBLING, idempotency_key="add-1")
        assert await delete_user(h, TENANT, "alice") == 1
        await assert_not_replayed(h, record, edited, "delete_user")
        again = await h.add("bob's note", scope=SIBLING, idempotency_key="add-1")
        assert again.id == kept.id, "delete_user of alice forgot bob's idempotency entry"
