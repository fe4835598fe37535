"""The typed facade over pluggy: load plugins once, then look things up by name.

Built-in providers and policies arrive through the same ``governed_memory`` entry
points as third-party ones. ``GOVERNED_MEMORY_BLOCK_PLUGINS`` (comma-separated entry
point names) keeps a plugin from loading at all, and a hook implementation that names
no known hook stops start-up instead of being silently ignored.

``load()`` imports the plugin modules and checks their hook implementations; each
registry asks its hook for registrations the first time it is used. A process that
only needs a provider and its policies (one CLI command) never runs the hooks that
register CLI commands or language models, whose implementations may import whole
command modules. So a registration problem (a name registered twice, a nameless one)
is raised by the first lookup in that registry, as a ``MemoryConfigurationError``
like any unknown name, and raised again by every later one.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import attrs
import pluggy

import governed_memory.hookspecs as hookspecs
import governed_memory.plugin_discovery as plugin_discovery
from governed_memory.errors import MemoryConfigurationError

if TYPE_CHECKING:
    import click

    from governed_memory.factories import (
        BlockStoreFactory,
        CacheStoreFactory,
        EmbedderFactory,
        EventSinkFactory,
        LanguageModelFactory,
        PolicyFactory,
        ProviderFactory,
        RateStoreFactory,
        TurnStoreFactory,
        WorkingStateStoreFactory,
    )

BLOCK_ENV = "GOVERNED_MEMORY_BLOCK_PLUGINS"

F = TypeVar("F")
T = TypeVar("T")


@attrs.frozen(slots=True)
class Registration(Generic[F]):
    name: str
    factory: F
    description: str
    plugin: str


class _Filled(Generic[T]):
    """Something a hook fills on first use: once, under a lock (a sync manager's loop
    thread and the caller's may both be first), and a failed fill is remembered, never
    retried into a half-filled state."""

    def __init__(self, fill: Callable[[T], None] | None) -> None:
        self._fill = fill
        self._lock = threading.Lock()
        self._failure: str | None = None

    def _ensure(self, target: T, reset: Callable[[], None]) -> None:
        if self._fill is None and self._failure is None:
            return
        with self._lock:
            if self._failure is not None:
                raise MemoryConfigurationError(self._failure)
            fill, self._fill = self._fill, None
            if fill is None:
                return
            try:
                fill(target)
            except MemoryConfigurationError as exc:
                reset()
                self._failure = str(exc)
                raise


class _Registry(_Filled["_Registry[F]"], Generic[F]):
    def __init__(self, kind: str, fill: Callable[[_Registry[F]], None] | None = None) -> None:
        super().__init__(fill)
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

    def _filled(self) -> dict[str, Registration[F]]:
        self._ensure(self, self._entries.clear)
        return self._entries

    def get(self, name: str) -> Registration[F]:
        entries = self._filled()
        try:
            return entries[name]
        except KeyError:
            known = ", ".join(sorted(entries)) or "none"
            raise MemoryConfigurationError(
                f"unknown {self.kind} {name!r}; registered: {known}"
            ) from None

    def all(self) -> tuple[Registration[F], ...]:
        entries = self._filled()
        return tuple(entries[name] for name in sorted(entries))


class _Collected(_Filled[list[tuple[str, Any]]]):
    """(plugin name, item) pairs from a hook that registers items, not named factories."""

    def __init__(self, fill: Callable[[list[tuple[str, Any]]], None]) -> None:
        super().__init__(fill)
        self._items: list[tuple[str, Any]] = []

    def items(self) -> list[tuple[str, Any]]:
        self._ensure(self._items, self._items.clear)
        return self._items


class PluginManager:
    """Loads plugins and holds what they registered.

    ``PluginManager.load()`` is the normal path. Tests build one with
    ``entry_points=False`` and pass plugin objects explicitly.
    """

    def __init__(self) -> None:
        self._pm = pluggy.PluginManager(hookspecs.PROJECT)
        self._pm.add_hookspecs(hookspecs)
        self.providers: _Registry[ProviderFactory] = self._registry(
            "provider", "register_memory_providers")
        self.policies: _Registry[PolicyFactory] = self._registry(
            "policy", "register_memory_policies")
        self.sinks: _Registry[EventSinkFactory] = self._registry(
            "event sink", "register_event_sinks")
        self.cache_stores: _Registry[CacheStoreFactory] = self._registry(
            "cache store", "register_cache_stores")
        self.embedders: _Registry[EmbedderFactory] = self._registry(
            "embedder", "register_embedders")
        self.rate_stores: _Registry[RateStoreFactory] = self._registry(
            "rate store", "register_rate_stores")
        """Shared write-rate windows (``governed_memory.rates.RateWindows``) by name."""
        self.turn_stores: _Registry[TurnStoreFactory] = self._registry(
            "turn store", "register_turn_stores")
        self.working_state_stores: _Registry[WorkingStateStoreFactory] = self._registry(
            "working-state store", "register_working_state_stores")
        self.block_stores: _Registry[BlockStoreFactory] = self._registry(
            "block store", "register_block_stores")
        self.language_models: _Registry[LanguageModelFactory] = self._registry(
            "language model", "register_language_models")
        self.cli_commands: _Registry[click.Command] = self._registry(
            "CLI command", "register_cli_commands")
        """``click.Command`` objects from ``register_cli_commands``."""
        self._profiles = self._collected("register_memory_profiles")
        self._packs = self._collected("register_domain_packs")

    @property
    def profiles(self) -> list[tuple[str, Any]]:
        """(plugin name, what it registered) from ``register_memory_profiles``."""
        return self._profiles.items()

    @property
    def packs(self) -> list[tuple[str, Any]]:
        """(plugin name, ``DomainPack``) from ``register_domain_packs``."""
        return self._packs.items()

    @classmethod
    def load(cls, plugins: Iterable[object] = (), *, entry_points: bool = True,
             blocked: Iterable[str] | None = None) -> PluginManager:
        manager = cls()
        block = set(blocked) if blocked is not None else _blocked_from_env()
        for name in block:
            manager._pm.set_blocked(name)
        try:
            if entry_points:
                manager._load_entry_points()
                from governed_memory.audit import plugin as builtin  # the `audit` sink

                manager._pm.register(builtin, name=builtin.PLUGIN_NAME)
            for plugin in plugins:
                manager._pm.register(plugin)
            manager._pm.check_pending()
        except pluggy.PluginValidationError as exc:
            raise MemoryConfigurationError(f"plugin {exc.plugin!r}: {exc}") from None
        except ImportError as exc:
            raise MemoryConfigurationError(f"a governed_memory plugin failed to import: {exc}"
                                           ) from None
        return manager

    def _load_entry_points(self) -> None:
        """Register every ``governed_memory`` entry point not blocked, the first of a
        name winning (see :mod:`governed_memory.plugin_discovery`)."""
        found = plugin_discovery.entry_points(hookspecs.ENTRY_POINT_GROUP)
        if found is None:  # a path entry only importlib.metadata can read
            self._pm.load_setuptools_entrypoints(hookspecs.ENTRY_POINT_GROUP)
            return
        for name, value in found:
            if self._pm.is_blocked(name) or self._pm.has_plugin(name):
                continue
            self._pm.register(plugin_discovery.load(value), name=name)

    @property
    def plugin_names(self) -> tuple[str, ...]:
        return tuple(sorted(name for name, plugin in self._pm.list_name_plugin()
                            if name and plugin is not None))

    def _registry(self, kind: str, hook_name: str) -> _Registry[F]:
        """A registry its hook fills on first use. Each implementation is called on its
        own (through pluggy's own record of it, so ``@hookimpl(specname=...)`` counts
        like a same-named function), and what it registers names its plugin."""

        def fill(registry: _Registry[F]) -> None:
            for impl in self._implementations(hook_name):
                impl.function(register=registry.register_from(impl.plugin_name))

        return _Registry(kind, fill)

    def _collected(self, hook_name: str) -> _Collected:
        def fill(items: list[tuple[str, Any]]) -> None:
            for impl in self._implementations(hook_name):
                impl.function(
                    register=lambda item, _p=impl.plugin_name: items.append((_p, item)))

        return _Collected(fill)

    def _implementations(self, hook_name: str) -> list[pluggy.HookImpl]:
        """The hook's implementations in registration order (pluggy calls them in the
        reverse order; a registry refuses duplicates either way)."""
        return list(getattr(self._pm.hook, hook_name).get_hookimpls())


def _blocked_from_env(environ: Mapping[str, str] | None = None) -> set[str]:
    raw = (environ if environ is not None else os.environ).get(BLOCK_ENV, "")
    return {part.strip() for part in raw.split(",") if part.strip()}
