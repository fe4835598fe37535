"""``rego``: an OPA Rego module and its data document as a policy plugin. The same
contract as Cedar's: refused at load with the file and line, deny-beats-review-beats-
allow, reasons from the module, fail closed, and a revision that pins the module."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from policy_as_code_support import (
    ALICE_ADMIN,
    BILLING,
    HELPDESK,
    OTHER_BOT,
    REGO_EXAMPLE,
    SUPPORT_BOT,
    add,
    example_text,
    require,
    verdict,
)

require("regopy", "rego")

from actors import ADMIN, ALICE_SCOPE  # noqa: E402
from governed_memory.errors import MemoryConfigurationError  # noqa: E402
from governed_memory.policy import Effect, PolicyEngine  # noqa: E402
from governed_memory.records import MemoryType, Provenance  # noqa: E402
from governed_memory.requests import (  # noqa: E402
    DeleteRequest,
    DeleteUserRequest,
    GetRequest,
    SearchRequest,
    UpdateRequest,
)
from governed_memory.scope import Scope  # noqa: E402
from governed_memory_policies import rego_policy  # noqa: E402
from governed_memory_policies.policy_as_code import PolicySourceError  # noqa: E402
from policy_support import profile  # noqa: E402

PROFILE = profile()
HEADER = "package test.memory\n\nimport rego.v1\n\n"
ALLOW_ALL = HEADER + "default allow := true\n"


def build(config: dict[str, Any]) -> rego_policy.RegoPolicy:
    return rego_policy.build(config, PROFILE)


def inline(module: str, **extra: Any) -> rego_policy.RegoPolicy:
    return build({"module": module, **extra})


# -- the example module for compliance-strict, rule by rule --------------------------------


@pytest.fixture(scope="module")
def example() -> rego_policy.RegoPolicy:
    return build(REGO_EXAMPLE)


async def test_support_agents_never_write_preferences_of_another_project(
        example: rego_policy.RegoPolicy) -> None:
    rule = "support-agents-never-write-foreign-preferences"
    preference = {"memory_type": MemoryType.PREFERENCE}
    assert await verdict(example, add(BILLING, **preference), SUPPORT_BOT) == (Effect.DENY, rule)
    assert (await verdict(example, add(HELPDESK, **preference), SUPPORT_BOT))[0] is Effect.ALLOW
    assert (await verdict(example, add(BILLING, memory_type=MemoryType.FACT), SUPPORT_BOT)
            )[0] is Effect.ALLOW
    assert (await verdict(example, add(BILLING, **preference), OTHER_BOT))[0] is Effect.ALLOW
    assert await verdict(example, UpdateRequest(scope=BILLING, record_id="01R", content="x"),
                         SUPPORT_BOT) == (Effect.DENY, rule)
    assert await verdict(example, DeleteRequest(scope=BILLING, record_id="01R"),
                         SUPPORT_BOT) == (Effect.DENY, rule)
    retyped = UpdateRequest(scope=BILLING, record_id="01R", memory_type=MemoryType.FACT)
    assert (await verdict(example, retyped, SUPPORT_BOT))[0] is Effect.ALLOW
    for read in (GetRequest(scope=BILLING, record_id="01R"),
                 SearchRequest(scopes=(BILLING,), query="tea")):
        assert (await verdict(example, read, SUPPORT_BOT))[0] is Effect.ALLOW


async def test_web_sourced_memories_always_need_review(example: rego_policy.RegoPolicy) -> None:
    web = add(provenance=Provenance(source_type="web", source_id="https://example.test"))
    assert await verdict(example, web) == (Effect.REVIEW, "web-sourced-memories-need-review")
    for source in ("user", None):
        assert (await verdict(example, add(provenance=Provenance(source_type=source)))
                )[0] is Effect.ALLOW


async def test_a_deny_beats_a_review(example: rego_policy.RegoPolicy) -> None:
    both = add(BILLING, memory_type=MemoryType.PREFERENCE,
               provenance=Provenance(source_type="web"))
    assert await verdict(example, both, SUPPORT_BOT) == (
        Effect.DENY, "support-agents-never-write-foreign-preferences")


async def test_restricted_memories_need_an_administrator(
        example: rego_policy.RegoPolicy) -> None:
    restricted = add(metadata={"sensitivity": "restricted"})
    assert await verdict(example, restricted) == (Effect.DENY, "restricted-memories-need-admin")
    assert (await verdict(example, restricted, ALICE_ADMIN))[0] is Effect.ALLOW
    assert (await verdict(example, add(metadata={"sensitivity": "internal"})))[0] is Effect.ALLOW


# -- decisions -------------------------------------------------------------------------------


async def test_without_allow_nothing_runs() -> None:
    policy = inline(HEADER + 'allow if input.action == "get"\n')
    assert await verdict(policy, add()) == (Effect.DENY, "no Rego rule allows add")
    assert await verdict(policy, GetRequest(scope=ALICE_SCOPE, record_id="01R")) == (
        Effect.ALLOW, "")


async def test_review_needs_allow_and_messages_are_sorted() -> None:
    policy = inline(HEADER + 'allow if input.action_kind == "write"\n'
                    'review contains "b-second"\nreview contains "a-first"\n')
    assert await verdict(policy, add()) == (Effect.REVIEW, "a-first; b-second")
    assert await verdict(policy, GetRequest(scope=ALICE_SCOPE, record_id="01R")) == (
        Effect.DENY, "no Rego rule allows get")


async def test_every_scope_of_an_operation_must_be_allowed() -> None:
    policy = inline(ALLOW_ALL + 'deny contains "no-shared" if not input.resource.user_id\n')
    shared = Scope("acme", project_id="p")
    assert (await verdict(policy, SearchRequest(scopes=(ALICE_SCOPE,), query="q"), ADMIN)
            )[0] is Effect.ALLOW
    assert await verdict(policy, SearchRequest(scopes=(ALICE_SCOPE, shared), query="q"),
                         ADMIN) == (Effect.DENY, "no-shared")


async def test_the_input_carries_principal_resource_and_context() -> None:
    policy = rego_policy.build({"module": ALLOW_ALL + """
deny contains sprintf("%s in %s/%s by %s (%s) for %s", [input.action, input.resource.tenant_id,
    input.resource.user_id, input.principal.principal_id, input.principal.kind,
    input.context.profile_id]) if input.action == "delete_user"
"""}, profile(id="erasure"))
    assert await verdict(policy, DeleteUserRequest(tenant_id="acme", user_id="alice"), ADMIN) == (
        Effect.DENY, "delete_user in acme/alice by svc:admin (service) for erasure")


async def test_an_evaluation_error_denies() -> None:
    # Two values for one complete rule are an error in Rego; here only for key "boom".
    policy = inline(ALLOW_ALL + 'level := 1 if input.resource.key == "boom"\n'
                    'level := 2 if input.resource.key == "boom"\n'
                    'deny contains "high" if level > 1\n')
    assert await verdict(policy, add(key="boom")) == (
        Effect.DENY, "Rego evaluation failed (a rule conflict or a built-in function error)")
    assert (await verdict(policy, add(key="fine")))[0] is Effect.ALLOW


async def test_a_malformed_decision_denies() -> None:
    policy = inline(ALLOW_ALL + 'deny if input.resource.key == "boom"\n')
    assert await verdict(policy, add(key="boom")) == (
        Effect.DENY, "Rego decision malformed: deny must be a set of messages")
    assert (await verdict(policy, add()))[0] is Effect.ALLOW


async def test_a_failing_engine_denies(monkeypatch: pytest.MonkeyPatch) -> None:
    policy = inline(ALLOW_ALL + "# failing\n")

    def broken(*args: Any) -> Any:
        raise RuntimeError("engine down")

    monkeypatch.setattr(policy, "_inputs", broken)
    assert await verdict(policy, add()) == (Effect.DENY, "Rego evaluation failed: engine down")


async def test_a_repeated_decision_is_remembered_unless_the_module_asks_the_clock() -> None:
    policy = inline(ALLOW_ALL + "# remembered\n")
    for _ in range(3):
        await verdict(policy, add())
    assert policy.remembers
    assert policy._decisions.cache_info().hits == 2
    clocked = inline(ALLOW_ALL + 'deny contains "late" if time.now_ns() < 0\n')
    assert not clocked.remembers
    for _ in range(3):
        assert (await verdict(clocked, add()))[0] is Effect.ALLOW
    assert clocked._inputs.cache_info().hits == 2  # its input is still built once


# -- the revision ----------------------------------------------------------------------------


def test_the_set_hash_is_in_the_revision_and_changes_with_module_or_data() -> None:
    policy = build(REGO_EXAMPLE)
    assert policy.revision == f"1:{policy.set_hash}"
    module = example_text("compliance-strict.rego")
    data = example_text("compliance-strict.data.json")
    assert build({"module": module, "data": data}).set_hash == policy.set_hash
    # The data document counts by value: re-indenting it is the same set.
    assert build({"module": module, "data": data.replace("\n", " ")}).set_hash == policy.set_hash
    changed = build({"module": module.replace('"restricted"', '"secret"'), "data": data})
    other_team = build({"module": module, "data": data.replace("helpdesk", "desk")})
    assert len({policy.set_hash, changed.set_hash, other_team.set_hash}) == 3
    assert PolicyEngine([policy]).revision != PolicyEngine([changed]).revision


# -- refused when the profile loads ----------------------------------------------------------


def refused(config: dict[str, Any], match: str) -> MemoryConfigurationError:
    with pytest.raises(MemoryConfigurationError, match=match) as info:
        build(config)
    return info.value


def test_a_syntax_error_names_its_line(capfd: pytest.CaptureFixture[str]) -> None:
    error = refused({"module": HEADER + "allow if {\n  input.a ==\n}\n"},
                    r"<inline module>:6: does not compile: Invalid boolean operator")
    assert isinstance(error, PolicySourceError) and error.line == 6
    assert capfd.readouterr().out == ""  # rego-cpp prints nothing of its own


@pytest.mark.parametrize(("config", "match"), [
    ({}, r"needs module \(the document inline\) or module_file"),
    ({"module": ALLOW_ALL, "modules": "x"}, "unknown key modules for policy 'rego'"),
    ({"module_file": "/nowhere/m.rego"}, "module_file: cannot read '/nowhere/m.rego'"),
    ({"module_file": "m.rego"}, "module_file: 'm.rego' is relative"),
    ({"module": "import rego.v1\n"}, "<inline module>:1: must start with a package"),
    ({"module": "# only a comment\n"}, "<inline module>: is empty"),
    ({"module": "package governed_memory_decision\n"}, "package governed_memory_decision is "
                                                       "reserved"),
    ({"module": ALLOW_ALL, "data": "{\n  \"a\": ,\n}"}, r"<inline data>:2: not valid JSON"),
    ({"module": ALLOW_ALL, "data": "[1, 2]"},
     r"<inline data>: expected an object \(the module's data\), e\.g\. \{\"teams\": .*\}; "
     r"got a JSON array"),
    ({"module": ALLOW_ALL + 'allow := "yes"\n'}, "conflict|fails on a sample"),
    ({"module": HEADER + 'default allow := "yes"\n'},
     "<inline module>: fails on a sample add request: decision malformed: allow must be true "
     "or false"),
    ({"module": HEADER + "default allow := true\n" + "deny := 3\n"},
     "fails on a sample add request: decision malformed: deny must be a set of messages"),
    ({"module": HEADER + "allow if nosuch(input.action)\n"},
     "fails on a sample add request: evaluation failed: Function not found: nosuch"),
])
def test_bad_configuration_is_refused_clearly(config: dict[str, Any], match: str) -> None:
    refused(config, match)


def test_data_is_read_from_a_table_too() -> None:
    policy = inline(ALLOW_ALL + 'deny contains "blocked" if input.principal.principal_id in '
                    "data.blocked\n", data={"blocked": ["user:alice"]})
    assert policy.compiled.package == "test.memory"


def test_a_file_on_disk_is_read_and_errors_name_it(tmp_path: Path) -> None:
    path = tmp_path / "rules.rego"
    path.write_text(HEADER + "allow if {\n")
    with pytest.raises(PolicySourceError, match=rf"{path}:5: does not compile"):
        build({"module_file": str(path)})
    path.write_text(ALLOW_ALL)
    assert build({"module_file": str(path)}).compiled.package == "test.memory"


def test_without_regopy_the_profile_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "regopy", None)
    with pytest.raises(MemoryConfigurationError,
                       match=r"policy 'rego' needs the regopy package \(pip install "
                             r"'governed-memory\[rego\]'\)"):
        build({"module": ALLOW_ALL})


# -- refused when a rule could never apply (issue 28) ----------------------------------------

TEAMS = {"teams": {"support": {"agents": ["agent:support-bot"], "project_id": "helpdesk"}}}


@pytest.mark.parametrize(("module", "match"), [
    # A misspelt rule name: the engine reads allow, deny and review only.
    (ALLOW_ALL + 'denny contains "no deletes" if {\n  input.action == "delete"\n}\n',
     r"<inline module>:6: rule denny is never used \(did you mean deny\?\): a decision reads "
     r"only allow, deny and review of package test\.memory"),
    (ALLOW_ALL + 'is_agent if input.principal.kind == "agent"\n',
     r"<inline module>:6: rule is_agent is never used"),
    # An input field no request carries: undefined on every request.
    (ALLOW_ALL + 'deny contains "restricted" if {\n  input.resource.sensitivty == '
                 '"restricted"\n}\n',
     r"<inline module>:7: input\.resource\.sensitivty is never set \(did you mean "
     r"sensitivity\?\): a request's resource carries tenant_id, "),
    (ALLOW_ALL + 'deny contains "x" if input["principal"]["role"] == "agent"\n',
     r":6: input\.principal\.role is never set: a request's principal carries principal_id, "),
    (ALLOW_ALL + 'deny contains "x" if input.actor == "agent"\n',
     r":6: input\.actor is never set \(did you mean action\?\): the input has principal, "
     r"action, action_kind, resource, context"),
    (ALLOW_ALL + 'deny contains "x" if input.action.name == "add"\n',
     r":6: input\.action\.name is never set: input\.action is a string"),
    (HEADER + "import input.resource as res\n\ndefault allow := true\n"
              'deny contains "x" if res.projekt == "p"\n',
     r":8: input\.resource\.projekt is never set \(did you mean project_id\?\)"),
    # A data path the document does not hold: undefined on every request.
    (ALLOW_ALL + 'deny contains "x" if {\n  team := data.teams.suport\n  '
                 "input.principal.principal_id in team.agents\n}\n",
     r":7: data\.teams\.suport is not in the data document \(did you mean support\?\): "
     r"data\.teams holds support"),
    (HEADER + "import data.teams\n\ndefault allow := true\n"
              'deny contains "x" if input.principal.principal_id in teams.support.agentz\n',
     r":8: data\.teams\.support\.agentz is not in the data document \(did you mean agents\?\)"),
    # A rule of the module's own package, read through data, that it does not define.
    (ALLOW_ALL + 'deny contains "x" if data.test.memory.restrictd\n'
                 'restricted if input.resource.sensitivity == "restricted"\n',
     r":6: data\.test\.memory\.restrictd is not defined \(did you mean restricted\?\): "
     r"package test\.memory defines allow, deny, restricted"),
])
def test_a_rule_that_could_never_apply_is_refused(module: str, match: str) -> None:
    refused({"module": module, "data": TEAMS}, match)


def test_every_problem_is_listed() -> None:
    refused({"module": ALLOW_ALL + 'denny contains "x" if input.resource.projekt == "p"\n'},
            r":6: input\.resource\.projekt is never set.*; line 6: rule denny is never used")


def test_modules_whose_rules_can_apply_load() -> None:
    # Helpers used by a decision rule (by name, or through data.<package>), a function, an
    # else chain, strings and comments that look like references, and the example.
    inline(HEADER + """import data.teams

default allow := false

allow := true if {
    input.action_kind == "read"
} else := true if {
    "memory:write" in input.principal.permissions
}

deny contains msg if {
    agent
    input.principal.principal_id in teams.support.agents
    msg := label("input.resource.sensitivty # not a reference")
    data.test.memory.restricted
}

# input.resource.projekt and denny are only mentioned here
agent if input.principal.kind == "agent"

restricted if input.resource.sensitivity == "restricted"

label(text) := concat(": ", ["refused", text])
""", data=TEAMS)
    build(REGO_EXAMPLE)
