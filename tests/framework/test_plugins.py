"""The plugin manager: entry points, blocking, validation of hook implementations,
duplicate names, lookups, and registries that their hooks fill on first use."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from governed_memory.errors import MemoryConfigurationError
from governed_memory.hookspecs import HOOK_NAMES, hookimpl
from governed_memory.plugins import BLOCK_ENV, PluginManager

Register = Callable[..., None]


def _native_factory(config: Any, clock: Any) -> str:
    return "provider"


class ProviderPlugin:
    @staticmethod
    @hookimpl
    def register_memory_providers(register: Register) -> None:
        register("alpha", _native_factory, description="first test provider")
        register("beta", _native_factory)


class DuplicatePlugin:
    @staticmethod
    @hookimpl
    def register_memory_providers(register: Register) -> None:
        register("alpha", _native_factory)


class NativeClashPlugin:
    @staticmethod
    @hookimpl
    def register_memory_providers(register: Register) -> None:
        register("native", _native_factory)


class EverythingPlugin:
    @staticmethod
    @hookimpl
    def register_memory_policies(register: Register) -> None:
        register("no-secrets", lambda config: "policy", description="blocks secrets")
        register("ttl", lambda config: "ttl-policy")

    @staticmethod
    @hookimpl
    def register_event_sinks(register: Register) -> None:
        register("audit-file", lambda config: "sink", description="hash-chained file")

    @staticmethod
    @hookimpl
    def register_memory_profiles(register: Register) -> None:
        register("chat-assistant@1.2.0")


class MisspelledPlugin:
    @staticmethod
    @hookimpl
    def register_memory_provider(register: Register) -> None:  # missing the final "s"
        register("typo", _native_factory)


class WrongArgumentPlugin:
    @staticmethod
    @hookimpl
    def register_memory_providers(reg: Register) -> None:  # argument is named "register"
        reg("typo", _native_factory)


class UnnamedProviderPlugin:
    @staticmethod
    @hookimpl
    def register_memory_providers(register: Register) -> None:
        register("", _native_factory)


def load(*plugins: object, blocked: list[str] | None = None) -> PluginManager:
    return PluginManager.load(plugins, entry_points=False,
                              blocked=[] if blocked is None else blocked)


@pytest.fixture
def native_importable() -> None:
    pytest.importorskip(
        "governed_memory_native.plugin",
        reason="the native provider (providers/governed_memory_native) is not importable yet",
    )


@pytest.fixture(autouse=True)
def no_blocked_plugins_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BLOCK_ENV, raising=False)


# -- entry points ------------------------------------------------------------------------


def test_hook_names_are_the_documented_hooks() -> None:
    assert frozenset({"register_memory_providers", "register_memory_policies",
                      "register_event_sinks", "register_memory_profiles",
                      "register_domain_packs", "register_cache_stores",
                      "register_embedders", "register_turn_stores",
                      "register_working_state_stores", "register_language_models",
                      "register_cli_commands", "register_rate_stores",
                      "register_block_stores"}) == HOOK_NAMES


@pytest.mark.usefixtures("native_importable")
def test_load_finds_native_provider_through_its_entry_point() -> None:
    manager = PluginManager.load()
    registration = manager.providers.get("native")
    assert registration.name == "native"
    assert registration.plugin == "native"
    assert callable(registration.factory)
    assert registration.description
    assert "native" in manager.plugin_names
    assert "native" in [r.name for r in manager.providers.all()]


@pytest.mark.usefixtures("native_importable")
def test_block_env_var_removes_native(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BLOCK_ENV, "native")
    manager = PluginManager.load()
    assert "native" not in [r.name for r in manager.providers.all()]
    with pytest.raises(MemoryConfigurationError, match="native"):
        manager.providers.get("native")


@pytest.mark.usefixtures("native_importable")
def test_block_env_var_is_a_comma_separated_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BLOCK_ENV, " something-else , native ,")
    assert "native" not in [r.name for r in PluginManager.load().providers.all()]


@pytest.mark.usefixtures("native_importable")
def test_explicit_blocked_argument_overrides_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BLOCK_ENV, "native")
    assert PluginManager.load(blocked=[]).providers.get("native").plugin == "native"
    monkeypatch.delenv(BLOCK_ENV)
    assert "native" not in [r.name for r in PluginManager.load(blocked=["native"]).providers.all()]


@pytest.mark.usefixtures("native_importable")
def test_blocked_plugin_is_not_listed_as_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BLOCK_ENV, "native")
    assert "native" not in PluginManager.load().plugin_names


@pytest.mark.usefixtures("native_importable")
def test_third_party_plugin_clashing_with_native_is_refused_naming_both() -> None:
    manager = PluginManager.load([NativeClashPlugin], blocked=[])
    with pytest.raises(MemoryConfigurationError) as info:
        manager.providers.get("native")
    message = str(info.value)
    assert "'native'" in message
    assert "NativeClashPlugin" in message
    assert "by native and" in message


def test_entry_points_off_loads_nothing_but_given_plugins() -> None:
    manager = load(ProviderPlugin)
    assert manager.plugin_names == ("ProviderPlugin",)
    assert [r.name for r in manager.providers.all()] == ["alpha", "beta"]
    assert load().providers.all() == ()


# -- registrations -----------------------------------------------------------------------


def test_registration_records_name_factory_description_and_plugin() -> None:
    manager = load(ProviderPlugin)
    alpha = manager.providers.get("alpha")
    assert alpha.factory is _native_factory
    assert alpha.description == "first test provider"
    assert alpha.plugin == "ProviderPlugin"
    assert manager.providers.get("beta").description == ""


def test_all_is_sorted_by_name() -> None:
    class Backwards:
        @staticmethod
        @hookimpl
        def register_memory_providers(register: Register) -> None:
            for name in ("zeta", "mu", "alpha"):
                register(name, _native_factory)

    assert [r.name for r in load(Backwards).providers.all()] == ["alpha", "mu", "zeta"]


def test_misspelled_hookimpl_is_a_configuration_error_at_load() -> None:
    with pytest.raises(MemoryConfigurationError) as info:
        load(MisspelledPlugin)
    assert "register_memory_provider" in str(info.value)


def test_hookimpl_with_wrong_argument_name_is_a_configuration_error() -> None:
    with pytest.raises(MemoryConfigurationError):
        load(WrongArgumentPlugin)


def test_two_plugins_registering_the_same_provider_name_are_refused_naming_both() -> None:
    manager = load(ProviderPlugin, DuplicatePlugin)
    with pytest.raises(MemoryConfigurationError) as info:
        manager.providers.all()
    message = str(info.value)
    assert "'alpha'" in message
    assert "ProviderPlugin" in message
    assert "DuplicatePlugin" in message


def test_same_policy_name_twice_is_refused() -> None:
    class Twice:
        @staticmethod
        @hookimpl
        def register_memory_policies(register: Register) -> None:
            register("p", object)
            register("p", object)

    with pytest.raises(MemoryConfigurationError, match="'p' registered twice"):
        load(Twice).policies.get("p")


def test_same_name_in_different_registries_is_fine() -> None:
    class SameName:
        @staticmethod
        @hookimpl
        def register_memory_providers(register: Register) -> None:
            register("shared", _native_factory)

        @staticmethod
        @hookimpl
        def register_memory_policies(register: Register) -> None:
            register("shared", object)

        @staticmethod
        @hookimpl
        def register_event_sinks(register: Register) -> None:
            register("shared", object)

    manager = load(SameName)
    assert manager.providers.get("shared").factory is _native_factory
    assert manager.policies.get("shared").factory is object
    assert manager.sinks.get("shared").factory is object


def test_empty_provider_name_is_refused() -> None:
    with pytest.raises(MemoryConfigurationError, match="UnnamedProviderPlugin"):
        load(UnnamedProviderPlugin).providers.all()


def test_get_unknown_name_lists_known_names() -> None:
    manager = load(ProviderPlugin)
    with pytest.raises(MemoryConfigurationError) as info:
        manager.providers.get("gamma")
    message = str(info.value)
    assert "'gamma'" in message
    assert "alpha, beta" in message


def test_get_unknown_name_with_nothing_registered_says_none() -> None:
    with pytest.raises(MemoryConfigurationError, match="none"):
        load().providers.get("native")
    with pytest.raises(MemoryConfigurationError, match="policy"):
        load().policies.get("missing")
    with pytest.raises(MemoryConfigurationError, match="event sink"):
        load().sinks.get("missing")


def test_policies_sinks_and_profiles_show_up() -> None:
    manager = load(EverythingPlugin)
    assert [r.name for r in manager.policies.all()] == ["no-secrets", "ttl"]
    assert manager.policies.get("no-secrets").description == "blocks secrets"
    assert manager.policies.get("ttl").factory({}) == "ttl-policy"
    assert [r.name for r in manager.sinks.all()] == ["audit-file"]
    assert manager.sinks.get("audit-file").plugin == "EverythingPlugin"
    assert manager.profiles == [("EverythingPlugin", "chat-assistant@1.2.0")]
    assert manager.providers.all() == ()


def test_explicit_plugin_can_be_blocked_by_name() -> None:
    manager = load(ProviderPlugin, EverythingPlugin, blocked=["ProviderPlugin"])
    assert manager.providers.all() == ()
    assert [r.name for r in manager.policies.all()] == ["no-secrets", "ttl"]


def test_plugin_instance_with_method_hooks() -> None:
    class Instance:
        def __init__(self) -> None:
            self.calls = 0

        @hookimpl
        def register_memory_providers(self, register: Register) -> None:
            self.calls += 1
            register("from-instance", _native_factory)

    plugin = Instance()
    manager = load(plugin)
    assert plugin.calls == 0  # the registry asks its hook when first used
    assert manager.providers.get("from-instance").factory is _native_factory
    manager.providers.all()
    assert plugin.calls == 1  # and only then, once


def test_methods_without_hookimpl_marker_are_ignored() -> None:
    class Unmarked:
        @staticmethod
        def register_memory_providers(register: Register) -> None:
            register("sneaky", _native_factory)

    assert load(Unmarked).providers.all() == ()


class SpecnamePlugin:
    """Implementations under other names, told apart by ``specname`` (pluggy's way to
    implement a hook twice in one plugin, or to keep a descriptive function name)."""

    @staticmethod
    @hookimpl(specname="register_memory_providers")
    def providers_of_this_plugin(register: Register) -> None:
        register("gamma", _native_factory, description="registered under a specname")

    @staticmethod
    @hookimpl(specname="register_memory_profiles")
    def profiles_of_this_plugin(register: Callable[[Any], None]) -> None:
        register("a profile source")


def test_implementations_named_by_specname_are_collected() -> None:
    manager = load(SpecnamePlugin)
    assert [r.name for r in manager.providers.all()] == ["gamma"]
    assert manager.providers.get("gamma").plugin == "SpecnamePlugin"
    assert manager.profiles == [("SpecnamePlugin", "a profile source")]


# -- registries filled on first use ------------------------------------------------------


class Counting:
    """Counts the calls of each hook it implements."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}

    def _count(self, hook: str) -> None:
        self.calls[hook] = self.calls.get(hook, 0) + 1

    @hookimpl
    def register_memory_providers(self, register: Register) -> None:
        self._count("providers")
        register("counted", _native_factory)

    @hookimpl
    def register_cli_commands(self, register: Register) -> None:
        self._count("cli_commands")

    @hookimpl
    def register_memory_profiles(self, register: Register) -> None:
        self._count("profiles")
        register("a profile")


def test_each_registry_runs_its_hook_only_when_first_used() -> None:
    plugin = Counting()
    manager = load(plugin)
    assert plugin.calls == {}
    manager.providers.get("counted")
    assert plugin.calls == {"providers": 1}  # the CLI-command hook has not run
    assert [item for _, item in manager.profiles] == ["a profile"]
    assert [item for _, item in manager.profiles] == ["a profile"]
    assert plugin.calls == {"providers": 1, "profiles": 1}
    assert manager.cli_commands.all() == ()
    assert plugin.calls == {"providers": 1, "profiles": 1, "cli_commands": 1}


def test_a_failed_registry_keeps_failing_instead_of_serving_half_of_it() -> None:
    manager = load(ProviderPlugin, DuplicatePlugin)
    for _ in range(2):
        with pytest.raises(MemoryConfigurationError, match="registered twice"):
            manager.providers.get("beta")  # registered before the clash, yet refused


def test_the_first_use_from_two_threads_fills_the_registry_once() -> None:
    import threading

    plugin = Counting()
    manager = load(plugin)
    barrier = threading.Barrier(8)
    seen: list[int] = []

    def first_use() -> None:
        barrier.wait()
        seen.append(len(manager.providers.all()))

    threads = [threading.Thread(target=first_use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == [1] * 8
    assert plugin.calls == {"providers": 1}


@pytest.mark.usefixtures("native_importable")
def test_loading_every_builtin_plugin_imports_no_provider_policy_or_command_module() -> None:
    """Registration is cheap: a provider's modules, a policy's and the service's command
    modules are imported when used (this runs in a fresh interpreter)."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from governed_memory.plugins import PluginManager\n"
        "m = PluginManager.load()\n"
        "m.providers.all(); m.policies.all(); m.sinks.all(); m.embedders.all()\n"
        "heavy = sorted(n for n in sys.modules if n.startswith(("
        "'numpy', 'governed_memory_native.provider', 'governed_memory_native.sqlite',"
        "'governed_memory_mem0.provider', 'governed_memory_policies.pii',"
        "'governed_memory_policies.secret', 'governed_memory_service.cli',"
        "'governed_memory_embedders.hashing', 'governed_memory.manager')))\n"
        "print(heavy)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.strip() == "[]", done.stdout
