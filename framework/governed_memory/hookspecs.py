"""Every extension point of governed-memory, in one module.

Each hook hands the plugin a ``register`` callable rather than asking for a return
value (the way ``llm`` and ``datasette`` do it): a plugin can register several things,
and the registry, not the plugin, decides what a duplicate name means.
"""

from __future__ import annotations

from collections.abc import Callable

import pluggy

PROJECT = "governed_memory"
ENTRY_POINT_GROUP = "governed_memory"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def register_memory_providers(register: Callable[..., None]) -> None:
    """Register provider factories: ``register(name, factory, description="")``.

    ``factory(config: Mapping[str, Any], clock: Clock) -> MemoryProvider`` builds an
    unstarted provider; it must not do I/O (``start`` does).
    """


@hookspec
def register_memory_policies(register: Callable[..., None]) -> None:
    """Register policy factories: ``register(name, factory, description="")``.

    ``factory(config: Mapping[str, Any], profile: MemoryProfileSpec) -> MemoryPolicy``
    builds the policy for one profile. ``config`` is the profile's
    ``[policies.extra.<name>]`` table (empty when absent): that is how a third-party
    policy is configured. Built-in policies read their own section of ``profile``
    instead (retention reads ``profile.retention``). A factory raises
    ``MemoryConfigurationError`` for a configuration it cannot use; it runs once when a
    profile is loaded, to validate, and again for every manager built from it. The
    policy's ``name`` must be the registered name, and its ``revision`` must change
    whenever its decisions could (code or configuration).
    """


@hookspec
def register_event_sinks(register: Callable[..., None]) -> None:
    """Register event sink factories: ``register(name, factory, description="")``.

    ``factory(config: Mapping[str, Any]) -> EventSink``.
    """


@hookspec
def register_memory_profiles(register: Callable[..., None]) -> None:
    """Register versioned profiles: ``register(profile)`` with a ``MemoryProfileSpec``,
    the path of a TOML file (``str``, ``Path`` or an ``importlib.resources`` file) or a
    mapping in the TOML shape. The same ``id@version`` twice with different content is
    an error."""


@hookspec
def register_domain_packs(register: Callable[..., None]) -> None:
    """Register domain packs: ``register(DomainPack(name, version, selections))``, where
    ``selections`` maps each use (``chat``, ``agent``, …) to a pinned ``id@version``."""


@hookspec
def register_cache_stores(register: Callable[..., None]) -> None:
    """Register search-cache stores: ``register(name, factory, description="")``.

    ``factory(config: Mapping[str, Any]) -> CacheStore`` builds an unconnected store; a
    profile's ``[cache] store = "<name>"`` picks it, with ``[stores.cache]`` as config.
    The bounded in-memory store is built in and needs no plugin.
    """


@hookspec
def register_rate_stores(register: Callable[..., None]) -> None:
    """Register shared write-rate window stores: ``register(name, factory, description="")``.

    ``factory(config: Mapping[str, Any]) -> RateWindows`` (``governed_memory.rates``)
    builds unconnected windows that every process and node of a deployment counts into;
    a profile's ``[quotas] rate_store = "<name>"`` picks it, with ``[stores.rates]`` as
    config (unknown keys refused). ``"provider"`` (the provider's own windows) and
    ``"process"`` are built in and need no plugin.
    """


@hookspec
def register_embedders(register: Callable[..., None]) -> None:
    """Register text embedders: ``register(name, factory, description="")``.

    ``factory(config: Mapping[str, Any]) -> Embedder`` builds an embedder that declares
    its ``id``, ``model_revision`` and ``dimension``; a profile's
    ``[stores.embedder] kind = "<name>"`` picks it. Loading a model happens on first
    use, never at registration.
    """


@hookspec
def register_turn_stores(register: Callable[..., None]) -> None:
    """Register conversation-turn stores (the short-term tier):
    ``register(name, factory, description="")``.

    ``factory(config: Mapping[str, Any], clock: Clock) -> TurnStore`` builds an unstarted
    store; a profile's ``[stores.turns] kind = "<name>"`` picks it.
    """


@hookspec
def register_working_state_stores(register: Callable[..., None]) -> None:
    """Register working-state stores (per-run scratch with a TTL):
    ``register(name, factory, description="")``.

    ``factory(config: Mapping[str, Any], clock: Clock) -> WorkingStateStore``; a
    profile's ``[stores.working_state] kind = "<name>"`` picks it.
    """


@hookspec
def register_block_stores(register: Callable[..., None]) -> None:
    """Register memory-block stores (the agent-editable blocks a profile declares):
    ``register(name, factory, description="")``.

    ``factory(config: Mapping[str, Any], clock: Clock) -> BlockStore``
    (``governed_memory.tiers.blocks``) builds an unstarted store; a profile's
    ``[stores.blocks] kind = "<name>"`` picks it. Writes are compare-and-set on the
    block's version, across every process that shares the store.
    """


@hookspec
def register_language_models(register: Callable[..., None]) -> None:
    """Register language-model adapters used by the context builder and extraction:
    ``register(name, factory, description="")``.

    ``factory(config: Mapping[str, Any]) -> LanguageModel``. No model is ever required:
    every feature that uses one degrades without it.
    """


@hookspec
def register_cli_commands(register: Callable[..., None]) -> None:
    """Register subcommands of the ``governed-memory`` command:
    ``register(name, command, description="")`` with a ``click.Command`` (or group).

    The command line loads plugins only when it is asked for a command it does not
    build in, so a plugin command costs nothing to the built-in ones or to ``--help``;
    a name that is a built-in command is refused when plugin commands load. Import
    heavy or optional dependencies inside the command's function, never at module
    level: loading plugins for any other purpose must not need them.
    """


def _spec_names() -> frozenset[str]:
    return frozenset(name for name, value in globals().items()
                     if name.startswith("register_") and callable(value))


HOOK_NAMES: frozenset[str] = _spec_names()
