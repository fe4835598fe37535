"""The registry: one meaning per ``id@version``, newest-version lookup, and profiles
that cannot be built here kept with their reason."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from governed_memory import hookimpl
from governed_memory.errors import MemoryConfigurationError
from governed_memory.operation_context import ProfileRef
from governed_memory.plugins import PluginManager
from governed_memory.policy import PolicyCheck, PolicyVerdict
from governed_memory.profiles import (
    MemoryProfileSpec,
    ProfileLoadError,
    ProfileRegistry,
    check_against_plugins,
    parse_profile,
)
from profile_support import MINIMAL, installed, write_toml


def spec(**changes: Any) -> MemoryProfileSpec:
    return attrs.evolve(MemoryProfileSpec("team", "1.0.0"), **changes)


def test_same_reference_twice_with_different_content_is_an_error() -> None:
    registry = ProfileRegistry()
    registry.register(spec(), origin="a")
    with pytest.raises(MemoryConfigurationError,
                       match=r"team@1\.0\.0 registered twice with different content "
                             r"\(by a: sha256:.*; by b: sha256:"):
        registry.register(spec(description="other"), origin="b")


def test_same_content_twice_is_fine() -> None:
    registry = ProfileRegistry()
    first = registry.register(spec(), origin="a")
    again = registry.register(spec(), origin="b")
    assert again is first and len(registry) == 1


def test_lookup_by_reference_and_newest_version() -> None:
    registry = ProfileRegistry()
    for version in ("1.0.0", "1.10.0", "1.9.3", "2.0.0-rc.1", "1.10.0-beta"):
        registry.register(spec(version=version))
    assert registry.get("team@1.9.3").version == "1.9.3"
    assert registry.get("team").version == "2.0.0-rc.1"  # semver precedence, not text
    registry.register(spec(version="2.0.0"))
    assert registry.get("team").version == "2.0.0"
    assert [s.version for s in registry.all()] == ["1.0.0", "1.9.3", "1.10.0-beta", "1.10.0",
                                                   "2.0.0-rc.1", "2.0.0"]
    assert "team@1.0.0" in registry and "team@3.0.0" not in registry
    with pytest.raises(MemoryConfigurationError, match=r"unknown profile team@3.0.0"):
        registry.get("team@3.0.0")
    with pytest.raises(MemoryConfigurationError, match="not a semantic version"):
        registry.get("team@latest")


def test_a_profile_ref_must_match_the_revision() -> None:
    registry = ProfileRegistry()
    registered = registry.register(spec()).spec
    assert registry.get(registered.ref) == registered
    with pytest.raises(MemoryConfigurationError, match="has revision"):
        registry.get(ProfileRef("team", "1.0.0", "sha256:other"))


def TeamProfiles(*items: Any) -> type:
    """A plugin class (pluggy names a class plugin after the class) registering items."""

    def register_memory_profiles(register: Callable[..., None]) -> None:
        for item in items:
            register(item)

    return type("TeamProfiles", (), {
        "register_memory_profiles": staticmethod(hookimpl(register_memory_profiles))})


def test_plugins_register_specs_mappings_and_files(tmp_path: Path) -> None:
    path = write_toml(tmp_path, MINIMAL)
    plugins = PluginManager.load([TeamProfiles(spec(), {"id": "mapped", "version": "0.1.0"},
                                               str(path))], entry_points=False, blocked=[])
    registry = ProfileRegistry.from_plugins(plugins)
    assert [s.key for s in registry.all()] == ["mapped@0.1.0", "team@1.0.0", "tiny@1.0.0"]
    # No provider is registered in this plugin set, so none of them is usable here.
    entry = registry.entry("tiny@1.0.0")
    assert not entry.usable
    assert entry.origin == "TeamProfiles"
    assert entry.problem is not None and "provider.name: unknown provider 'native'" in entry.problem
    with pytest.raises(MemoryConfigurationError, match=r"cannot be used here: .*provider.name"):
        registry.get("tiny@1.0.0")


def test_a_broken_registration_is_listed_and_spares_the_rest() -> None:
    plugins = PluginManager.load([TeamProfiles({"id": "x", "version": "1.0.0", "bad": 1},
                                               spec())],
                                 entry_points=False, blocked=[])
    registry = ProfileRegistry.from_plugins(plugins)
    [broken] = registry.broken
    assert "plugin TeamProfiles:" in broken and "bad: unknown key" in broken
    assert registry.entry("team@1.0.0").spec == spec()  # the good profile of the same plugin
    plugins = PluginManager.load([TeamProfiles(42)], entry_points=False, blocked=[])
    assert "registered a profile as int" in ProfileRegistry.from_plugins(plugins).broken[0]


def test_a_conflicting_third_party_profile_is_refused_and_the_rest_stay_usable() -> None:
    clash = parse_profile({"id": "local", "version": "1.0.0", "description": "mine"})
    plugins = PluginManager.load([TeamProfiles(clash)], blocked=[])
    registry = ProfileRegistry.from_plugins(plugins)  # no longer fails as a whole
    with pytest.raises(MemoryConfigurationError,
                       match=r"local@1.0.0 registered twice with different content "
                             r"\(by .*; by .*\)") as info:
        registry.get("local@1.0.0")
    assert "TeamProfiles" in str(info.value) and "profiles" in str(info.value)
    assert registry.get("chat-assistant@1.0.0").id == "chat-assistant"  # untouched


# -- validation against the registered plugins ------------------------------------------------


class Ceiling:
    """A third-party policy configured through ``policies.extra``."""

    name = "ceiling"

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.revision = f"1:{limit}"

    async def evaluate(self, check: PolicyCheck) -> PolicyVerdict:
        return PolicyVerdict.allow()


def build_ceiling(config: Any, profile: MemoryProfileSpec) -> Ceiling:
    if set(config) - {"limit"} or not isinstance(config.get("limit", 1), int):
        raise MemoryConfigurationError("ceiling takes one integer: limit")
    return Ceiling(config.get("limit", 1))


class CeilingPlugin:
    @hookimpl
    def register_memory_policies(self, register: Callable[..., None]) -> None:
        register("ceiling", build_ceiling, description="test policy")


@pytest.fixture(scope="module")
def plugins() -> PluginManager:
    return PluginManager.load([CeilingPlugin()], blocked=[])


def check(plugins: PluginManager, **data: Any) -> None:
    check_against_plugins(parse_profile({"id": "x", "version": "1.0.0", **data}), plugins)


def test_unknown_provider_is_named(plugins: PluginManager) -> None:
    with pytest.raises(ProfileLoadError, match=r"provider\.name: unknown provider 'nope'"):
        check(plugins, provider={"name": "nope"})


def test_provider_config_is_checked_by_its_factory(plugins: PluginManager) -> None:
    with pytest.raises(ProfileLoadError, match=r"provider\.config: unknown native provider "
                                               r"config key\(s\): busy_timeout"):
        check(plugins, provider={"name": "native", "config": {"busy_timeout": 5}})


def test_unknown_policy_is_named_by_its_position(plugins: PluginManager) -> None:
    with pytest.raises(ProfileLoadError, match=r"policies\.enabled\[2\]: unknown policy 'typo'"):
        check(plugins, policies={"enabled": ["permissions", "ceiling", "typo"]})


def test_third_party_policy_config_is_validated(plugins: PluginManager) -> None:
    check(plugins, policies={"enabled": ["ceiling"], "extra": {"ceiling": {"limit": 3}}})
    with pytest.raises(ProfileLoadError,
                       match=r"policies\.extra\.ceiling: ceiling takes one integer"):
        check(plugins, policies={"enabled": ["ceiling"], "extra": {"ceiling": {"limit": "3"}}})


def test_builtin_policies_refuse_extra_config(plugins: PluginManager) -> None:
    with pytest.raises(ProfileLoadError, match=r"policies\.extra\.retention: policy 'retention'"
                                               r" is configured by the profile's \[retention\]"):
        check(plugins, policies={"enabled": ["retention"], "extra": {"retention": {"x": 1}}})


def test_capabilities_the_profile_needs(plugins: PluginManager) -> None:
    with pytest.raises(ProfileLoadError, match=r"retrieval\.modes: provider 'native' has no "
                                               "vector search"):
        check(plugins, retrieval={"modes": ["lexical", "vector"]})
    with pytest.raises(ProfileLoadError, match=r"fallback\.provider: unknown provider"):
        check(plugins, fallback={"provider": "elsewhere"})


def test_installed_plugins_list_the_builtins() -> None:
    names = [r.name for r in installed().policies.all()]
    assert names == sorted(["permissions", "write-rules", "secret-guard", "pii-redaction",
                            "retention", "write-review", "quotas", "cedar", "rego"])


@pytest.mark.parametrize(("store", "registered"), [("turns", "sqlite"),
                                                   ("working_state", "redis")])
def test_tier_stores_must_be_registered(plugins: PluginManager, store: str,
                                        registered: str) -> None:
    with pytest.raises(ProfileLoadError, match=rf"stores\.{store}\.kind: unknown"):
        check(plugins, stores={store: {"kind": "carrier-pigeon"}})
    check(plugins, stores={store: {"kind": registered}})
