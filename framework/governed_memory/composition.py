"""Composition: from a profile (or a domain pack, or a provider name) to the parts a
manager governs.

The manager is the API an application calls; what it is built from is decided here:
which provider the profile names and its config, the policies in order and their
configuration, the event sinks of ``[audit]``, the search cache and the fallback
provider around the provider. Keeping it apart means the manager imports no plugin
registry, profile loader or wrapper, and the service and framework adapters can compose
a manager the same way without going through its constructor's arguments.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
from opentelemetry.metrics import MeterProvider

from governed_memory.clock import Clock
from governed_memory.errors import MemoryConfigurationError
from governed_memory.events import EventBus, EventSink
from governed_memory.language_models import LanguageModel
from governed_memory.plugins import PluginManager, Registration
from governed_memory.policy import MemoryPolicy
from governed_memory.profile_models import build_language_model
from governed_memory.profile_stores import build_store
from governed_memory.profiles.build import (
    build_components,
    build_rate_windows,
    wrap_with_cache,
    wrap_with_fallback,
)
from governed_memory.profiles.packs import PackRegistry, ResolvedPack
from governed_memory.profiles.registry import ProfileRegistry
from governed_memory.profiles.resolve import ProfileSource, resolve_profile
from governed_memory.profiles.spec import MemoryProfileSpec
from governed_memory.provider import MemoryProvider
from governed_memory.rates import RateWindows
from governed_memory.sinks import build_sinks, default_base_dir
from governed_memory.tiers.blocks import BlockStore


@attrs.frozen(slots=True)
class Composition:
    """What a manager built from one profile governs."""

    spec: MemoryProfileSpec
    provider: MemoryProvider
    """The profile's provider, inside the search cache (when enabled) and the
    fallback (when configured)."""
    policies: tuple[MemoryPolicy, ...]
    policy_configuration: Mapping[str, Mapping[str, Any]]
    sinks: tuple[EventSink, ...]
    rate_windows: RateWindows | None = None
    """Where the quotas policy counts write rates (``[quotas] rate_store``): the
    provider's own windows, a registered store's (closed with the manager) or this
    process's."""
    language_model: LanguageModel | None = None
    """The model ``[stores.language_model]`` names (for ``remember``), if any."""
    block_store: BlockStore | None = None
    """The store ``[stores.blocks]`` names (the memory blocks'), unstarted, if any."""

    def attach(self, events: EventBus) -> None:
        """Point the cache's events at the manager's bus (built after the cache), so a
        fail-closed trail covers them too."""
        if self.spec.cache.enabled:
            from governed_memory.cache import attach_cache_events

            attach_cache_events(self.provider, events)


def provider_from_plugins(name: str, config: Mapping[str, Any] | None,
                          plugins: PluginManager | None, clock: Clock) -> MemoryProvider:
    """An unstarted provider registered by a plugin (``native``, …), by name."""
    registration = (plugins or PluginManager.load()).providers.get(name)
    provider: MemoryProvider = registration.factory(dict(config or {}), clock)
    return provider


def compose_profile(profile: ProfileSource, *, plugins: PluginManager,
                    clock: Clock, sinks: Sequence[EventSink] | None = None,
                    provider_config_overrides: Mapping[str, Any] | None = None,
                    meter_provider: MeterProvider | None = None,
                    sinks_base_dir: str | os.PathLike[str] | None = None) -> Composition:
    """Everything ``GovernedMemoryManager.from_profile`` documents: the profile a
    reference or a file names (``resolve_profile``), or taken as given; ``sinks=None``
    building the sinks its ``[audit]`` names, relative paths under ``sinks_base_dir``
    (else ``default_base_dir``); ``provider_config_overrides`` replacing provider
    config keys without changing the profile's revision."""
    spec = resolve_profile(profile, plugins)
    if sinks is None:
        base = (sinks_base_dir if sinks_base_dir is not None
                else default_base_dir(spec, provider_config_overrides))
        chosen = build_sinks(spec, plugins, base_dir=base,
                             provider_config_overrides=provider_config_overrides)
    else:
        chosen = tuple(sinks)
    if spec.audit.fail_closed and not chosen:
        # The profile itself names a trail (its load checks that), so only a caller's
        # empty choice gets here; a strict bus without a sink would refuse everything.
        raise MemoryConfigurationError(
            f"profile {spec.key} has [audit] fail_closed = true, but sinks=() leaves the "
            "manager nowhere to record, so every operation would be refused; pass the "
            "sinks to record into, or sinks=None for those the profile names")
    parts = build_components(spec, plugins, clock, provider_config_overrides)
    provider = parts.provider
    if spec.cache.enabled:
        provider = wrap_with_cache(provider, spec, plugins, clock, EventBus(chosen),
                                   meter_provider=meter_provider)
    # Outside the cache: a degraded (fallback) answer is never cached.
    provider = wrap_with_fallback(provider, spec, plugins, clock)
    return Composition(spec, provider, tuple(parts.policies),
                       parts.policy_configuration, chosen,
                       rate_windows=build_rate_windows(provider, spec, plugins),
                       language_model=build_language_model(spec, plugins),
                       block_store=build_block_store(spec, plugins, clock))


def build_block_store(spec: MemoryProfileSpec, plugins: PluginManager,
                      clock: Clock) -> BlockStore | None:
    """The store the profile's ``[stores.blocks]`` names, built and unstarted; ``None``
    when it names none. A problem names its path (``stores.blocks.kind: ...``)."""

    def lookup(kind: str) -> Registration[Callable[[Mapping[str, Any]], BlockStore]]:
        found = plugins.block_stores.get(kind)

        def factory(config: Mapping[str, Any]) -> BlockStore:
            return found.factory(config, clock)

        return Registration(found.name, factory, found.description, found.plugin)

    return build_store(spec, "blocks", lookup, BlockStore, "block store")


def resolve_pack(pack: str, use: str,
                 plugins: PluginManager) -> tuple[MemoryProfileSpec, ResolvedPack]:
    """The profile a domain pack (``"support-desk@1.0.0"``) selects for one use."""
    profiles = ProfileRegistry.from_plugins(plugins)
    resolved = PackRegistry.from_plugins(plugins).resolve(pack, profiles)
    return profiles.get(resolved.profile_for(use).ref), resolved
