"""What the policy engine and the events ask a request instead of asking its type:
whether it may be held for review, which user it names in place of a scope, and which
data subjects its events name."""

from __future__ import annotations

from typing import Any

import pytest
from governed_memory.events import subject_hash
from governed_memory.policy import Effect, PolicyCheck, PolicyEngine, PolicyVerdict
from governed_memory.principal import Permission, Principal, PrincipalKind
from governed_memory.request import Request
from governed_memory.requests import (
    AddRequest,
    ApproveRequest,
    DeleteAllRequest,
    DeleteUserRequest,
    GetRequest,
    SearchRequest,
    UpdateRequest,
)
from governed_memory.scope import Scope
from governed_memory.tiers.requests import EraseUserTurnsRequest

ADMIN = Principal("svc", PrincipalKind.SERVICE, "acme", permissions=frozenset(Permission))
ALICE_SCOPE = Scope("acme", user_id="alice")


class Verdict:
    name = "fixed"
    revision = "1"

    def __init__(self, verdict: PolicyVerdict) -> None:
        self.verdict = verdict

    async def evaluate(self, check: PolicyCheck) -> PolicyVerdict:
        return self.verdict


async def decide(request: Request[Any],
                 verdict: PolicyVerdict) -> tuple[Effect, tuple[str, ...]]:
    engine = PolicyEngine([Verdict(verdict)])
    decision = await engine.decide(PolicyCheck(request.operation, ADMIN, request, "op_1", 0.0))
    return decision.effect, decision.reasons()


@pytest.mark.parametrize("request_", [
    UpdateRequest(scope=ALICE_SCOPE, record_id="01ABC", content="y"),
    DeleteAllRequest(scope=ALICE_SCOPE),
    DeleteUserRequest(tenant_id="acme", user_id="alice"),
    ApproveRequest(scope=ALICE_SCOPE, record_id="01ABC"),
    EraseUserTurnsRequest(tenant_id="acme", user_id="alice"),
])
async def test_only_a_new_record_may_be_held_for_review(request_: Request[Any]) -> None:
    assert not request_.reviewable
    effect, reasons = await decide(request_, PolicyVerdict.review("x"))
    assert effect is Effect.DENY
    assert reasons[-1] == (f"review: review is only possible for new records, "
                           f"not {request_.operation.value}")


async def test_a_new_record_may_be_held_for_review() -> None:
    request = AddRequest(scope=ALICE_SCOPE, content="x")
    assert request.reviewable
    effect, _ = await decide(request, PolicyVerdict.review("x"))
    assert effect is Effect.REVIEW


async def test_a_transform_may_not_change_whom_an_erasure_names() -> None:
    request = DeleteUserRequest(tenant_id="acme", user_id="alice")
    moved = DeleteUserRequest(tenant_id="acme", user_id="bob")
    effect, reasons = await decide(request, PolicyVerdict.transform(moved, "sneaky"))
    assert effect is Effect.DENY
    assert reasons == ("fixed: invalid transform: changed the data subject",)
    same = DeleteUserRequest(tenant_id="acme", user_id="alice")
    effect, _ = await decide(request, PolicyVerdict.transform(same, "same user"))
    assert effect is Effect.ALLOW


def test_only_an_erasure_of_a_user_names_a_user_in_place_of_scopes() -> None:
    assert DeleteUserRequest(tenant_id="acme", user_id="alice").named_subject() == (
        "acme", "alice")
    # The tier erasure names the user's scope instead, which the scope rule decides.
    assert EraseUserTurnsRequest(tenant_id="acme", user_id="alice").named_subject() is None
    assert GetRequest(scope=ALICE_SCOPE, record_id="01ABC").named_subject() is None


ALICE = subject_hash("acme", "alice")


@pytest.mark.parametrize(("request_", "subjects"), [
    (GetRequest(scope=ALICE_SCOPE, record_id="01ABC"), (ALICE,)),
    (GetRequest(scope=Scope("acme", project_id="handbook"), record_id="01ABC"), ()),
    (SearchRequest(scopes=(ALICE_SCOPE, Scope("acme"), ALICE_SCOPE.replace(session_id="s")),
                   query="q"), (ALICE,)),
    (DeleteUserRequest(tenant_id="acme", user_id="alice"), (ALICE,)),
    (DeleteUserRequest(tenant_id="acme", user_id=7), ()),  # type: ignore[arg-type]
    (EraseUserTurnsRequest(tenant_id="acme", user_id="alice"), (ALICE,)),
    # Too malformed for a scope, still a user: a rejected erasure names whom it concerned.
    (EraseUserTurnsRequest(tenant_id="acme", user_id=" alice"), (subject_hash("acme", " alice"),)),
    (EraseUserTurnsRequest(tenant_id="acme", user_id=None), ()),  # type: ignore[arg-type]
])
def test_the_data_subjects_events_name(request_: Request[Any],
                                       subjects: tuple[str, ...]) -> None:
    assert request_.subjects() == subjects


def test_a_request_without_a_scope_names_its_own_tenant_or_the_principals() -> None:
    assert DeleteUserRequest(tenant_id="globex", user_id="bob").tenant("acme") == "globex"
    assert EraseUserTurnsRequest(tenant_id="globex", user_id="bob").tenant("acme") == "globex"
    assert EraseUserTurnsRequest(tenant_id="globex", user_id=" bob").tenant("acme") == "acme"
