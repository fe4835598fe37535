"""Turning a profile into the parts of a manager (provider, policies, deadline, ref),
and proving before that it can be built here against the registered plugins."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from governed_memory.cache import CachedMemoryProvider, InMemoryCacheStore
from governed_memory.cache.store import CacheStore as Store
from governed_memory.capabilities import Capabilities
from governed_memory.clock import Clock, SystemClock
from governed_memory.dedup import DedupMode
from governed_memory.errors import MemoryConfigurationError
from governed_memory.events import EventBus
from governed_memory.fallback import FallbackProvider
from governed_memory.operation_context import ProfileRef
from governed_memory.profile_indexing import configure_from_profile
from governed_memory.profile_stores import plain_config
from governed_memory.profiles.convert import ProfileLoadError
from governed_memory.profiles.spec import RATE_STORE_PROCESS, CacheStore, MemoryProfileSpec
from governed_memory.rates import ProcessRateWindows, RateWindows, default_rate_windows
from governed_memory.sinks import build_sinks

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider

    from governed_memory.plugins import PluginManager
    from governed_memory.policy import MemoryPolicy
    from governed_memory.provider import MemoryProvider


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

    section = spec.cache
    store: Store
    if section.store is CacheStore.MEMORY:
        if provider.revisions is None:
            # A process-local store cannot see other processes' writes; only the
            # provider's own scope revisions can tell it (docs/search-cache.md).

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

    try:
        registration = plugins.rate_stores.get(name)
    except MemoryConfigurationError as exc:
        raise _problem(spec, "quotas.rate_store", str(exc)) from None
    config = plain_config(spec.stores["rates"].config) if "rates" in spec.stores else {}
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

    try:
        registration = plugins.providers.get(name)
    except MemoryConfigurationError as exc:
        raise _problem(spec, "fallback.provider", str(exc)) from None
    try:
        fallback: MemoryProvider = registration.factory(plain_config(spec.fallback.config), clock)
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


# -- against the registered plugins ---------------------------------------------------------


def build_provider(spec: MemoryProfileSpec, plugins: PluginManager,
                   overrides: Mapping[str, Any] | None = None,
                   clock: Any = None) -> MemoryProvider:
    """The profile's provider, unstarted; a bad name or config names its path."""
    try:
        registration = plugins.providers.get(spec.provider.name)
    except MemoryConfigurationError as exc:
        raise _problem(spec, "provider.name", str(exc)) from None
    config = {**plain_config(spec.provider.config), **dict(overrides or {})}
    try:
        provider: MemoryProvider = registration.factory(config, clock or SystemClock())
    except MemoryConfigurationError as exc:
        raise _problem(spec, "provider.config", str(exc)) from None

    try:
        configure_from_profile(provider, spec, plugins)
    except MemoryConfigurationError as exc:  # "path: detail"
        path, _, detail = str(exc).partition(": ")
        raise _problem(spec, path, detail) from None
    return provider


def build_policies(spec: MemoryProfileSpec, plugins: PluginManager) -> list[MemoryPolicy]:
    """Every enabled policy, in profile order, built from its factory.

    A factory receives ``(config, profile)``: ``config`` is ``policies.extra[name]``
    (empty if absent), so third-party policies are configured by name while built-in
    ones read their own sections of the profile.
    """
    policies = []
    for index, name in enumerate(spec.policies.enabled):
        path = f"policies.enabled[{index}]"
        try:
            registration = plugins.policies.get(name)
        except MemoryConfigurationError as exc:
            raise _problem(spec, path, str(exc)) from None
        config = plain_config(spec.policies.extra.get(name, {}))
        try:
            policy = registration.factory(config, spec)
        except MemoryConfigurationError as exc:
            where = f"policies.extra.{name}" if config else path
            raise _problem(spec, where, str(exc)) from None
        except Exception as exc:  # a factory that breaks on its input is a config problem
            raise _problem(spec, path, f"policy {name!r} could not be built: "
                                       f"{type(exc).__name__}: {exc}") from None
        if getattr(policy, "name", None) != name:
            raise _problem(spec, path, f"the factory of policy {name!r} built a policy "
                                       f"named {getattr(policy, 'name', None)!r}")
        policies.append(policy)
    return policies


def check_against_plugins(spec: MemoryProfileSpec, plugins: PluginManager) -> None:
    """Prove the profile can be built here: provider, its capabilities, fallback, each
    policy with its configuration, and each event sink ``[audit]`` names (sink
    factories do no I/O, so building them opens no file)."""
    check_capabilities(spec, build_provider(spec, plugins).capabilities())
    if spec.fallback.provider is not None:
        try:
            plugins.providers.get(spec.fallback.provider)
        except MemoryConfigurationError as exc:
            raise _problem(spec, "fallback.provider", str(exc)) from None
    build_policies(spec, plugins)
    for name, registry in (("turns", plugins.turn_stores),
                           ("working_state", plugins.working_state_stores),
                           ("blocks", plugins.block_stores),
                           ("language_model", plugins.language_models)):
        store = spec.stores.get(name)
        if store is not None:
            try:
                registry.get(store.kind)
            except MemoryConfigurationError as exc:
                raise _problem(spec, f"stores.{name}.kind", str(exc)) from None
    registered_rate_windows(spec, plugins)  # the store's name and config (no I/O)

    build_sinks(spec, plugins)


def check_capabilities(spec: MemoryProfileSpec, capabilities: Capabilities) -> None:
    """What the profile asks of its provider, against what the provider declares."""
    if "vector" in spec.retrieval.modes and not capabilities.vector_search:
        raise _problem(spec, "retrieval.modes", f"provider {spec.provider.name!r} has no "
                                                "vector search")
    if spec.write.review_source_types and not capabilities.review:
        raise _problem(spec, "write.review_source_types",
                       f"provider {spec.provider.name!r} cannot approve or reject held "
                       "memories (capability 'review')")
    if spec.write.dedup is not DedupMode.OFF and not capabilities.dedup:
        raise _problem(spec, "write.dedup", f"provider {spec.provider.name!r} does not "
                                            "deduplicate writes (capability 'dedup')")
    if spec.write.dedup is DedupMode.SIMILARITY and not capabilities.vector_search:
        raise _problem(spec, "write.dedup", f"provider {spec.provider.name!r} has no vector "
                                            "search to compare memories with")
    if spec.quotas.needs_usage and not capabilities.usage:
        raise _problem(spec, "quotas", f"record and byte quotas need usage reports, which "
                                       f"provider {spec.provider.name!r} does not declare")


def _problem(spec: MemoryProfileSpec, path: str, detail: str) -> MemoryConfigurationError:
    return ProfileLoadError(spec.key, [f"{path}: {detail}"])
