"""A profile's event sinks, built through the plugin registry.

A profile names its sinks in ``[audit]``: ``path`` (with ``fsync``, rotation and
checkpoint keys) is the hash-chained trail, built by the event sink registered as
``audit``; each ``[audit.sinks.<name>]`` table is the config of the sink registered
as ``<name>``. Sinks are looked up by name like providers and policies, so a
third-party sink needs no change here and the framework imports no plugin.

Where files go is the host's decision, not the profile's: a relative path in the
profile (``path``, ``checkpoint_path``, and the ``path`` of the built-in ``jsonl``
sink) is resolved against ``base_dir``, which the host passes (the CLI passes the
directory of its database; ``GovernedMemoryManager.from_profile`` passes
``sinks_base_dir``, else :func:`default_base_dir`: beside the profile's database, so a
profile's trail lands in the same place from Python as from the CLI); when
``build_sinks`` is given none, paths stay as written, so a relative one is the current
directory's when the sink opens its file (building never asks for the current
directory, which may be gone in a long-running process).
Other sinks' configs are handed over as written, since only the sink knows which of
its keys are paths. Building does no I/O (sink factories must not): files are opened
on the first event.

A sink that records into the provider's own store (the native plugin's
``postgres-trail``, whose intake takes each write's events in the write's own
transaction) is configured with ``store = "provider"``: ``build_sinks`` replaces that
key with ``provider`` (the provider's registered name), ``provider_config`` (its
config, with the host's overrides) and, unless the table gives one, ``event_detail``
(the profile's ``privacy.event_detail``, which says what of the events the provider
stored the sink may keep). The framework names no store here: the sink reads what it
needs from the provider's config, and refuses a provider it cannot share.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from governed_memory.errors import MemoryConfigurationError
from governed_memory.events import EventSink
from governed_memory.profile_stores import plain_config
from governed_memory.profiles.convert import ProfileLoadError
from governed_memory.profiles.spec import AUDIT_SINK, MemoryProfileSpec

if TYPE_CHECKING:
    from governed_memory.plugins import PluginManager

JSONL_SINK: Final = "jsonl"
HOME_ENV: Final = "GOVERNED_MEMORY_HOME"
"""Where governed-memory keeps its files when nothing else says: the CLI's database and
trail, and the native provider's default SQLite file."""
DEFAULT_HOME: Final = ".governed-memory"
"""The home when ``$GOVERNED_MEMORY_HOME`` is not set, relative to the current
directory when a file is opened."""
PROVIDER_STORE: Final = "provider"
"""``store = "provider"`` in a sink's table: record into the provider's own store."""
_TRAIL_PATH_KEYS: Final = ("directory", "checkpoint_path")
_NO_FILE: Final = frozenset({"", ":memory:"})


def default_base_dir(spec: MemoryProfileSpec,
                     provider_config_overrides: Mapping[str, Any] | None = None, *,
                     environ: Mapping[str, str] | None = None) -> Path:
    """Where a profile's relative sink paths go when the host names no base directory:
    the directory of the provider's database file when its config (with the overrides)
    names one as ``path``, else ``$GOVERNED_MEMORY_HOME``, else ``./.governed-memory``,
    which is where the embedded default database goes when no ``path`` is named. So a
    built-in profile's trail (``[audit] path = "audit"``) sits next to its data, from
    Python as from the CLI, and nothing is written to the working directory itself
    unless a database path there was chosen.

    Reads no file and never asks for the current directory: a relative result is
    resolved when a sink opens its file."""
    config = {**spec.provider.config, **dict(provider_config_overrides or {})}
    path = config.get("path")
    if isinstance(path, str | os.PathLike) and str(path) not in _NO_FILE:
        return Path(path).parent
    env = os.environ if environ is None else environ
    return Path(env.get(HOME_ENV) or DEFAULT_HOME)


def build_sinks(spec: MemoryProfileSpec, plugins: PluginManager | None = None, *,
                base_dir: str | os.PathLike[str] | None = None,
                provider_config_overrides: Mapping[str, Any] | None = None
                ) -> tuple[EventSink, ...]:
    """The sinks ``spec``'s ``[audit]`` section names, unopened: the trail first (when
    ``path`` is set), then ``[audit.sinks.*]`` in name order. Empty when it names none.
    ``provider_config_overrides`` are the host's overrides of the provider's config, as
    given to the provider, for sinks that record into its store (``store = "provider"``).

    A name no plugin registered, or a config its factory refuses, raises
    ``ProfileLoadError`` naming the dotted path (``audit.sinks.kafka``)."""
    from governed_memory.plugins import PluginManager

    plugins = plugins or PluginManager.load()
    base = Path(base_dir) if base_dir is not None else None
    wanted: list[tuple[str, str, dict[str, Any]]] = []
    trail = spec.audit.trail_config
    if trail is not None:
        for key in _TRAIL_PATH_KEYS:
            if key in trail:
                trail[key] = str(_resolved(base, trail[key]))
        wanted.append(("audit.path", AUDIT_SINK, trail))
    for name in sorted(spec.audit.sinks):
        config = plain_config(spec.audit.sinks[name])
        if name == JSONL_SINK and isinstance(config.get("path"), str):
            config["path"] = str(_resolved(base, config["path"]))
        if config.get("store") == PROVIDER_STORE:
            del config["store"]
            config["provider"] = spec.provider.name
            config["provider_config"] = {**plain_config(spec.provider.config),
                                         **dict(provider_config_overrides or {})}
            config.setdefault("event_detail", spec.privacy.event_detail.value)
        wanted.append((f"audit.sinks.{name}", name, config))
    sinks: list[EventSink] = []
    for where, name, config in wanted:
        try:
            registration = plugins.sinks.get(name)
        except MemoryConfigurationError as exc:
            raise ProfileLoadError(spec.key, [f"{where}: {exc}"]) from None
        try:
            sink = registration.factory(config)
        except MemoryConfigurationError as exc:
            raise ProfileLoadError(spec.key, [f"{where}: {exc}"]) from None
        except Exception as exc:  # a factory that breaks on its input is a config problem
            raise ProfileLoadError(spec.key, [f"{where}: event sink {name!r} could not be "
                                              f"built: {type(exc).__name__}: {exc}"]
                                   ) from None
        if not isinstance(sink, EventSink):
            raise ProfileLoadError(spec.key, [f"{where}: the factory of event sink {name!r} "
                                              "built no EventSink (emit and close)"])
        sinks.append(sink)
    return tuple(sinks)


def _resolved(base: Path | None, value: str) -> Path:
    path = Path(value)
    return path if base is None or path.is_absolute() else base / path
