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

    ``factory(config: Mapping[str, Any]) -> MemoryPolicy``.
    """


@hookspec
def register_event_sinks(register: Callable[..., None]) -> None:
    """Register event sink factories: ``register(name, factory, description="")``.

    ``factory(config: Mapping[str, Any]) -> EventSink``.
    """


@hookspec
def register_memory_profiles(register: Callable[..., None]) -> None:
    """Register versioned profiles: ``register(profile)`` with a profile spec or TOML path."""


def _spec_names() -> frozenset[str]:
    return frozenset(name for name, value in globals().items()
                     if name.startswith("register_") and callable(value))


HOOK_NAMES: frozenset[str] = _spec_names()
