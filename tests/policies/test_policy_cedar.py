"""``cedar``: a Cedar policy set as a policy plugin. What is refused when the profile
loads (with the file, line and policy), how permit, forbid, ``@review`` and errors map
onto the engine's verdicts, and what the policy revision pins."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from policy_as_code_support import (
    ALICE_ADMIN,
    BILLING,
    CEDAR_EXAMPLE,
    HELPDESK,
    OTHER_BOT,
    SUPPORT_BOT,
    add,
    example_text,
    only,
    require,
    verdict,
)

require("cedarpy", "cedar")

from actors import ADMIN, ALICE, ALICE_SCOPE  # noqa: E402
from governed_memory.errors import MemoryConfigurationError  # noqa: E402
from governed_memory.policy import Effect, PolicyEngine  # noqa: E402
from governed_memory.records import MemoryType, Provenance  # noqa: E402
from governed_memory.requests import (  # noqa: E402
    AddRequest,
    DeleteRequest,
    GetRequest,
    SearchRequest,
    UpdateRequest,
)
from governed_memory.scope import Scope  # noqa: E402
from governed_memory_policies import cedar_policy  # noqa: E402
from governed_memory_policies.policy_as_code import PolicySourceError  # noqa: E402
from policy_support import check, profile  # noqa: E402

PROFILE = profile()
PERMIT_ALL = '@id("all")\npermit (principal, action, resource);\n'


def build(config: dict[str, Any]) -> cedar_policy.CedarPolicy:
    return cedar_policy.build(config, PROFILE)


def inline(policies: str, **extra: Any) -> cedar_policy.CedarPolicy:
    return build({"policies": policies, **extra})


# -- the example set for compliance-strict, rule by rule -----------------------------------


@pytest.fixture(scope="module")
def example() -> cedar_policy.CedarPolicy:
    return build(CEDAR_EXAMPLE)


async def test_support_agents_never_write_preferences_of_another_project(
        example: cedar_policy.CedarPolicy) -> None:
    rule = "forbidden by support-agents-never-write-foreign-preferences"
    preference = {"memory_type": MemoryType.PREFERENCE}
    assert await verdict(example, add(BILLING, **preference), SUPPORT_BOT) == (Effect.DENY, rule)
    # Their own project's preferences, other types anywhere, and anyone else: allowed.
    assert (await verdict(example, add(HELPDESK, **preference), SUPPORT_BOT))[0] is Effect.ALLOW
    assert (await verdict(example, add(BILLING, memory_type=MemoryType.FACT), SUPPORT_BOT)
            )[0] is Effect.ALLOW
    assert (await verdict(example, add(BILLING, **preference), OTHER_BOT))[0] is Effect.ALLOW
    # An update or delete does not say the stored type: refused outside their project...
    update = UpdateRequest(scope=BILLING, record_id="01R", content="x")
    assert await verdict(example, update, SUPPORT_BOT) == (Effect.DENY, rule)
    assert await verdict(example, DeleteRequest(scope=BILLING, record_id="01R"),
                         SUPPORT_BOT) == (Effect.DENY, rule)
    # ...unless it sets a type that is not a preference.
    retyped = UpdateRequest(scope=BILLING, record_id="01R", memory_type=MemoryType.FACT)
    assert (await verdict(example, retyped, SUPPORT_BOT))[0] is Effect.ALLOW
    # Reading another project is what support agents do.
    for read in (GetRequest(scope=BILLING, record_id="01R"),
                 SearchRequest(scopes=(BILLING,), query="tea")):
        assert await verdict(example, read, SUPPORT_BOT) == (Effect.ALLOW,
                                                             "permitted by baseline")


async def test_web_sourced_memories_always_need_review(
        example: cedar_policy.CedarPolicy) -> None:
    web = add(provenance=Provenance(source_type="web", source_id="https://example.test"))
    assert await verdict(example, web) == (
        Effect.REVIEW, "held for review by web-sourced-memories-need-review "
                       "(web-sourced memories always need review)")
    for source in ("user", None):
        assert (await verdict(example, add(provenance=Provenance(source_type=source)))
                )[0] is Effect.ALLOW


async def test_a_forbid_beats_a_review(example: cedar_policy.CedarPolicy) -> None:
    both = add(BILLING, memory_type=MemoryType.PREFERENCE,
               provenance=Provenance(source_type="web"))
    assert await verdict(example, both, SUPPORT_BOT) == (
        Effect.DENY, "forbidden by support-agents-never-write-foreign-preferences")


async def test_restricted_memories_need_an_administrator(
        example: cedar_policy.CedarPolicy) -> None:
    restricted = add(metadata={"sensitivity": "restricted"})
    assert await verdict(example, restricted) == (Effect.DENY,
                                                  "forbidden by restricted-memories-need-admin")
    assert (await verdict(example, restricted, ALICE_ADMIN))[0] is Effect.ALLOW
    assert (await verdict(example, add(metadata={"sensitivity": "internal"})))[0] is Effect.ALLOW
    # Only a string label is a sensitivity; other metadata values never reach a policy.
    assert (await verdict(example, add(metadata={"sensitivity": 3})))[0] is Effect.ALLOW


# -- decisions -------------------------------------------------------------------------------


async def test_no_permit_denies_and_names_the_action() -> None:
    policy = inline('permit (principal, action == GovernedMemory::Action::"get", resource);')
    assert await verdict(policy, add()) == (Effect.DENY, "no Cedar policy permits add")
    assert await verdict(policy, GetRequest(scope=ALICE_SCOPE, record_id="01R")) == (
        Effect.ALLOW, "permitted by policy0")


async def test_review_needs_a_permit_too() -> None:
    policy = inline('@id("held") @review\nforbid (principal, action, resource);\n'
                    'permit (principal, action == GovernedMemory::Action::"get", resource);')
    assert await verdict(policy, add()) == (Effect.DENY, "no Cedar policy permits add")
    assert await verdict(policy, GetRequest(scope=ALICE_SCOPE, record_id="01R")) == (
        Effect.REVIEW, "held for review by held")


async def test_every_scope_of_an_operation_must_be_allowed() -> None:
    policy = inline(PERMIT_ALL + '@id("no-shared")\nforbid (principal, action, resource) '
                    'unless { resource has user_id };')
    shared = Scope("acme", project_id="p")
    assert await verdict(policy, SearchRequest(scopes=(ALICE_SCOPE,), query="q"), ADMIN) == (
        Effect.ALLOW, "permitted by all")
    assert await verdict(policy, SearchRequest(scopes=(ALICE_SCOPE, shared), query="q"),
                         ADMIN) == (Effect.DENY, "forbidden by no-shared")


async def test_the_principal_and_the_context_reach_the_policy() -> None:
    policy = cedar_policy.build({"policies": PERMIT_ALL + """
        @id("agents-read-only") forbid (principal, action in GovernedMemory::Action::"write",
                                        resource) when { principal.kind == "agent" };
        @id("not-this-profile") forbid (principal, action, resource)
          when { context.profile_id == "frozen" && context.profile_revision like "sha256:*" };
        """}, profile(id="frozen"))
    assert await verdict(policy, GetRequest(scope=ALICE_SCOPE, record_id="01R")) == (
        Effect.DENY, "forbidden by not-this-profile")
    other = inline(PERMIT_ALL + '@id("agents-read-only") forbid (principal, action in '
                   'GovernedMemory::Action::"write", resource) when { principal.kind == '
                   '"agent" };')
    assert await verdict(other, add(), SUPPORT_BOT) == (Effect.DENY,
                                                        "forbidden by agents-read-only")
    assert (await verdict(other, add(), ALICE))[0] is Effect.ALLOW


async def test_an_evaluation_error_denies() -> None:
    # Cedar skips a policy that errors; for a forbid that would fail open.
    # (Validation leaves little that can fail at run time; an overflow can.)
    policy = inline(PERMIT_ALL + '@id("overflow")\nforbid (principal, action, resource) when '
                    '{ resource has key && resource.key == "boom" && '
                    '9223372036854775807 + 1 > 0 };')
    effect, reason = await verdict(policy, add(key="boom"))
    # The reason names the policy by its @id, never Cedar's positional `policy1`.
    assert (effect, reason) == (Effect.DENY, "Cedar evaluation failed: policy overflow: integer "
                                             "overflow while attempting to add the values "
                                             "`9223372036854775807` and `1`")
    assert (await verdict(policy, add(key="fine")))[0] is Effect.ALLOW


async def test_an_evaluation_error_of_a_review_policy_names_its_id() -> None:
    policy = inline(PERMIT_ALL + '@id("held-overflow") @review\nforbid (principal, action, '
                    'resource) when { resource has key && resource.key == "boom" && '
                    '9223372036854775807 + 1 > 0 };')
    effect, reason = await verdict(policy, add(key="boom"))
    assert effect is Effect.DENY
    assert reason.startswith("Cedar evaluation failed: policy held-overflow: integer overflow")
    assert "policy1" not in reason


async def test_a_failing_engine_denies(monkeypatch: pytest.MonkeyPatch) -> None:
    policy = inline(PERMIT_ALL)

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("engine down")

    monkeypatch.setattr(policy, "_authorize", broken)
    assert await verdict(policy, add()) == (Effect.DENY,
                                            "Cedar evaluation failed: engine down")


async def test_a_repeated_decision_is_remembered() -> None:
    policy = inline(PERMIT_ALL + "// remembered\n")
    for _ in range(3):
        await verdict(policy, add())
    await verdict(policy, add(key="another"))
    info = policy._decisions.cache_info()
    assert (info.hits, info.misses) == (2, 2)


def test_no_content_reaches_cedar() -> None:
    from governed_memory_policies.cedar_requests import render
    from governed_memory_policies.policy_as_code import access_requests, principal_attributes

    request = AddRequest(scope=ALICE_SCOPE, content="the secret plan",
                         metadata={"note": "private value", "sensitivity": "internal"},
                         provenance=Provenance(source_type="web",
                                               source_id="https://example.test/x"))
    text, bodies = render(principal_attributes(ALICE),
                          access_requests(check(request, ALICE)), "{}")
    rendered = text + json.dumps(bodies)
    for private in ("secret plan", "private value", "example.test"):
        assert private not in rendered
    assert '"sensitivity": "internal"' in rendered and '"source_type": "web"' in rendered


# -- the revision ----------------------------------------------------------------------------


def test_the_set_hash_is_in_the_revision_and_changes_with_any_document() -> None:
    policy = build(CEDAR_EXAMPLE)
    assert policy.revision == f"1:{policy.set_hash}"
    assert policy.set_hash.startswith("sha256:") and len(policy.set_hash) == 7 + 64
    text = example_text("compliance-strict.cedar")
    schema = example_text("compliance-strict.cedarschema")
    entities = example_text("compliance-strict.entities.json")
    same = build({"policies": text, "schema": schema, "entities": entities})
    assert same.set_hash == policy.set_hash  # the documents, not where they came from
    changed = build({"policies": text.replace('"restricted"', '"secret"'), "schema": schema,
                     "entities": entities})
    other_team = build({"policies": text, "schema": schema,
                        "entities": entities.replace("helpdesk", "desk")})
    assert len({policy.set_hash, changed.set_hash, other_team.set_hash}) == 3
    engine = PolicyEngine([policy])
    assert PolicyEngine([changed]).revision != engine.revision


def test_a_set_is_compiled_once() -> None:
    first, second = inline(PERMIT_ALL + "// once\n"), inline(PERMIT_ALL + "// once\n")
    assert first.compiled is second.compiled


# -- refused when the profile loads ----------------------------------------------------------


def refused(config: dict[str, Any], match: str) -> PolicySourceError | MemoryConfigurationError:
    with pytest.raises(MemoryConfigurationError, match=match) as info:
        build(config)
    return info.value


def test_a_malformed_policy_names_its_line() -> None:
    error = refused({"policies": PERMIT_ALL + "\n// two\n@id(\"broken\")\npermit (principal, "
                                              "action, resource) when { resource.x == };\n"},
                    r"<inline policies>:5: policy policy1: does not parse: ")
    assert isinstance(error, PolicySourceError) and error.line == 5


def test_a_policy_the_schema_refuses_names_the_policy_and_line() -> None:
    error = refused({"policies": PERMIT_ALL + '\n@id("typo")\nforbid (principal, action, '
                                              'resource) when { resource.projekt == "x" };'},
                    r"<inline policies>:4: policy typo: does not validate against the schema "
                    r"governed_memory_policies/governed-memory.cedarschema: typo \(line 4\): "
                    r".*projekt")
    assert isinstance(error, PolicySourceError) and error.policy == "typo"
    refused({"policies": 'forbid (principal, action, resource) when { principal.kind == 3 };'},
            r"<inline policies>:1: policy policy0: does not validate")
    refused({"policies": 'permit (principal, action == GovernedMemory::Action::"erase", '
                         'resource);'}, r"does not validate.*erase")


@pytest.mark.parametrize(("config", "match"), [
    ({}, "needs policies \\(the document inline\\) or policies_file"),
    ({"policies": PERMIT_ALL, "policies_file": "/x.cedar"}, "give policies or policies_file"),
    ({"policies": PERMIT_ALL, "schemas": "x"}, "unknown key schemas for policy 'cedar'; it "
                                               "reads entities, entities_file, policies"),
    ({"policies": 3}, "policies: expected the document as a string, got int"),
    ({"policies_file": "rules.cedar"}, "policies_file: 'rules.cedar' is relative; give an "
                                       "absolute path, or resource_package"),
    ({"policies_file": "/nowhere/rules.cedar"},
     "policies_file: cannot read '/nowhere/rules.cedar': FileNotFoundError"),
    ({"policies_file": "policies/nope.cedar", "resource_package": "governed_memory_profiles"},
     "cannot read 'policies/nope.cedar' in package 'governed_memory_profiles': "
     "FileNotFoundError"),
    ({"policies_file": "../x.cedar", "resource_package": "governed_memory_profiles"},
     "must be relative to package 'governed_memory_profiles', inside it"),
    ({"policies_file": "x.cedar", "resource_package": "no_such_package_here"},
     "resource_package: no package named 'no_such_package_here' is installed"),
    ({"policies": ""}, "holds no policy"),
    ({"policies": "permit (principal == ?principal, action, resource);"}, "is a template"),
    ({"policies": '@review\npermit (principal, action, resource);'},
     ":1: policy policy0: @review marks a forbid policy"),
    ({"policies": '@id("a") permit (principal, action, resource);\n'
                  '@id("a") forbid (principal, action, resource);'},
     ":2: policy a: @id 'a' is used twice"),
    ({"policies": PERMIT_ALL, "schema": "namespace GovernedMemory { entity"},
     "<inline schema>: the schema does not parse"),
    ({"policies": PERMIT_ALL, "entities": "[{"}, "<inline entities>:1: not valid JSON"),
    ({"policies": PERMIT_ALL, "entities": {"a": 1}},
     r'<inline entities>: expected an array of entities, e\.g\. \[\{"uid": \{"type": '
     r'"GovernedMemory::Team", "id": "support"\}, "attrs": .*\]; got a JSON object'),
    ({"policies": PERMIT_ALL, "entities": ["GovernedMemory::Team::support"]},
     r'<inline entities>: entity 0 is a JSON string, not an object; an entity is an object '
     r'like \{"uid": \{"type": "GovernedMemory::Team", "id": "support"\}, "attrs": '),
    ({"policies": PERMIT_ALL, "entities": [{"uid": {"type": "GovernedMemory::Team",
                                                    "id": "x"}, "attrs": {}}]},
     "entity 0 has no parents; an entity is an object like"),
    ({"policies": PERMIT_ALL, "entities": [{"uid": 'GovernedMemory::Team::"x"', "attrs": {},
                                            "parents": []}]},
     r'entity 0 has a uid that is not \{"type": "<Namespace::Type>", "id": "<id>"\}'),
    ({"policies": PERMIT_ALL, "entities": [{"uid": {"type": "GovernedMemory::Team",
                                                    "id": "x"}, "attrs": [], "parents": []}]},
     "entity 0 has attrs that are a JSON array, not an object"),
    ({"policies": PERMIT_ALL, "entities": [{"uid": {"type": "GovernedMemory::Team",
                                                    "id": "x"}, "attrs": {}, "parents": ["y"]}]},
     r'entity 0 has a parent that is not a uid \{"type": "<Namespace::Type>", "id": "<id>"\}'),
    ({"policies": PERMIT_ALL, "entities": [{"uid": {"type": "GovernedMemory::Principal",
                                                    "id": "x"}, "attrs": {}, "parents": []}]},
     "entity 0 is a GovernedMemory::Principal: those are built from each operation"),
    ({"policies": PERMIT_ALL, "entities": [{"uid": {"type": "GovernedMemory::Team",
                                                    "id": "x"}, "attrs": {}, "parents": []}]},
     r'<inline entities>: the entities do not fit the schema: entity 0 '
     r'\(GovernedMemory::Team::"x"\): the schema declares no entity type GovernedMemory::Team'),
])
def test_bad_configuration_is_refused_clearly(config: dict[str, Any], match: str) -> None:
    refused(config, match)


def test_entities_the_schema_refuses_are_named_with_the_attribute_or_parent() -> None:
    schema = example_text("compliance-strict.cedarschema")
    team = {"uid": {"type": "GovernedMemory::Team", "id": "ops"},
            "attrs": {"agents": [], "project_id": "p"}, "parents": []}
    refused({"policies": PERMIT_ALL, "schema": schema,
             "entities": [team, {**team, "attrs": {**team["attrs"], "budget": 3}}]},
            r'the entities do not fit the schema: entity 1 \(GovernedMemory::Team::"ops"\): '
            r"attribute budget is not declared for GovernedMemory::Team, or has another type")
    refused({"policies": PERMIT_ALL, "schema": schema,
             "entities": [{**team, "parents": [{"type": "GovernedMemory::Team", "id": "x"}]}]},
            r"entity 0 \(GovernedMemory::Team::\"ops\"\): a parent is of a type the schema "
            r"does not let GovernedMemory::Team be in")


def test_a_schema_that_misses_an_action_is_refused() -> None:
    schema = cedar_policy.reference_schema().replace('"purge_snapshots"', '"purge_snapshot"')
    refused({"policies": PERMIT_ALL, "schema": schema},
            r"<inline schema>: the schema does not describe the request of purge_snapshots")


def test_a_schema_that_misses_an_attribute_is_refused() -> None:
    schema = cedar_policy.reference_schema().replace("    sensitivity?: String,", "")
    refused({"policies": PERMIT_ALL, "schema": schema},
            r"<inline schema>: the schema does not describe the requests this policy sends: "
            r"GovernedMemory::Memory has no attribute sensitivity of the type sent")
    required = cedar_policy.reference_schema().replace("project_id?: String",
                                                       "project_id: String")
    refused({"policies": PERMIT_ALL, "schema": required},
            r"sends: GovernedMemory::Memory requires project_id, which a request may leave out")
    principal = cedar_policy.reference_schema().replace("user_id?: String", "user_id?: Long", 1)
    refused({"policies": PERMIT_ALL, "schema": principal},
            r"sends: GovernedMemory::Principal has no attribute user_id of the type sent")
    typed = cedar_policy.reference_schema().replace("permissions: Set<String>",
                                                    "permissions: Set<Long>")
    refused({"policies": PERMIT_ALL, "schema": typed},
            r"sends: GovernedMemory::Principal does not fit \(an attribute of another type")


def test_a_policy_naming_a_missing_entity_is_refused() -> None:
    schema = example_text("compliance-strict.cedarschema")
    refused({"policies": example_text("compliance-strict.cedar"), "schema": schema},
            r"<inline policies>:\d+: policy support-agents-never-write-foreign-preferences: "
            r"fails on a sample \w+ request: .*GovernedMemory::Team::\"support\"")


def test_a_file_on_disk_is_read_and_errors_name_it(tmp_path: Path) -> None:
    path = tmp_path / "rules.cedar"
    path.write_text(PERMIT_ALL + "forbid (principal, action, resource) when { 1 + };\n")
    with pytest.raises(PolicySourceError, match=rf"{path}:3: policy policy1: does not parse"):
        build({"policies_file": str(path)})
    path.write_text(PERMIT_ALL)
    assert build({"policies_file": str(path)}).compiled.names == {"policy0": "all"}


def test_without_cedarpy_the_profile_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cedarpy", None)
    with pytest.raises(MemoryConfigurationError,
                       match=r"policy 'cedar' needs the cedarpy package \(pip install "
                             r"'governed-memory\[cedar\]'\)"):
        build({"policies": PERMIT_ALL})


def test_the_reference_schema_declares_every_operation() -> None:
    from governed_memory.operations import Operation

    schema = cedar_policy.reference_schema()
    for operation in Operation:
        assert f'"{operation.value}"' in schema
    assert only("cedar", {"policies": PERMIT_ALL}).policies.enabled == ("cedar",)


# -- refused when a policy could never apply (issue 28) --------------------------------------

TEAM_SCHEMA = example_text("compliance-strict.cedarschema")
TEAM_ENTITIES = example_text("compliance-strict.entities.json")


def never_applies(policies: str, match: str, **extra: Any) -> PolicySourceError:
    error = refused({"policies": policies, **extra}, match)
    assert isinstance(error, PolicySourceError)
    return error


def test_a_misspelt_attribute_under_has_is_refused_with_id_file_and_line() -> None:
    # The policy: it validated, loaded, and never denied.
    error = never_applies(
        PERMIT_ALL + '\n@id("restricted-memories-need-admin")\n'
        'forbid (principal, action in GovernedMemory::Action::"write", resource)\nwhen {\n'
        '  resource has sensitivty && resource.sensitivty == "restricted" &&\n'
        '  !principal.permissions.contains("memory:admin")\n};\n',
        r"^<inline policies>:7: policy restricted-memories-need-admin: `resource has "
        r"sensitivty` is always false: a request's resource has no attribute sensitivty "
        r"\(did you mean sensitivity\?\); it carries tenant_id, ")
    assert (error.line, error.policy) == (7, "restricted-memories-need-admin")
    assert "resource.sensitivty" not in str(error)  # one message for one mistake


async def test_the_corrected_policy_loads_and_denies() -> None:
    policy = inline(PERMIT_ALL + '@id("restricted")\nforbid (principal, action in '
                    'GovernedMemory::Action::"write", resource) when { resource has sensitivity '
                    '&& resource.sensitivity == "restricted" };')
    assert await verdict(policy, add(metadata={"sensitivity": "restricted"})) == (
        Effect.DENY, "forbidden by restricted")


@pytest.mark.parametrize(("condition", "named"), [
    ("unless { principal has permisions }", "`principal has permisions` is always false"),
    ('when { context has profile_idd && context.profile_idd == "x" }',
     "`context has profile_idd` is always false: a request's context has no attribute "
     "profile_idd \\(did you mean profile_id\\?\\); it carries profile_id, profile_version, "
     "profile_revision"),
    # nested, inside ||, if-then-else, negation, a set and a record
    ('when { principal.kind == "agent" && (resource has key || (resource has tenant_id && '
     '!(principal has usr_id))) }', "`principal has usr_id`"),
    ('when { if resource has memorytype then true else false }', "`resource has memorytype`"),
    ('when { [resource has projekt_id].contains(true) }', "`resource has projekt_id`"),
    ('when { {"a": resource has scope }.a }', "`resource has scope`"),
    # a has-chain: `has a.b` is `has a && a has b`
    ('when { context has profile.id }', "`context has profile`"),
])
def test_an_attribute_a_request_never_carries_is_refused_anywhere(condition: str,
                                                                    named: str) -> None:
    never_applies(PERMIT_ALL + f'@id("typo")\nforbid (principal, action, resource) {condition};',
                  rf"<inline policies>:4: policy typo: .*{named}")


def test_an_attribute_the_schema_declares_but_no_request_carries_is_refused() -> None:
    schema = cedar_policy.reference_schema().replace("visibility?: String,",
                                                     "visibility?: String,\n    team?: String,")
    never_applies(PERMIT_ALL + '@id("team")\nforbid (principal, action, resource) when '
                  '{ resource has team && resource.team == "ops" };',
                  r"policy team: `resource has team` is always false: a request's resource "
                  r"has no attribute team;", schema=schema)


def test_a_has_of_an_undeclared_entity_or_record_attribute_is_refused() -> None:
    schema = TEAM_SCHEMA.replace("project_id: String,\n  };",
                                 "project_id: String,\n    info: {lead?: String},\n  };")
    assert schema != TEAM_SCHEMA
    entities = json.dumps([{"uid": {"type": "GovernedMemory::Team", "id": "support"},
                            "attrs": {"agents": [], "project_id": "helpdesk", "info": {}},
                            "parents": []}])
    config = {"schema": schema, "entities": entities}
    never_applies(PERMIT_ALL + '@id("agents")\nforbid (principal, action, resource) when '
                  '{ GovernedMemory::Team::"support" has agentz };',
                  r':4: policy agents: `GovernedMemory::Team::"support" has agentz` is always '
                  r"false: the schema declares no attribute agentz there", **config)
    never_applies(PERMIT_ALL + '@id("lead")\nforbid (principal, action, resource)\nwhen {\n'
                  '  GovernedMemory::Team::"support" has info.leed\n};',
                  r':6: policy lead: `GovernedMemory::Team::"support".info has leed` is always '
                  r"false", **config)
    # Declared (optional) attributes load.
    inline(PERMIT_ALL + '@id("lead")\nforbid (principal, action, resource) when '
           '{ GovernedMemory::Team::"support" has info.lead && '
           'GovernedMemory::Team::"support".info.lead == principal.principal_id };', **config)


@pytest.mark.parametrize("conditions", [
    "when { false }",
    "unless { true }",
    "when { true } when { false }",
    'when { resource has key } unless { 1 == 1 || true }',
])
def test_a_policy_the_validator_proves_never_applies_is_refused(conditions: str) -> None:
    never_applies(PERMIT_ALL + f'@id("never")\nforbid (principal, action, resource) '
                               f'{conditions};',
                  r"<inline policies>:3: policy never: can never apply: Cedar's validator "
                  r"proves its conditions are never all true")


def test_membership_a_request_never_has_is_refused() -> None:
    # The schema lets a Principal be in a Team, but a request's principal has no parents.
    schema = TEAM_SCHEMA.replace("entity Principal = {", "entity Principal in [Team] = {")
    assert schema != TEAM_SCHEMA
    config = {"schema": schema, "entities": TEAM_ENTITIES}
    for scope, condition in (('principal in GovernedMemory::Team::"support"', ""),
                             ("principal", 'when { principal in GovernedMemory::Team::"support" }'),
                             ('principal is GovernedMemory::Principal in '
                              'GovernedMemory::Team::"support"', "")):
        never_applies(PERMIT_ALL + f'@id("team")\nforbid ({scope}, action, resource) '
                                   f'{condition};',
                      r'policy team: `principal in GovernedMemory::Team::"support"` never '
                      r"holds: a request's principal is a GovernedMemory::Principal without "
                      r"parents \(membership is not sent\); compare attributes instead", **config)
    # Without the schema's membership Cedar's validator refuses it, or proves it false.
    never_applies(PERMIT_ALL + '@id("team")\nforbid (principal, action, resource) when '
                  '{ principal in GovernedMemory::Team::"support" };',
                  r"policy team: `principal in", schema=TEAM_SCHEMA, entities=TEAM_ENTITIES)


def test_every_problem_is_listed_and_the_first_placed() -> None:
    error = never_applies(
        PERMIT_ALL + '@id("one")\nforbid (principal, action, resource) when { false };\n'
        '// resource has sensitivty (a comment is not where the typo is)\n'
        '@id("two")\nforbid (principal, action, resource)\n'
        '  when { resource has sensitivty };\n',
        r"<inline policies>:3: policy one: can never apply: .*; policy two \(line 8\): "
        r"`resource has sensitivty` is always false")
    assert error.line == 3


def test_policies_that_can_apply_load_unchanged() -> None:
    # What the checks must not refuse: every attribute a request carries, a has on a
    # required one, an entity of the set, a request's own entity type, a dead branch.
    inline(PERMIT_ALL + """
        @id("wide") forbid (principal, action, resource) when {
          (principal has user_id && resource has user_id && principal.user_id != resource.user_id)
          || (principal has principal_id && context has profile_id && resource has scope_hash
              && resource has record_id && resource has key && resource has memory_type
              && resource has source_type && resource has visibility && resource has run_id
              && principal.kind == "nobody")
        };
        @id("self") forbid (principal in GovernedMemory::Principal::"svc:blocked", action,
                            resource in GovernedMemory::Memory::"nowhere");
        """)
    build(CEDAR_EXAMPLE)


def test_the_guide_quotes_the_real_message() -> None:
    from pathlib import Path

    guide = (Path(__file__).resolve().parents[2] / "docs" / "policies-as-code.md").read_text()
    start = guide.index("  broken@1.0.0: policies.extra.cedar: policies/memory.cedar:7:")
    quoted = " ".join(guide[start:guide.index("```", start)].split())
    error = never_applies(
        PERMIT_ALL + '\n@id("restricted-memories-need-admin")\n'
        'forbid (principal, action in GovernedMemory::Action::"write", resource)\nwhen {\n'
        '  resource has sensitivty && resource.sensitivty == "restricted"\n};\n', "sensitivty")
    shown = str(error).replace("<inline policies>", "policies/memory.cedar")
    head, _, tail = quoted.removeprefix("broken@1.0.0: policies.extra.cedar: ").partition("…")
    assert shown.startswith(head) and shown.endswith(tail)


def test_the_validators_error_names_the_id_not_the_position() -> None:
    for access in ('resource.projekt', 'resource["projekt"]'):
        error = refused({"policies": PERMIT_ALL + '@id("typo")\nforbid (principal, action, '
                                                  f'resource) when {{ {access} == "x" }};'},
                        r"typo \(line 3\): for policy `typo`, attribute `projekt`")
        assert "policy1" not in str(error)

