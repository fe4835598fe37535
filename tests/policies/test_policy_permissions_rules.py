"""``permissions`` and ``write-rules``: allow and deny, alone and through a manager."""

from __future__ import annotations

import pytest
from actors import ADMIN, ALICE, ALICE_SCOPE
from governed_memory import GovernedMemoryManager, MemoryPolicyDeniedError
from governed_memory.clock import ManualClock
from governed_memory.operations import Operation
from governed_memory.policy import Effect
from governed_memory.principal import Permission, Principal, PrincipalKind
from governed_memory.records import MemoryType
from governed_memory.requests import (
    AddRequest,
    ApproveRequest,
    DeleteRequest,
    DeleteUserRequest,
    GetRequest,
    HistoryRequest,
    PurgeExpiredRequest,
    UpdateRequest,
)
from governed_memory.scope import Scope
from governed_memory_policies import permissions, write_rules
from policy_support import check, profile

ADMINS_DELETE = profile(access={"permissions": {"delete": "memory:admin",
                                                "history": "memory:review"}},
                        policies={"enabled": ["permissions"]})


async def test_permissions_allow_without_an_override() -> None:
    policy = permissions.build({}, ADMINS_DELETE)
    verdict = await policy.evaluate(check(GetRequest(scope=ALICE_SCOPE, record_id="01ABC"), ALICE))
    assert verdict.effect is Effect.ALLOW


async def test_permissions_deny_when_the_profile_demands_more() -> None:
    policy = permissions.build({}, ADMINS_DELETE)
    verdict = await policy.evaluate(check(DeleteRequest(scope=ALICE_SCOPE, record_id="01ABC"),
                                          ALICE))
    assert verdict.effect is Effect.DENY
    assert verdict.reason == "delete takes memory:admin in this profile"
    assert (await policy.evaluate(check(DeleteRequest(scope=ALICE_SCOPE, record_id="01ABC"), ADMIN))
            ).effect is Effect.ALLOW
    reviewer = Principal("svc:mod", PrincipalKind.SERVICE, "acme",
                         permissions=[Permission.READ, Permission.REVIEW])
    assert (await policy.evaluate(check(HistoryRequest(scope=ALICE_SCOPE, record_id="01ABC"),
                                        reviewer))
            ).effect is Effect.ALLOW


async def test_permissions_through_a_manager_write_nothing() -> None:
    from governed_memory_native import build_native_provider

    clock = ManualClock()
    async with GovernedMemoryManager(build_native_provider({"backend": "memory"}, clock),
                                     clock=clock,
                                     policies=[permissions.build({}, ADMINS_DELETE)]) as m:
        record = await m.add(ALICE, ALICE_SCOPE, "keep me")
        with pytest.raises(MemoryPolicyDeniedError) as info:
            await m.delete(ALICE, ALICE_SCOPE, record.id)
        assert info.value.policy == "permissions"
        assert info.value.reasons == ("permissions: delete takes memory:admin in this profile",)
        assert (await m.get(ALICE, ALICE_SCOPE, record.id)).version == 1


RULES = profile(write={"read_only": False, "allowed_memory_types": ["fact", "preference"],
                       "require_idempotency_key": True},
                scope={"required": ["tenant_id", "user_id"]},
                policies={"enabled": ["write-rules"]})


async def test_write_rules_allow_a_conforming_write() -> None:
    policy = write_rules.build({}, RULES)
    request = AddRequest(scope=ALICE_SCOPE, content="x", memory_type=MemoryType.FACT,
                         idempotency_key="k")
    assert (await policy.evaluate(check(request))).effect is Effect.ALLOW
    # Reads are never refused by write rules, at any level.
    assert (await policy.evaluate(check(GetRequest(scope=Scope("acme"), record_id="01ABC")))
            ).effect is Effect.ALLOW


@pytest.mark.parametrize(
    ("request_", "reason"),
    [
        (AddRequest(scope=ALICE_SCOPE, content="x", memory_type=MemoryType.EPISODE,
                    idempotency_key="k"),
         "memory type episode is not allowed; allowed: fact, preference"),
        (UpdateRequest(scope=ALICE_SCOPE, record_id="01ABC", memory_type=MemoryType.NOTE,
                       idempotency_key="k"),
         "memory type note is not allowed; allowed: fact, preference"),
        (AddRequest(scope=ALICE_SCOPE, content="x", memory_type=MemoryType.FACT),
         "add needs an idempotency_key in this profile"),
        (DeleteRequest(scope=ALICE_SCOPE, record_id="01ABC"),
         "delete needs an idempotency_key in this profile"),
        (AddRequest(scope=Scope("acme", project_id="p"), content="x", memory_type=MemoryType.FACT,
                    idempotency_key="k"), "new memories need scope dimension(s) user_id"),
    ],
)
async def test_write_rules_deny(request_: object, reason: str) -> None:
    verdict = await write_rules.build({}, RULES).evaluate(check(request_))  # type: ignore[arg-type]
    assert (verdict.effect, verdict.reason) == (Effect.DENY, reason)


READ_ONLY = profile(write={"read_only": True}, policies={"enabled": ["write-rules"]})


@pytest.mark.parametrize("request_", [
    AddRequest(scope=ALICE_SCOPE, content="x"), UpdateRequest(scope=ALICE_SCOPE, record_id="01ABC",
                                                              content="y"),
    DeleteRequest(scope=ALICE_SCOPE, record_id="01ABC"), ApproveRequest(scope=ALICE_SCOPE,
                                                                        record_id="01ABC"),
])
async def test_read_only_denies_every_ordinary_write(request_: object) -> None:
    verdict = await write_rules.build({}, READ_ONLY).evaluate(check(request_))  # type: ignore[arg-type]
    assert (verdict.effect, verdict.reason) == (Effect.DENY, "the profile is read-only")


@pytest.mark.parametrize("request_", [
    GetRequest(scope=ALICE_SCOPE, record_id="01ABC"), DeleteUserRequest(tenant_id="acme",
                                                                        user_id="alice"),
    PurgeExpiredRequest(scope=ALICE_SCOPE),
])
async def test_read_only_still_reads_and_erases(request_: object) -> None:
    verdict = await write_rules.build({}, READ_ONLY).evaluate(check(request_))  # type: ignore[arg-type]
    assert verdict.effect is Effect.ALLOW


def test_operation_table_has_review_decisions() -> None:
    assert Operation.APPROVE.permission is Permission.REVIEW
    assert Operation.REJECT.permission is Permission.REVIEW
    assert Operation.APPROVE.kind.value == Operation.REJECT.kind.value == "write"
