"""Turning a profile into the parts of a manager: provider, policies, deadline, ref."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from governed_memory.clock import Clock
from governed_memory.events import EventBus
from governed_memory.operation_context import ProfileRef
from governed_memory.profiles.loading import (
    build_policies,
    build_provider,
    check_capabilities,
)
from governed_memory.profiles.spec import RATE_STORE_PROCESS, CacheStore, MemoryProfileSpec

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider

    from governed_memory.plugins import PluginManager
    from governed_memory.policy import MemoryPolicy
    from governed_memory.provider import MemoryProvider
    from governed_memory.rates import RateWindows


@attrs.frozen(slots=True)
class ProfileComponents:
    spec: MemoryProfileSpec
    provider: MemoryProvider
    policies: tuple[MemoryPolicy, ...]
    policy_configuration: Mapping[str, Mapping[str, Any]]
    """What each policy was configured with, folded into the policy revision."""

    @property
    def ref(self) -> ProfileRef:
        return self.spec.ref


def wrap_with_cache(provider: MemoryProvider, spec: MemoryProfileSpec, plugins: PluginManager,
                    clock: Clock, events: EventBus,
                    meter_provider: MeterProvider | None = None) -> MemoryProvider:
    """The profile's ``[cache]``: a read-through search cache around the provider.

    ``store = "memory"`` is the bounded in-process store; any other name is a store
    registered by a plugin (``redis``), configured by the profile's ``[stores.cache]``.
    """
    from governed_memory.cache import CachedMemoryProvider, InMemoryCacheStore
    from governed_memory.cache.store import CacheStore as Store

    section = spec.cache
    store: Store
    if section.store is CacheStore.MEMORY:
        if provider.revisions is None:
            # A process-local store cannot see other processes' writes; only the
            # provider's own scope revisions can tell it (docs/search-cache.md).
            from governed_memory.errors import MemoryConfigurationError

            raise MemoryConfigurationError(
                f"cache.store: 'memory' needs a provider that keeps scope revisions "
                f"(capability 'scope_revisions'); {getattr(provider, 'name', 'this provider')} "
                "keeps none, so each process's cache would miss the others' writes: use "
                "store = \"redis\" (every process through it) or turn the cache off")
        store = InMemoryCacheStore(max_entries=section.max_entries)
    else:
        config = spec.stores["cache"].config if "cache" in spec.stores else {}
        store = plugins.cache_stores.get(section.store.value).factory(dict(config))
    return CachedMemoryProvider(provider, store, events=events, clock=clock,
                                ttl_s=section.ttl_s, meter_provider=meter_provider)


def registered_rate_windows(spec: MemoryProfileSpec,
                            plugins: PluginManager) -> RateWindows | None:
    """The registered rate store ``[quotas] rate_store`` names, built from
    ``[stores.rates]`` without I/O (so loading a profile checks its name and keys);
    ``None`` for the built-in ``"provider"`` and ``"process"``."""
    name = spec.quotas.registered_rate_store
    if name is None:
        return None
    from governed_memory.errors import MemoryConfigurationError
    from governed_memory.profiles.loading import _plain, _problem
    from governed_memory.rates import RateWindows

    try:
        registration = plugins.rate_stores.get(name)
    except MemoryConfigurationError as exc:
        raise _problem(spec, "quotas.rate_store", str(exc)) from None
    config = _plain(spec.stores["rates"].config) if "rates" in spec.stores else {}
    try:
        windows = registration.factory(config)
    except MemoryConfigurationError as exc:
        raise _problem(spec, "stores.rates.config", str(exc)) from None
    if not isinstance(windows, RateWindows):
        raise _problem(spec, "quotas.rate_store", f"rate store {name!r} built "
                       f"{type(windows).__name__}, not governed_memory.rates.RateWindows")
    return windows


def build_rate_windows(provider: MemoryProvider, spec: MemoryProfileSpec,
                       plugins: PluginManager) -> RateWindows:
    """Where the profile's writes-per-minute windows are counted (``[quotas]
    rate_store``): a registered store; this process only (``"process"``); or
    (``"provider"``, the default) the provider's own windows, kept in its storage so
    every process sharing it counts into them, else this process's, which warn once
    when first used (docs/deployment.md, "Rate windows")."""
    registered = registered_rate_windows(spec, plugins)
    if registered is not None:
        return registered
    from governed_memory.rates import ProcessRateWindows, default_rate_windows

    if spec.quotas.rate_store == RATE_STORE_PROCESS:
        return ProcessRateWindows()
    return default_rate_windows(provider)


def wrap_with_fallback(provider: MemoryProvider, spec: MemoryProfileSpec,
                       plugins: PluginManager, clock: Clock) -> MemoryProvider:
    """The profile's ``[fallback]``: reads fall back to that provider while the primary
    is unavailable (``governed_memory.fallback``); without one, ``provider`` as it is.
    The fallback gets the profile's indexing settings too, so it ranks alike."""
    name = spec.fallback.provider
    if name is None:
        return provider
    from governed_memory.errors import MemoryConfigurationError
    from governed_memory.fallback import FallbackProvider
    from governed_memory.indexing import configure_from_profile
    from governed_memory.profiles.loading import _plain, _problem

    try:
        registration = plugins.providers.get(name)
    except MemoryConfigurationError as exc:
        raise _problem(spec, "fallback.provider", str(exc)) from None
    try:
        fallback: MemoryProvider = registration.factory(_plain(spec.fallback.config), clock)
        configure_from_profile(fallback, spec, plugins)
    except MemoryConfigurationError as exc:
        raise _problem(spec, "fallback.config", str(exc)) from None
    return FallbackProvider(provider, fallback)


def build_components(spec: MemoryProfileSpec, plugins: PluginManager, clock: Clock,
                     provider_config_overrides: Mapping[str, Any] | None = None
                     ) -> ProfileComponents:
    """Build what ``spec`` names. ``provider_config_overrides`` replace keys of the
    provider's config for this process only (a database path, a test backend); they do
    not change the profile's revision, since they say where, not how, memory is kept."""
    provider = build_provider(spec, plugins, provider_config_overrides, clock)
    check_capabilities(spec, provider.capabilities())
    policies = tuple(build_policies(spec, plugins))
    configuration = {name: spec.policies.extra.get(name, {}) for name in spec.policies.enabled}
    return ProfileComponents(spec, provider, policies, configuration)
