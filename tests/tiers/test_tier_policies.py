"""The built-in policies on tier operations: the secret guard reads turns and working
state, a write it cannot inspect is refused (fail closed), permissions and read-only
profiles apply, and a policy that raises denies."""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
import pytest
from actors import ALICE
from governed_memory import GovernedMemoryManager, MemoryPolicyDeniedError, Scope
from governed_memory.clock import ManualClock
from governed_memory.events import InMemoryEventSink
from governed_memory.operations import Operation
from governed_memory.policy import Effect, PolicyCheck, PolicyVerdict
from governed_memory.profiles.spec import PiiKind, ScopeSection, SecretGuardMode, WriteSection
from governed_memory.tiers import InMemoryTurnStore, InMemoryWorkingStateStore, MemoryTiers
from governed_memory.tiers.requests import AppendTurnRequest, UpdateWorkingStateRequest
from governed_memory.tiers.turns import ToolCall, TurnDraft
from governed_memory_native import build_native_provider
from governed_memory_policies.pii_redaction import PiiRedactionPolicy
from governed_memory_policies.secret_guard import SecretGuardPolicy
from governed_memory_policies.write_rules import WriteRules, WriteRulesPolicy

OWNER = Scope("acme", user_id="alice", session_id="s1", run_id="r1")
SECRET = "AKIA" + "Q7X2M4N8P1R5T3V9"


def tiers_with(*policies: Any, sink: InMemoryEventSink | None = None) -> MemoryTiers:
    clock = ManualClock()
    manager = GovernedMemoryManager(build_native_provider({"backend": "memory"}, clock),
                                    policies=policies, clock=clock,
                                    sinks=[sink] if sink else [])
    return MemoryTiers(long_term=manager, turns=InMemoryTurnStore(),
                       working=InMemoryWorkingStateStore())


@pytest.mark.parametrize("draft", [
    TurnDraft.user(f"my key is {SECRET}"),
    TurnDraft.assistant("", tool_calls=(ToolCall("c1", "deploy", f'{{"key": "{SECRET}"}}'),)),
    TurnDraft.user("hi", metadata={"note": SECRET}),
])
async def test_the_secret_guard_rejects_a_turn_carrying_a_credential(draft: TurnDraft) -> None:
    sink = InMemoryEventSink()
    memory = tiers_with(SecretGuardPolicy(SecretGuardMode.REJECT), sink=sink)
    with pytest.raises(MemoryPolicyDeniedError) as caught:
        await memory.append(ALICE, OWNER, draft)
    assert "aws_access_key_id" in str(caught.value) and SECRET not in str(caught.value)
    assert await memory.recent(ALICE, OWNER) == ()
    assert all(SECRET not in e.to_json() for e in sink.events)


async def test_the_secret_guard_redacts_a_turn_in_redact_mode() -> None:
    memory = tiers_with(SecretGuardPolicy(SecretGuardMode.REDACT))
    turn = await memory.append(ALICE, OWNER, TurnDraft.user(f"my key is {SECRET}"))
    assert SECRET not in turn.content and "[REDACTED:aws_access_key_id]" in turn.content
    assert (await memory.recent(ALICE, OWNER))[0].content == turn.content


async def test_the_secret_guard_reads_working_state() -> None:
    memory = tiers_with(SecretGuardPolicy(SecretGuardMode.REDACT))
    state = await memory.update(ALICE, OWNER, {"env": [f"AWS={SECRET}"]})
    assert SECRET not in str(dict(state.state))
    with pytest.raises(MemoryPolicyDeniedError, match="state key"):
        await memory.update(ALICE, OWNER, {SECRET: 1})  # keys are refused, never renamed
    assert await memory.scratch(ALICE, OWNER) == dict(state.state)


async def test_pii_redaction_applies_to_turns() -> None:
    memory = tiers_with(PiiRedactionPolicy(True, (PiiKind.EMAIL,)))
    turn = await memory.append(ALICE, OWNER, TurnDraft.user("mail me at a.b@example.com"))
    assert "example.com" not in turn.content


@attrs.frozen
class _UnknownWrite:
    operation: ClassVar[Operation] = Operation.APPEND_TURN
    scope: Scope


def check(request: Any, principal: Any) -> PolicyCheck:
    return PolicyCheck(request.operation, principal, request, "op_01TEST", 1000.0)


async def test_the_guards_refuse_a_write_they_cannot_inspect() -> None:
    request: Any = _UnknownWrite(OWNER)
    for policy in (SecretGuardPolicy(SecretGuardMode.REJECT),
                   PiiRedactionPolicy(True, (PiiKind.EMAIL,))):
        verdict = await policy.evaluate(check(request, ALICE))
        assert verdict.effect is Effect.DENY and "cannot inspect" in verdict.reason
    # Known tier writes without text pass.
    verdict = await SecretGuardPolicy(SecretGuardMode.REJECT).evaluate(
        check(UpdateWorkingStateRequest(scope=OWNER, changes={"n": 1}, ttl_s=10.0), ALICE))
    assert verdict.effect is Effect.ALLOW


async def test_a_read_only_profile_refuses_tier_writes() -> None:
    rules = WriteRulesPolicy(WriteRules(WriteSection(read_only=True), ScopeSection()))
    memory = tiers_with(rules)
    with pytest.raises(MemoryPolicyDeniedError, match="read-only"):
        await memory.append(ALICE, OWNER, TurnDraft.user("x"))
    with pytest.raises(MemoryPolicyDeniedError, match="read-only"):
        await memory.update(ALICE, OWNER, {"a": 1})
    assert await memory.recent(ALICE, OWNER) == ()  # reads still work


async def test_required_idempotency_means_named_turns() -> None:
    rules = WriteRulesPolicy(WriteRules(WriteSection(require_idempotency_key=True),
                                        ScopeSection()))
    memory = tiers_with(rules)
    with pytest.raises(MemoryPolicyDeniedError, match="turn_id"):
        await memory.append(ALICE, OWNER, TurnDraft.user("x"))
    await memory.append(ALICE, OWNER, TurnDraft.user("x", turn_id="t1"))


class _Exploding:
    name = "exploding"
    revision = "1"

    async def evaluate(self, check: PolicyCheck) -> PolicyVerdict:
        if isinstance(check.request, AppendTurnRequest):
            raise RuntimeError("boom")
        return PolicyVerdict.allow()


async def test_a_policy_that_raises_on_a_tier_operation_denies() -> None:
    memory = tiers_with(_Exploding())
    with pytest.raises(MemoryPolicyDeniedError, match="policy failed"):
        await memory.append(ALICE, OWNER, TurnDraft.user("x"))
    assert await memory.recent(ALICE, OWNER) == ()


async def test_write_rates_count_turns_and_working_state() -> None:
    from governed_memory.profiles.spec import QuotaSection
    from governed_memory_policies.quotas import QuotaPolicy

    memory = tiers_with(QuotaPolicy(QuotaSection(writes_per_minute_per_scope=3)))
    for i in range(3):
        await memory.append(ALICE, OWNER, TurnDraft.user(f"m{i}"))
    with pytest.raises(MemoryPolicyDeniedError, match="write rate"):
        await memory.append(ALICE, OWNER, TurnDraft.user("one too many"))
    assert len(await memory.recent(ALICE, OWNER)) == 3
    # The run's working state is another scope with its own window.
    for i in range(3):
        await memory.update(ALICE, OWNER, {"i": i})
    with pytest.raises(MemoryPolicyDeniedError, match="write rate"):
        await memory.update(ALICE, OWNER, {"i": 9})
