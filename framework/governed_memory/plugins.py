"""The typed facade over pluggy: load plugins once, then look things up by name.

Built-in providers and policies arrive through the same ``governed_memory`` entry
points as third-party ones. ``GOVERNED_MEMORY_BLOCK_PLUGINS`` (comma-separated entry
point names) keeps a plugin from loading at all, and a hook implementation that names
no known hook stops start-up instead of being silently ignored.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar

import attrs
import pluggy

from governed_memory import hookspecs
from governed_memory.errors import MemoryConfigurationError

BLOCK_ENV = "GOVERNED_MEMORY_BLOCK_PLUGINS"

F = TypeVar("F")


@attrs.frozen(slots=True)
class Registration(Generic[F]):
    name: str
    factory: F
    description: str
    plugin: str


class _Registry(Generic[F]):
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, Registration[F]] = {}

    def register_from(self, plugin: str) -> Callable[..., None]:
        def register(name: str, factory: F, description: str = "") -> None:
            if not isinstance(name, str) or not name:
                raise MemoryConfigurationError(f"{plugin}: {self.kind} name must be a string")
            existing = self._entries.get(name)
            if existing is not None:
                raise MemoryConfigurationError(
                    f"{self.kind} {name!r} registered twice (by {existing.plugin} and {plugin})"
                )
            self._entries[name] = Registration(name, factory, description, plugin)

        return register

    def get(self, name: str) -> Registration[F]:
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(sorted(self._entries)) or "none"
            raise MemoryConfigurationError(
                f"unknown {self.kind} {name!r}; registered: {known}"
            ) from None

    def all(self) -> tuple[Registration[F], ...]:
        return tuple(self._entries[name] for name in sorted(self._entries))


class PluginManager:
    """Loads plugins and holds what they registered.

    ``PluginManager.load()`` is the normal path. Tests build one with
    ``entry_points=False`` and pass plugin objects explicitly.
    """

    def __init__(self) -> None:
        self._pm = pluggy.PluginManager(hookspecs.PROJECT)
        self._pm.add_hookspecs(hookspecs)
        self.providers: _Registry[Any] = _Registry("provider")
        self.policies: _Registry[Any] = _Registry("policy")
        self.sinks: _Registry[Any] = _Registry("event sink")
        self.cache_stores: _Registry[Any] = _Registry("cache store")
        self.embedders: _Registry[Any] = _Registry("embedder")
        self.turn_stores: _Registry[Any] = _Registry("turn store")
        self.working_state_stores: _Registry[Any] = _Registry("working-state store")
        self.language_models: _Registry[Any] = _Registry("language model")
        self.cli_commands: _Registry[Any] = _Registry("CLI command")
        """``click.Command`` objects from ``register_cli_commands``."""
        self.profiles: list[tuple[str, Any]] = []
        """(plugin name, what it registered) from ``register_memory_profiles``."""
        self.packs: list[tuple[str, Any]] = []
        """(plugin name, ``DomainPack``) from ``register_domain_packs``."""

    @classmethod
    def load(cls, plugins: Iterable[object] = (), *, entry_points: bool = True,
             blocked: Iterable[str] | None = None) -> PluginManager:
        manager = cls()
        block = set(blocked) if blocked is not None else _blocked_from_env()
        for name in block:
            manager._pm.set_blocked(name)
        try:
            if entry_points:
                manager._pm.load_setuptools_entrypoints(hookspecs.ENTRY_POINT_GROUP)
                from governed_memory.audit import plugin as builtin  # the `audit` sink

                manager._pm.register(builtin, name=builtin.PLUGIN_NAME)
            for plugin in plugins:
                manager._pm.register(plugin)
        except pluggy.PluginValidationError as exc:
            raise MemoryConfigurationError(f"plugin {exc.plugin!r}: {exc}") from None
        except ImportError as exc:
            raise MemoryConfigurationError(f"a governed_memory plugin failed to import: {exc}"
                                           ) from None
        manager._collect()
        return manager

    @property
    def plugin_names(self) -> tuple[str, ...]:
        return tuple(sorted(name for name, plugin in self._pm.list_name_plugin()
                            if name and plugin is not None))

    def _collect(self) -> None:
        try:
            self._pm.check_pending()
        except pluggy.PluginValidationError as exc:
            raise MemoryConfigurationError(f"plugin {exc.plugin!r}: {exc}") from None
        # Each implementation is called on its own (through pluggy's own record of it,
        # so ``@hookimpl(specname=...)`` counts like a same-named function), and what it
        # registers names its plugin.
        for hook_name, registry in (
            ("register_memory_providers", self.providers),
            ("register_memory_policies", self.policies),
            ("register_event_sinks", self.sinks),
            ("register_cache_stores", self.cache_stores),
            ("register_embedders", self.embedders),
            ("register_turn_stores", self.turn_stores),
            ("register_working_state_stores", self.working_state_stores),
            ("register_language_models", self.language_models),
            ("register_cli_commands", self.cli_commands),
        ):
            for impl in self._implementations(hook_name):
                impl.function(register=registry.register_from(impl.plugin_name))
        for hook_name, items in (("register_memory_profiles", self.profiles),
                                 ("register_domain_packs", self.packs)):
            for impl in self._implementations(hook_name):
                impl.function(
                    register=lambda item, _p=impl.plugin_name, _to=items: _to.append((_p, item))
                )

    def _implementations(self, hook_name: str) -> list[pluggy.HookImpl]:
        """The hook's implementations in registration order (pluggy calls them in the
        reverse order; a registry refuses duplicates either way)."""
        return list(getattr(self._pm.hook, hook_name).get_hookimpls())


def _blocked_from_env(environ: Mapping[str, str] | None = None) -> set[str]:
    raw = (environ if environ is not None else os.environ).get(BLOCK_ENV, "")
    return {part.strip() for part in raw.split(",") if part.strip()}
