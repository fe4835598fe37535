"""The profile model: built-ins load, round trips keep the revision, and every broken
setting is reported with its dotted path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from governed_memory.converter import structure
from governed_memory.errors import MemoryConfigurationError
from governed_memory.operations import Operation
from governed_memory.principal import Permission
from governed_memory.profiles import (
    MemoryProfileSpec,
    ProfileLoadError,
    ProfileProblem,
    ProfileRegistry,
    RetentionSection,
    SecretGuardMode,
    load_profile,
    loads_profile,
    parse_profile,
    structure_profile,
    unstructure_profile,
)
from governed_memory.records import MemoryType
from hypothesis import given
from hypothesis import strategies as st
from profile_support import BUILTIN, MINIMAL, installed, write_toml


@pytest.fixture(scope="module")
def registry() -> ProfileRegistry:
    return ProfileRegistry.from_plugins(installed())


# -- built-ins ---------------------------------------------------------------------------


@pytest.mark.parametrize("reference", BUILTIN)
def test_every_builtin_profile_loads_and_is_usable(registry: ProfileRegistry,
                                                   reference: str) -> None:
    entry = registry.entry(reference)
    assert entry.origin == "profiles"
    assert entry.problem is None, entry.problem
    spec = registry.get(reference)
    assert spec.key == reference
    assert spec.revision.startswith("sha256:") and len(spec.revision) == 7 + 64
    assert spec.ref.revision == spec.revision


@pytest.mark.parametrize("reference", BUILTIN)
def test_structure_unstructure_structure_is_equal_with_the_same_revision(
        registry: ProfileRegistry, reference: str) -> None:
    spec = registry.get(reference)
    data = unstructure_profile(spec)
    again = structure_profile(json.loads(json.dumps(data)))  # through real JSON
    assert again == spec
    assert again.revision == spec.revision
    assert unstructure_profile(again) == data
    # The framework's strict converter agrees with the profile converter.
    assert structure(data, MemoryProfileSpec) == spec


def test_builtin_profiles_say_what_the_issue_asks(registry: ProfileRegistry) -> None:
    local = registry.get("local@1.0.0")
    assert local.provider.name == "native"
    assert dict(local.provider.config) == {"backend": "sqlite"}  # default path
    agent = registry.get("agent-run@1.0.0")
    chat = registry.get("chat-assistant@1.0.0")
    assert agent.retention.max_ttl_s is not None and chat.retention.max_ttl_s is not None
    assert agent.retention.max_ttl_s < chat.retention.max_ttl_s  # short TTLs
    assert "web" in chat.write.review_source_types
    assert chat.quotas.max_records_per_scope is not None
    strict = registry.get("compliance-strict@1.0.0")
    assert strict.privacy.secret_guard is SecretGuardMode.REJECT
    assert strict.cache.enabled is False
    assert strict.audit.fail_closed is True
    assert strict.privacy.pii_redaction is True


def test_revision_is_the_hash_of_the_canonical_form() -> None:
    spec = loads_profile(MINIMAL)
    assert spec.revision == MemoryProfileSpec("tiny", "1.0.0").revision
    other = attrs.evolve(spec, description="changed")
    assert other.revision != spec.revision
    # Writing a default explicitly changes nothing: the canonical form is the same.
    explicit = loads_profile(MINIMAL + "\n[retrieval]\ntop_k = 10\n")
    assert explicit.revision == spec.revision
    assert "revision" not in unstructure_profile(spec)


@given(top_k=st.integers(1, 100), ttl=st.floats(1, 1e6), max_extra=st.floats(0, 1e6),
       guard=st.sampled_from(list(SecretGuardMode)),
       types=st.lists(st.sampled_from(list(MemoryType)), unique=True))
def test_round_trip_property(top_k: int, ttl: float, max_extra: float,
                             guard: SecretGuardMode, types: list[MemoryType]) -> None:
    enabled = ["write-rules", "retention"] + ([] if guard is SecretGuardMode.OFF
                                              else ["secret-guard"])
    data: dict[str, Any] = {
        "id": "prop", "version": "2.3.4-rc.1+build.7",
        "retrieval": {"top_k": top_k},
        "write": {"allowed_memory_types": [t.value for t in types]},
        "retention": {"default_ttl_s": ttl, "max_ttl_s": ttl + max_extra,
                      "ttl_by_type": {"fact": ttl}},
        "privacy": {"secret_guard": guard.value},
        "policies": {"enabled": enabled},
    }
    spec = parse_profile(data)
    again = structure_profile(json.loads(json.dumps(unstructure_profile(spec))))
    assert again == spec and again.revision == spec.revision


# -- loading errors name the path ----------------------------------------------------------


def problems(text: str) -> tuple[str, ...]:
    with pytest.raises(ProfileLoadError) as info:
        loads_profile(MINIMAL + text, source="p.toml")
    assert str(info.value).startswith("p.toml: ")
    assert isinstance(info.value, MemoryConfigurationError)
    return info.value.problems


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[retrieval]\ntop_k = \"5\"", "retrieval.top_k: expected int, got str"),
        ("[retrieval]\ntop_k = 0", "retrieval.top_k: must be between 1 and 100, got 0"),
        ("[retrieval]\ntop_k = 101", "retrieval.top_k: must be between 1 and 100"),
        ("[retrieval]\ntopk = 5", "retrieval.topk: unknown key"),
        ("surprise = 1", "surprise: unknown key"),
        ("[retrieval]\nmodes = \"lexical\"", "retrieval.modes: expected an array, got str"),
        ("[retrieval]\nmodes = [\"lexical\", \"telepathy\"]", "retrieval.modes[1]: 'telepathy'"),
        ("[retrieval.weights]\nvector = 1.0", "retrieval.weights.vector: weights a mode"),
        ("[retrieval.weights]\nrecency = 1.0", "retrieval.weights.recency: needs recency_half"),
        ("[retention]\ndefault_ttl_s = 100\nmax_ttl_s = 10\n[policies]\nenabled = [\"retention\"]",
         "retention.default_ttl_s: 100.0 is above max_ttl_s (10.0)"),
        ("[retention]\nmax_ttl_s = 10\n[retention.ttl_by_type]\nfact = 11\n"
         "[policies]\nenabled = [\"retention\"]",
         "retention.ttl_by_type.fact: 11.0 is above max_ttl_s"),
        ("[retention.ttl_by_type]\nrecipe = 11", "retention.ttl_by_type.recipe: 'recipe' is not"),
        ("[retention]\nmax_ttl_s = -1", "retention.max_ttl_s: must be a positive number"),
        ("[scope]\nrequired = [\"tenant\"]", "scope.required[0]: 'tenant' is not a scope dim"),
        ("[privacy]\nsecret_guard = \"maybe\"", "privacy.secret_guard: 'maybe' is not one of"),
        ("[privacy]\nsecret_guard = \"reject\"",
         "privacy.secret_guard: is enforced by policy 'secret-guard'"),
        ("[access.permissions]\ndelete = \"memory:root\"",
         "access.permissions.delete: 'memory:root' is not one of"),
        ("[access.permissions]\nexplode = \"memory:admin\"",
         "access.permissions.explode: 'explode' is not one of"),
        ("[quotas]\nmax_records_per_scope = 0", "quotas.max_records_per_scope: must be at least"),
        ("[provider.config]\nwhen = 1979-05-27T07:32:00Z",
         "provider.config.when: is not JSON-safe"),
        ("[provider.config]\nratio = inf", "provider.config.ratio: contains a non-finite"),
        ("[policies]\nenabled = [\"a\", \"a\"]", "policies.enabled[1]: 'a' is listed twice"),
        ("[policies]\nenabled = [\"a\"]\n[policies.extra.b]\nx = 1",
         "policies.extra.b: configures a policy that is not in enabled"),
        ("[stores.cache]\nkind = 7", "stores.cache.kind: expected str, got int"),
        ("[fallback]\nprovider = \"native\"", "fallback.provider: falls back to the primary"),
        ("timeout_s = 0", "timeout_s: must be a positive number"),
    ],
)
def test_errors_name_the_dotted_path(text: str, expected: str) -> None:
    found = problems(text)
    assert any(expected in problem for problem in found), found


def test_every_problem_is_reported_at_once() -> None:
    found = problems("[retrieval]\ntop_k = \"x\"\nbogus = 1\n[cache]\nmax_entries = \"many\"")
    assert found == ("retrieval.top_k: expected int, got str", "retrieval.bogus: unknown key",
                     "cache.max_entries: expected int, got str")


@pytest.mark.parametrize("version", ["1.0", "v1.0.0", "01.0.0", "1.0.0-", "1.0.0+", "latest"])
def test_bad_semver_is_refused(version: str) -> None:
    with pytest.raises(ProfileLoadError, match=r"version: .* is not a semantic version"):
        parse_profile({"id": "x", "version": version})


@pytest.mark.parametrize("name", ["Chat", "chat assistant", "chat@1", "-chat", ""])
def test_bad_ids_are_refused(name: str) -> None:
    with pytest.raises(ProfileLoadError, match="id: "):
        parse_profile({"id": name, "version": "1.0.0"})


def test_missing_required_keys_are_named() -> None:
    with pytest.raises(ProfileLoadError) as info:
        parse_profile({"version": "1.0.0"})
    assert info.value.problems == ("id: required, but missing",)


def test_not_toml_names_the_file(tmp_path: Path) -> None:
    path = write_toml(tmp_path, "id = \"x\nversion = 1", name="broken.toml")
    with pytest.raises(MemoryConfigurationError, match=r"broken.toml: not valid TOML"):
        load_profile(path)
    with pytest.raises(MemoryConfigurationError, match="cannot read the profile"):
        load_profile(tmp_path / "missing.toml")


def test_sections_check_themselves_when_built_in_code() -> None:
    with pytest.raises(ProfileProblem, match=r"^default_ttl_s: .* above max_ttl_s"):
        RetentionSection(default_ttl_s=10.0, max_ttl_s=5.0)
    with pytest.raises(ProfileProblem, match=r"^version: "):
        MemoryProfileSpec("x", "one")


def test_the_spec_is_read_only() -> None:
    spec = parse_profile({"id": "x", "version": "1.0.0",
                          "provider": {"config": {"nested": {"a": [1, 2]}}},
                          "access": {"permissions": {"delete": "memory:admin"}},
                          "policies": {"enabled": ["permissions"]}})
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        spec.id = "y"  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.provider.config["nested"]["a"] = 3  # type: ignore[index]
    with pytest.raises(TypeError):
        spec.access.permissions[Operation.GET] = Permission.ADMIN  # type: ignore[index]


# -- spec_version dispatch ---------------------------------------------------------------------


def test_unknown_spec_version_is_refused() -> None:
    with pytest.raises(ProfileLoadError,
                       match="spec_version: unknown schema version 7; this release reads 1"):
        parse_profile({"spec_version": 7, "id": "x", "version": "1.0.0"})
    with pytest.raises(ProfileLoadError, match="spec_version: expected int, got str"):
        parse_profile({"spec_version": "1", "id": "x", "version": "1.0.0"})


def test_absent_spec_version_means_the_current_one() -> None:
    assert parse_profile({"id": "x", "version": "1.0.0"}).spec_version == 1


def test_a_second_schema_keeps_first_schema_files_loading() -> None:
    """How the schema grows: a v2 reader is added beside the v1 reader. Here v2 renames
    ``retrieval.top_k`` to ``retrieval.hits``; v1 files go on loading unchanged."""

    def read_v2(data: Any, source: str) -> MemoryProfileSpec:
        upgraded = dict(data)
        retrieval = dict(upgraded.pop("retrieval", {}))
        if "hits" in retrieval:
            retrieval["top_k"] = retrieval.pop("hits")
        upgraded["retrieval"] = retrieval
        upgraded["spec_version"] = 1  # the model this release holds
        return structure_profile(upgraded, source=source)

    from governed_memory.profiles import READERS

    readers = {**READERS, 2: read_v2}
    v1 = parse_profile({"spec_version": 1, "id": "x", "version": "1.0.0",
                        "retrieval": {"top_k": 7}}, readers=readers)
    v2 = parse_profile({"spec_version": 2, "id": "x", "version": "1.0.0",
                        "retrieval": {"hits": 7}}, readers=readers)
    assert v1.retrieval.top_k == v2.retrieval.top_k == 7
    assert v1 == v2
    with pytest.raises(ProfileLoadError, match=r"retrieval\.hits: unknown key"):
        parse_profile({"spec_version": 1, "id": "x", "version": "1.0.0",
                       "retrieval": {"hits": 7}}, readers=readers)


def test_the_documented_example_profile_parses() -> None:
    """docs/domain-packs.md shows every section; it must stay a valid profile."""
    import re

    doc = (Path(__file__).resolve().parents[2] / "docs" / "domain-packs.md").read_text(
        encoding="utf-8")
    example = next(block for block in re.findall(r"```toml\n(.*?)```", doc, re.DOTALL)
                   if "spec_version" in block)
    spec = loads_profile(example, source="docs/domain-packs.md")
    assert spec.key == "support-chat@1.2.0"
    assert spec.policies.extra["acme-ceiling"]["limit"] == 3
    assert spec.retention.ttl_for(MemoryType.EPISODE) == 2592000.0


def test_a_broken_section_does_not_hide_a_missing_policy() -> None:
    # the retention section cannot be built (a TTL above its maximum), and retention is
    # not enabled either: both are reported in one pass
    found = problems("[retention]\ndefault_ttl_s = 100\nmax_ttl_s = 10\n"
                     "[privacy]\nsecret_guard = \"reject\"")
    assert "retention.default_ttl_s: 100.0 is above max_ttl_s (10.0)" in found
    assert any(p.startswith("retention: is enforced by policy 'retention'") for p in found)
    assert any(p.startswith("privacy.secret_guard: is enforced by policy 'secret-guard'")
               for p in found)


def test_every_profile_wide_problem_is_reported_at_once() -> None:
    found = problems("[stores.vectors]\nkind = \"faiss\"\n[write]\nread_only = true\n"
                     "[quotas]\nmax_records_per_scope = 5")
    assert any(p.startswith("stores.vectors: is no store a profile can name") for p in found)
    assert any(p.startswith("write.read_only: is enforced by policy 'write-rules'")
               for p in found)
    assert any(p.startswith("quotas: is enforced by policy 'quotas'") for p in found)


@pytest.mark.parametrize(("text", "expected"), [
    ("[stores.cahce]\nkind = \"redis\"", "stores.cahce: is no store a profile can name"),
    ("[stores.cache]\nkind = \"redis\"", "stores.cache: names a cache store, but [cache]"),
    ("[cache]\nenabled = true\n[stores.cache]\nkind = \"redis\"",
     "stores.cache: names a cache store, but [cache]"),  # the in-process store needs none
    ("[cache]\nenabled = true\nstore = \"redis\"\n[stores.cache]\nkind = \"memcached\"",
     "stores.cache.kind: is 'memcached', but [cache] store is 'redis'"),
])
def test_stores_are_only_the_ones_something_reads(text: str, expected: str) -> None:
    found = problems(text)
    assert any(expected in problem for problem in found), found
