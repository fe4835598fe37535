"""Every hookspec is documented for platform teams and exercised here, the way
datasette keeps its plugin hooks honest: a new hook without a row in
``docs/platform-teams.md`` or a case below fails this module."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from governed_memory import hookimpl
from governed_memory.hookspecs import HOOK_NAMES
from governed_memory.plugins import PluginManager
from governed_memory.profiles.packs import DomainPack

DOCS = Path(__file__).resolve().parents[2] / "docs" / "platform-teams.md"

SENTINEL = object()


def _factory(*_: Any) -> object:
    return SENTINEL


def _registry_case(attribute: str) -> tuple[Callable[[Callable[..., None]], None],
                                            Callable[[PluginManager], object]]:
    def register(register: Callable[..., None]) -> None:
        register("acme", _factory, description="from the test")

    def registered(plugins: PluginManager) -> object:
        entry = getattr(plugins, attribute).get("acme")
        assert entry.description == "from the test"
        assert entry.plugin in plugins.plugin_names
        return entry.factory({}, None)

    return register, registered


PACK = DomainPack("acme-pack", "1.0.0", {"chat": "chat-assistant@1.0.0"})
PROFILE = {"id": "acme-profile", "version": "1.0.0"}


def _listed(attribute: str, item: object) -> tuple[Callable[[Callable[..., None]], None],
                                                    Callable[[PluginManager], object]]:
    def register(register: Callable[..., None]) -> None:
        register(item)

    def registered(plugins: PluginManager) -> object:
        ((plugin, got),) = getattr(plugins, attribute)
        assert plugin in plugins.plugin_names and got == item
        return SENTINEL

    return register, registered


CASES = {
    "register_memory_providers": _registry_case("providers"),
    "register_memory_policies": _registry_case("policies"),
    "register_event_sinks": _registry_case("sinks"),
    "register_cache_stores": _registry_case("cache_stores"),
    "register_rate_stores": _registry_case("rate_stores"),
    "register_embedders": _registry_case("embedders"),
    "register_turn_stores": _registry_case("turn_stores"),
    "register_working_state_stores": _registry_case("working_state_stores"),
    "register_block_stores": _registry_case("block_stores"),
    "register_language_models": _registry_case("language_models"),
    "register_cli_commands": _registry_case("cli_commands"),
    "register_memory_profiles": _listed("profiles", PROFILE),
    "register_domain_packs": _listed("packs", PACK),
}


def test_every_hook_has_a_case() -> None:
    assert set(CASES) == set(HOOK_NAMES)


def test_every_hook_is_a_row_of_the_platform_teams_hook_table() -> None:
    text = DOCS.read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `(register_[a-z_]+)` \|", text, re.MULTILINE))
    assert rows == set(HOOK_NAMES)


@pytest.mark.parametrize("hook", sorted(HOOK_NAMES))
def test_a_plugin_implementing_the_hook_is_collected(hook: str) -> None:
    register_with, registered = CASES[hook]

    class Plugin:
        pass

    # A plugin object with exactly this one hook, named as pluggy names it.
    setattr(Plugin, hook, staticmethod(hookimpl(specname=hook)(register_with)))
    plugins = PluginManager.load([Plugin()], entry_points=False)
    assert registered(plugins) is SENTINEL
