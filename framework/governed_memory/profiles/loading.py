"""Profiles from TOML: one reader per ``spec_version``, then a check against plugins.

A profile file says which schema it was written for (``spec_version``). Each version
has its own reader that turns the file into the current model, so when the schema
grows, a reader for the new version is added and files written for the old one keep
loading unchanged. Structure alone is not enough to trust a profile: the provider and
every policy it names must be registered and must accept their configuration, which
``check_against_plugins`` proves by building each one once (factories do no I/O).
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from governed_memory.capabilities import Capabilities
from governed_memory.clock import SystemClock
from governed_memory.errors import MemoryConfigurationError
from governed_memory.profiles.convert import ProfileLoadError, structure_profile
from governed_memory.profiles.spec import CURRENT_SPEC_VERSION, MemoryProfileSpec
from governed_memory.requests import DedupMode

if TYPE_CHECKING:
    from governed_memory.plugins import PluginManager
    from governed_memory.policy import MemoryPolicy
    from governed_memory.provider import MemoryProvider

SpecReader = Callable[[Mapping[str, Any], str], MemoryProfileSpec]
"""Reads a profile written for one ``spec_version`` into the current model."""


def _read_v1(data: Mapping[str, Any], source: str) -> MemoryProfileSpec:
    return structure_profile(data, source=source)


READERS: Final[Mapping[int, SpecReader]] = {1: _read_v1}
assert max(READERS) == CURRENT_SPEC_VERSION


def parse_profile(data: Mapping[str, Any], *, source: str = "profile",
                  readers: Mapping[int, SpecReader] = READERS) -> MemoryProfileSpec:
    """A spec from plain data (a parsed TOML document), dispatched on ``spec_version``."""
    if not isinstance(data, Mapping):
        raise MemoryConfigurationError(f"{source}: a profile is a table, "
                                       f"not {type(data).__name__}")
    version = data.get("spec_version", CURRENT_SPEC_VERSION)
    if isinstance(version, bool) or not isinstance(version, int):
        raise ProfileLoadError(source, [f"spec_version: expected int, got "
                                        f"{type(version).__name__}"])
    reader = readers.get(version)
    if reader is None:
        known = ", ".join(str(v) for v in sorted(readers))
        raise ProfileLoadError(source, [f"spec_version: unknown schema version {version}; "
                                        f"this release reads {known}"])
    return reader(data, source)


def loads_profile(text: str, *, source: str = "profile",
                  readers: Mapping[int, SpecReader] = READERS) -> MemoryProfileSpec:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise MemoryConfigurationError(f"{source}: not valid TOML: {exc}") from None
    return parse_profile(data, source=source, readers=readers)


def load_profile(path: str | Path | Traversable, *,
                 readers: Mapping[int, SpecReader] = READERS) -> MemoryProfileSpec:
    """A spec from a TOML file (a filesystem path or a package resource)."""
    resource = path if isinstance(path, Traversable) else Path(path)
    try:
        text = resource.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MemoryConfigurationError(f"{resource}: cannot read the profile: "
                                       f"{type(exc).__name__}") from None
    return loads_profile(text, source=str(getattr(resource, "name", resource)),
                         readers=readers)


# -- against the registered plugins ---------------------------------------------------------


def build_provider(spec: MemoryProfileSpec, plugins: PluginManager,
                   overrides: Mapping[str, Any] | None = None,
                   clock: Any = None) -> MemoryProvider:
    """The profile's provider, unstarted; a bad name or config names its path."""
    try:
        registration = plugins.providers.get(spec.provider.name)
    except MemoryConfigurationError as exc:
        raise _problem(spec, "provider.name", str(exc)) from None
    config = {**_plain(spec.provider.config), **dict(overrides or {})}
    try:
        provider: MemoryProvider = registration.factory(config, clock or SystemClock())
    except MemoryConfigurationError as exc:
        raise _problem(spec, "provider.config", str(exc)) from None
    from governed_memory.indexing import configure_from_profile  # embedder, outbox mode

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
        config = _plain(spec.policies.extra.get(name, {}))
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
                           ("working_state", plugins.working_state_stores)):
        store = spec.stores.get(name)
        if store is not None:
            try:
                registry.get(store.kind)
            except MemoryConfigurationError as exc:
                raise _problem(spec, f"stores.{name}.kind", str(exc)) from None
    from governed_memory.profiles.build import registered_rate_windows

    registered_rate_windows(spec, plugins)  # the store's name and config (no I/O)
    from governed_memory.sinks import build_sinks

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


def _plain(value: Any) -> Any:
    """A mutable plain copy of a frozen config, as factories expect."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value
