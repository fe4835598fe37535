"""The policy engine: the fixed scope rule first, then policies; deny wins; fail closed."""

from __future__ import annotations

import attrs
import pytest
from governed_memory.operations import Operation
from governed_memory.policy import (
    SCOPE_RULE_NAME,
    Effect,
    PolicyCheck,
    PolicyEngine,
    PolicyVerdict,
    authorize_scope,
)
from governed_memory.principal import Permission, Principal, PrincipalKind
from governed_memory.records import RecordStatus
from governed_memory.requests import (
    AddRequest,
    DeleteAllRequest,
    DeleteUserRequest,
    GetRequest,
    SearchRequest,
    UpdateRequest,
)
from governed_memory.scope import Scope

RW = frozenset({Permission.READ, Permission.WRITE})
ALICE = Principal("user:alice", PrincipalKind.USER, "acme", "alice", RW)
ALICE_SCOPE = Scope("acme", user_id="alice")
SHARED = Scope("acme", project_id="handbook")


def check(request: object, principal: Principal = ALICE) -> PolicyCheck:
    return PolicyCheck(request.operation, principal, request, "op_1", 0.0)  # type: ignore[attr-defined,arg-type]


class Named:
    def __init__(self, name: str, verdict: PolicyVerdict | Exception | object,
                 seen: list[str] | None = None) -> None:
        self.name = name
        self.revision = "1"
        self._verdict = verdict
        self._seen = seen

    async def evaluate(self, c: PolicyCheck) -> PolicyVerdict:
        if self._seen is not None:
            assert isinstance(c.request, AddRequest)
            self._seen.append(c.request.content)
        if isinstance(self._verdict, Exception):
            raise self._verdict
        return self._verdict  # type: ignore[return-value]


@pytest.mark.parametrize(
    ("principal", "request_", "expected"),
    [
        (ALICE, AddRequest(scope=ALICE_SCOPE, content="x"), None),
        (ALICE, GetRequest(scope=Scope("globex", user_id="alice"), record_id="01ABC"),
         "tenant mismatch"),
        (ALICE, GetRequest(scope=Scope("acme", user_id="bob"), record_id="01ABC"),
         "scope belongs to another user"),
        (ALICE, GetRequest(scope=SHARED, record_id="01ABC"), None),
        (ALICE, AddRequest(scope=SHARED, content="x"), "writing a shared scope takes memory:admin"),
        (attrs.evolve(ALICE, permissions=frozenset({Permission.READ})),
         AddRequest(scope=ALICE_SCOPE, content="x"), "principal lacks memory:write"),
        (ALICE, DeleteAllRequest(scope=ALICE_SCOPE), "principal lacks memory:admin"),
        (attrs.evolve(ALICE, permissions=frozenset({Permission.ADMIN})),
         AddRequest(scope=SHARED, content="x"), None),
        (Principal("svc", PrincipalKind.SERVICE, "acme", permissions=RW),
         AddRequest(scope=Scope("acme", user_id="anyone"), content="x"), None),
        (Principal("svc", PrincipalKind.SERVICE, "acme", permissions=frozenset(Permission)),
         DeleteUserRequest(tenant_id="globex", user_id="bob"), "tenant mismatch"),
        (Principal("agent", PrincipalKind.AGENT, "acme", "alice", RW),
         GetRequest(scope=Scope("acme", user_id="bob"),
                    record_id="01ABC"), "scope belongs to another user"),
        (ALICE, SearchRequest(scopes=(ALICE_SCOPE, Scope("acme", user_id="bob")), query="q"),
         "scope belongs to another user"),
    ],
)
def test_scope_rule_matrix(principal: Principal, request_: object, expected: str | None) -> None:
    assert authorize_scope(principal, request_) == expected  # type: ignore[arg-type]


async def test_scope_rule_runs_first_and_policies_are_not_consulted_on_denial() -> None:
    seen: list[str] = []
    engine = PolicyEngine([Named("p", PolicyVerdict.allow(), seen)])
    decision = await engine.decide(check(AddRequest(scope=Scope("globex"), content="x")))
    assert decision.effect is Effect.DENY
    assert decision.outcomes[0].policy == SCOPE_RULE_NAME
    assert seen == []


async def test_deny_wins_over_review_and_allow() -> None:
    engine = PolicyEngine([Named("a", PolicyVerdict.allow()), Named("r", PolicyVerdict.review("x")),
                           Named("d", PolicyVerdict.deny("no"))])
    decision = await engine.decide(check(AddRequest(scope=ALICE_SCOPE, content="x")))
    assert decision.effect is Effect.DENY
    assert decision.denial() is not None and decision.denial().policy == "d"  # type: ignore[union-attr]
    assert "d: no" in decision.reasons()


async def test_review_turns_a_new_record_pending() -> None:
    engine = PolicyEngine([Named("r", PolicyVerdict.review("source needs review"))])
    decision = await engine.decide(check(AddRequest(scope=ALICE_SCOPE, content="x")))
    assert decision.effect is Effect.REVIEW and decision.allowed


async def test_review_of_an_update_fails_closed() -> None:
    engine = PolicyEngine([Named("r", PolicyVerdict.review("x"))])
    decision = await engine.decide(check(UpdateRequest(scope=ALICE_SCOPE, record_id="01ABC",
                                                       content="y")))
    assert decision.effect is Effect.DENY


@pytest.mark.parametrize("broken", [RuntimeError("boom"), None, "allow", Effect.ALLOW])
async def test_a_broken_policy_is_a_deny(broken: object) -> None:
    engine = PolicyEngine([Named("broken", broken)])
    decision = await engine.decide(check(AddRequest(scope=ALICE_SCOPE, content="x")))
    assert decision.effect is Effect.DENY
    assert decision.denial().policy == "broken"  # type: ignore[union-attr]


async def test_transforms_apply_in_order() -> None:
    seen: list[str] = []
    first = AddRequest(scope=ALICE_SCOPE, content="redacted once")
    second = AddRequest(scope=ALICE_SCOPE, content="redacted twice")
    engine = PolicyEngine([
        Named("one", PolicyVerdict.transform(first, "r1"), seen),
        Named("two", PolicyVerdict.transform(second, "r2"), seen),
        Named("three", PolicyVerdict.allow(), seen),
    ])
    decision = await engine.decide(check(AddRequest(scope=ALICE_SCOPE, content="original")))
    assert seen == ["original", "redacted once", "redacted twice"]
    assert decision.request == second
    assert [o.transformed for o in decision.outcomes[1:]] == [True, True, False]


async def test_a_transform_may_not_move_the_request_to_another_scope() -> None:
    moved = AddRequest(scope=Scope("acme", user_id="bob"), content="x")
    engine = PolicyEngine([Named("mover", PolicyVerdict.transform(moved, "sneaky"))])
    decision = await engine.decide(check(AddRequest(scope=ALICE_SCOPE, content="x")))
    assert decision.effect is Effect.DENY
    assert decision.request.target_scopes() == (ALICE_SCOPE,)


async def test_policy_revision_changes_with_the_policy_set() -> None:
    a = PolicyEngine([Named("a", PolicyVerdict.allow())])
    b = PolicyEngine([Named("b", PolicyVerdict.allow())])
    assert a.revision != b.revision != PolicyEngine().revision
    assert a.revision == PolicyEngine([Named("a", PolicyVerdict.allow())]).revision


def test_duplicate_policy_names_are_refused() -> None:
    with pytest.raises(ValueError):
        PolicyEngine([Named("a", PolicyVerdict.allow()), Named("a", PolicyVerdict.allow())])


def test_add_status_is_pending_for_review_decisions() -> None:
    # The manager maps REVIEW to a pending_review record; the request type allows it.
    request = attrs.evolve(AddRequest(scope=ALICE_SCOPE, content="x"),
                           status=RecordStatus.PENDING_REVIEW)
    request.validate()
    assert Operation.ADD is request.operation
