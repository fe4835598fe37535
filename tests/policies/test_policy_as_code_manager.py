"""Cedar and Rego through the real ``GovernedMemoryManager``: the example policy sets for
compliance-strict rule by rule (events carry the reasons and the policy revision that
pins the set), deny-beats-review-beats-allow with the built-in policies, a domain pack
that ships its policy files, and the load errors a profile author sees."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest
from policy_as_code_support import (
    ALICE_ADMIN,
    BILLING,
    CEDAR_EXAMPLE,
    HELPDESK,
    PACKAGE,
    REGO_EXAMPLE,
    SUPPORT_BOT,
    example_profile,
    only,
    require,
)

require("cedarpy", "cedar")
require("regopy", "rego")

from actors import ALICE  # noqa: E402
from governed_memory import (  # noqa: E402
    GovernedMemoryManager,
    MemoryPolicyDeniedError,
    Provenance,
    RecordStatus,
    hookimpl,
)
from governed_memory.clock import ManualClock  # noqa: E402
from governed_memory.errors import MemoryConfigurationError  # noqa: E402
from governed_memory.events import InMemoryEventSink, MemoryEvent  # noqa: E402
from governed_memory.plugins import PluginManager  # noqa: E402
from governed_memory.policy import PolicyEngine  # noqa: E402
from governed_memory.profiles import (  # noqa: E402
    DomainPack,
    MemoryProfileSpec,
    PackRegistry,
    ProfileRegistry,
    check_against_plugins,
    load_profile,
    parse_profile,
)
from governed_memory.profiles.build import build_components  # noqa: E402

MEMORY = {"backend": "memory"}
ENGINES = ("cedar", "rego")
SUPPORT_RULE = {"cedar": "cedar: forbidden by support-agents-never-write-foreign-preferences",
                "rego": "rego: support-agents-never-write-foreign-preferences"}
WEB_RULE = {"cedar": "cedar: held for review by web-sourced-memories-need-review (web-sourced "
                     "memories always need review)",
            "rego": "rego: web-sourced-memories-need-review"}
RESTRICTED_RULE = {"cedar": "cedar: forbidden by restricted-memories-need-admin",
                   "rego": "rego: restricted-memories-need-admin"}


@pytest.fixture(scope="module")
def plugins() -> PluginManager:
    return PluginManager.load(blocked=[])


class Run:
    """A manager over one profile, its events, and the engine revision they must carry."""

    def __init__(self, manager: GovernedMemoryManager, sink: InMemoryEventSink,
                 revision: str) -> None:
        self.manager, self.sink, self.revision = manager, sink, revision
        self._keys = 0

    def key(self) -> str:
        self._keys += 1
        return f"k{self._keys}"

    def last(self, kind: str) -> MemoryEvent:
        return [e for e in self.sink.events if e.type.endswith(kind)][-1]


def expected_revision(spec: MemoryProfileSpec, plugins: PluginManager) -> str:
    """The policy revision events must carry, worked out from the profile alone."""
    parts = build_components(spec, plugins, ManualClock(), {"backend": "memory"})
    return PolicyEngine(parts.policies, parts.policy_configuration).revision


@pytest.fixture(params=ENGINES)
async def run(request: pytest.FixtureRequest, plugins: PluginManager) -> AsyncIterator[Run]:
    spec = example_profile(request.param)
    sink = InMemoryEventSink()
    manager = GovernedMemoryManager.from_profile(spec, plugins=plugins, clock=ManualClock(),
                                                 sinks=[sink], provider_config_overrides=MEMORY)
    async with manager:
        yield Run(manager, sink, expected_revision(spec, plugins))


def engine_of(run: Run) -> str:
    assert run.manager.activity.profile.id.startswith("compliance-strict-")
    return run.manager.activity.profile.id.removeprefix("compliance-strict-")


async def test_the_example_profiles_pin_their_set_in_the_policy_revision(
        run: Run, plugins: PluginManager) -> None:
    engine = engine_of(run)
    policy = next(p for p in run.manager.activity.policies.policies if p.name == engine)
    set_hash = getattr(policy, "set_hash", "")
    assert set_hash.startswith("sha256:") and policy.revision == f"1:{set_hash}"
    await run.manager.add(SUPPORT_BOT, HELPDESK, "prefers tea", idempotency_key=run.key())
    assert {e.policy_revision for e in run.sink.events if e.decision_id} == {run.revision}


async def test_support_agents_write_no_preference_of_another_project(run: Run) -> None:
    engine = engine_of(run)
    with pytest.raises(MemoryPolicyDeniedError) as info:
        await run.manager.add(SUPPORT_BOT, BILLING, "prefers tea", memory_type="preference",
                              idempotency_key=run.key())
    assert info.value.policy == engine
    assert info.value.reasons == (SUPPORT_RULE[engine],)
    rejected = run.last("rejected")
    assert (rejected.outcome, rejected.reasons, rejected.policy_revision) == (
        "deny", (SUPPORT_RULE[engine],), run.revision)
    assert (await run.manager.list(SUPPORT_BOT, BILLING)).items == ()
    # The allowed side: their own project, and other types anywhere.
    own = await run.manager.add(SUPPORT_BOT, HELPDESK, "prefers tea", memory_type="preference",
                                idempotency_key=run.key())
    assert own.status is RecordStatus.ACTIVE
    committed = run.last("committed")
    assert (committed.outcome, committed.policy_revision) == ("committed", run.revision)
    # Cedar names the policies that permitted the write; a Rego allow says nothing.
    mine = [r for r in committed.reasons if r.startswith(f"{engine}:")]
    assert mine == (["cedar: permitted by baseline"] if engine == "cedar"
                    else []), mine
    fact = await run.manager.add(SUPPORT_BOT, BILLING, "the invoice is due on the 3rd",
                                 memory_type="fact", idempotency_key=run.key())
    # They may read another project but not change what is there.
    assert [r.id for r in (await run.manager.list(SUPPORT_BOT, BILLING)).items] == [fact.id]
    assert [h.record.id for h in (await run.manager.search(SUPPORT_BOT, BILLING,
                                                           "invoice")).hits] == [fact.id]
    assert run.last("completed").policy_revision == run.revision
    with pytest.raises(MemoryPolicyDeniedError, match=SUPPORT_RULE[engine].split(": ", 1)[1]):
        await run.manager.update(SUPPORT_BOT, BILLING, fact.id, content="due on the 4th",
                                 idempotency_key=run.key())
    await run.manager.update(ALICE, BILLING, fact.id, content="due on the 4th",
                             idempotency_key=run.key())


async def test_web_sourced_memories_always_need_review(run: Run) -> None:
    engine = engine_of(run)
    web = Provenance(source_type="web", source_id="https://example.test/page")
    held = await run.manager.add(ALICE, HELPDESK, "the page says tea is good", provenance=web,
                                 idempotency_key=run.key())
    assert held.status is RecordStatus.PENDING_REVIEW
    committed = run.last("committed")
    assert WEB_RULE[engine] in committed.reasons  # beside the built-in write-review's reason
    assert any(r.startswith("write-review: ") for r in committed.reasons)
    assert committed.policy_revision == run.revision
    typed = await run.manager.add(ALICE, HELPDESK, "typed by alice",
                                  provenance=Provenance(source_type="user"),
                                  idempotency_key=run.key())
    assert typed.status is RecordStatus.ACTIVE
    assert WEB_RULE[engine] not in run.last("committed").reasons


async def test_restricted_memories_are_written_by_administrators(run: Run) -> None:
    engine = engine_of(run)
    labelled = {"sensitivity": "restricted"}
    with pytest.raises(MemoryPolicyDeniedError) as info:
        await run.manager.add(ALICE, HELPDESK, "the merger closes in May", metadata=labelled,
                              idempotency_key=run.key())
    assert info.value.reasons == (RESTRICTED_RULE[engine],)
    record = await run.manager.add(ALICE_ADMIN, HELPDESK, "the merger closes in May",
                                   metadata=labelled, idempotency_key=run.key())
    assert record.status is RecordStatus.ACTIVE


async def test_the_built_in_policies_still_decide_beside_the_set(run: Run) -> None:
    with pytest.raises(MemoryPolicyDeniedError) as info:
        await run.manager.add(ALICE, HELPDESK, "password=Hunter22!x", idempotency_key=run.key())
    assert info.value.policy == "secret-guard"


# -- the set's hash, not the profile's, moves the policy revision ----------------------------


@pytest.mark.parametrize("engine", ENGINES)
async def test_changing_a_policy_file_changes_the_revision_in_every_event(
        engine: str, tmp_path: Path, plugins: PluginManager) -> None:
    path = tmp_path / ("rules.cedar" if engine == "cedar" else "rules.rego")
    allow = ('@id("all") permit (principal, action, resource);\n' if engine == "cedar" else
             "package t\n\nimport rego.v1\n\ndefault allow := true\n")
    key = "policies_file" if engine == "cedar" else "module_file"
    spec = only(engine, {key: str(path)})
    revisions = []
    for text in (allow, allow + ("// reviewed again\n" if engine == "cedar" else
                                 "# reviewed again\n")):
        path.write_text(text, encoding="utf-8")
        sink = InMemoryEventSink()
        async with GovernedMemoryManager.from_profile(spec, plugins=plugins, sinks=[sink],
                                                      clock=ManualClock()) as manager:
            await manager.add(ALICE, BILLING, "prefers tea")
        revisions.append({e.policy_revision for e in sink.events if e.decision_id})
    assert len(revisions[0]) == len(revisions[1]) == 1
    assert revisions[0] != revisions[1]  # the same profile revision, another policy set


# -- with the built-in policies: deny beats review beats allow -------------------------------


REVIEW_WEB_CEDAR = ('@id("all") permit (principal, action, resource);\n'
                    '@id("web") @review forbid (principal, action, resource) when '
                    '{ resource has source_type && resource.source_type == "web" };\n')
FORBID_WEB_CEDAR = ('@id("all") permit (principal, action, resource);\n'
                    '@id("no-web") forbid (principal, action, resource) when '
                    '{ resource has source_type && resource.source_type == "web" };\n')
FORBID_WEB_REGO = ('package t\n\nimport rego.v1\n\ndefault allow := true\n\n'
                   'deny contains "no-web" if input.resource.source_type == "web"\n')


@pytest.mark.parametrize("order", [("write-review", "cedar"), ("cedar", "write-review")])
async def test_a_set_forbidding_beats_a_built_in_review(order: tuple[str, str],
                                                        plugins: PluginManager) -> None:
    spec = parse_profile({"id": "mix", "version": "1.0.0",
                          "provider": {"name": "native", "config": MEMORY},
                          "write": {"review_source_types": ["web"]},
                          "policies": {"enabled": list(order),
                                       "extra": {"cedar": {"policies": FORBID_WEB_CEDAR}}}})
    async with GovernedMemoryManager.from_profile(spec, plugins=plugins,
                                                  clock=ManualClock()) as manager:
        with pytest.raises(MemoryPolicyDeniedError, match="cedar: forbidden by no-web"):
            await manager.add(ALICE, BILLING, "from the web",
                              provenance=Provenance(source_type="web"))


async def test_a_set_review_beats_the_built_ins_allow(plugins: PluginManager) -> None:
    spec = parse_profile({"id": "mix", "version": "1.0.0",
                          "provider": {"name": "native", "config": MEMORY},
                          "retention": {"default_ttl_s": 3600.0},
                          "policies": {"enabled": ["retention", "cedar"],
                                       "extra": {"cedar": {"policies": REVIEW_WEB_CEDAR}}}})
    sink = InMemoryEventSink()
    async with GovernedMemoryManager.from_profile(spec, plugins=plugins, sinks=[sink],
                                                  clock=ManualClock()) as manager:
        held = await manager.add(ALICE, BILLING, "from the web",
                                 provenance=Provenance(source_type="web"))
        assert held.status is RecordStatus.PENDING_REVIEW
        assert held.expires_at is not None  # the built-in transform still applied
        assert (await manager.add(ALICE, BILLING, "typed")).status is RecordStatus.ACTIVE
    assert "cedar: held for review by web" in sink.events[1].reasons


async def test_cedar_and_rego_together_each_decide(plugins: PluginManager) -> None:
    spec = parse_profile({"id": "both", "version": "1.0.0",
                          "provider": {"name": "native", "config": MEMORY},
                          "policies": {"enabled": ["cedar", "rego"],
                                       "extra": {"cedar": {"policies": REVIEW_WEB_CEDAR},
                                                 "rego": {"module": FORBID_WEB_REGO}}}})
    async with GovernedMemoryManager.from_profile(spec, plugins=plugins,
                                                  clock=ManualClock()) as manager:
        with pytest.raises(MemoryPolicyDeniedError) as info:
            await manager.add(ALICE, BILLING, "from the web",
                              provenance=Provenance(source_type="web"))
        assert info.value.reasons == ("cedar: held for review by web", "rego: no-web")
        assert info.value.policy == "rego"


# -- a domain pack ships its policy files ----------------------------------------------------


class StrictPack:
    """A third-party plugin: a profile naming policy files in its own package, and a pack."""

    @staticmethod
    @hookimpl
    def register_memory_profiles(register: Callable[..., None]) -> None:
        for engine in ENGINES:
            register(files(PACKAGE) / "policies" / f"compliance-strict-{engine}.toml")

    @staticmethod
    @hookimpl
    def register_domain_packs(register: Callable[..., None]) -> None:
        register(DomainPack("strict-desk", "1.0.0",
                            {"chat": "compliance-strict-cedar@1.0.0",
                             "agent": "compliance-strict-rego@1.0.0"}))


async def test_a_domain_pack_ships_its_policy_files() -> None:
    plugins = PluginManager.load([StrictPack], blocked=[])
    registry = ProfileRegistry.from_plugins(plugins)
    for engine in ENGINES:
        entry = registry.entry(f"compliance-strict-{engine}@1.0.0")
        assert entry.problem is None, entry.problem
    assert "strict-desk@1.0.0" in [p.key for p in PackRegistry.from_plugins(plugins).all()]
    sink = InMemoryEventSink()
    manager = GovernedMemoryManager.from_pack("strict-desk@1.0.0", "agent", plugins=plugins,
                                              sinks=[sink], provider_config_overrides=MEMORY)
    async with manager:
        with pytest.raises(MemoryPolicyDeniedError, match="rego: support-agents"):
            await manager.add(SUPPORT_BOT, BILLING, "prefers tea", memory_type="preference",
                              idempotency_key="k1")


# -- what a profile author sees ----------------------------------------------------------------


def test_the_examples_as_shipped_are_usable(plugins: PluginManager) -> None:
    for engine in ENGINES:
        spec = example_profile(engine)
        check_against_plugins(spec, plugins)
        assert spec.key == f"compliance-strict-{engine}@1.0.0"
        config = dict(spec.policies.extra[engine])
        assert config == (CEDAR_EXAMPLE if engine == "cedar" else REGO_EXAMPLE)


def test_the_built_in_compliance_strict_is_unchanged(plugins: PluginManager) -> None:
    strict = ProfileRegistry.from_plugins(plugins).get("compliance-strict")
    assert strict.key == "compliance-strict@1.0.0"
    assert not set(strict.policies.enabled) & {"cedar", "rego"}


@pytest.mark.parametrize(("extra", "match"), [
    ({"cedar": {"policies": "permit (principal, action, resource) when { 1 + };"}},
     r"policies\.extra\.cedar: <inline policies>:1: policy policy0: does not parse"),
    ({"cedar": {"policies": "permit (principal, action, resource);", "polices": "x"}},
     r"policies\.extra\.cedar: unknown key polices for policy 'cedar'"),
    ({"cedar": {"policies_file": "policies/missing.cedar", "resource_package": PACKAGE}},
     r"policies\.extra\.cedar: policies_file: cannot read 'policies/missing.cedar' in "
     r"package 'governed_memory_profiles': FileNotFoundError"),
    ({"cedar": {"policies": 'forbid (principal, action, resource) when { resource.nope };'}},
     r"policies\.extra\.cedar: <inline policies>:1: policy policy0: does not validate"),
    ({"rego": {"module": "package t\n\nallow if {\n"}},
     r"policies\.extra\.rego: <inline module>:3: does not compile"),
])
def test_a_broken_set_is_a_load_error_naming_the_path(extra: dict[str, Any], match: str,
                                                      plugins: PluginManager) -> None:
    engine = next(iter(extra))
    spec = parse_profile({"id": "broken", "version": "1.0.0",
                          "provider": {"name": "native", "config": MEMORY},
                          "policies": {"enabled": [engine], "extra": extra}})
    with pytest.raises(MemoryConfigurationError, match=rf"^broken@1\.0\.0: {match}"):
        check_against_plugins(spec, plugins)


def test_a_file_profile_is_refused_with_the_problem(tmp_path: Path,
                                                    plugins: PluginManager) -> None:
    path = tmp_path / "profile.toml"
    path.write_text('id = "file"\nversion = "1.0.0"\n[policies]\nenabled = ["cedar"]\n'
                    '[policies.extra.cedar]\npolicies_file = "rules.cedar"\n')
    with pytest.raises(MemoryConfigurationError, match=r"'rules\.cedar' is relative"):
        GovernedMemoryManager.from_profile(load_profile(path), plugins=plugins)
