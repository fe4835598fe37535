"""From what a caller says to the profile it means: one rule for every entry point.

``GovernedMemoryManager.from_profile`` (and the sync manager's), the CLI's
``--profile`` and ``profiles show|validate``, and the service's ``serve`` and ``mcp``
all take a profile the same way, through :func:`resolve_profile`:

- a ``MemoryProfileSpec`` is used as given;
- an ``os.PathLike`` (``pathlib.Path``) is a TOML file, always;
- a ``str`` is a TOML file when a file exists at that path, else a registered reference
  (``id@version``, or ``id`` for its newest registered version).

A string that is neither gets one error naming both possibilities, so a mistyped file
name is not reported as an unknown reference only (or the other way round). A file is
read by the same strict loader as ``governed-memory profiles validate``
(:func:`governed_memory.profiles.load_profile`); a reference is looked up among the
profiles plugins registered, checked against the installed plugins.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

import attrs

from governed_memory.errors import MemoryConfigurationError
from governed_memory.profiles.loading import load_profile
from governed_memory.profiles.registry import ProfileRegistry
from governed_memory.profiles.spec import MemoryProfileSpec
from governed_memory.profiles.versions import Reference

if TYPE_CHECKING:
    from governed_memory.plugins import PluginManager

__all__ = ["ProfileSource", "ResolvedProfile", "find_profile", "resolve_profile"]

ProfileSource: TypeAlias = str | os.PathLike[str] | MemoryProfileSpec
"""What every API that takes a profile accepts."""


@attrs.frozen(slots=True)
class ResolvedProfile:
    """A profile and where it came from."""

    spec: MemoryProfileSpec
    origin: str
    """``file <absolute path>``, the plugin that registered it, or ``code`` (a spec
    passed directly)."""
    file: Path | None = None
    """The TOML file it was read from, if it was read from one."""
    problem: str | None = None
    """Why a registered profile cannot be used with the installed plugins, if it
    cannot (``resolve_profile`` raises it; ``find_profile`` reports it)."""


def resolve_profile(profile: ProfileSource, plugins: PluginManager | None = None, *,
                    registry: ProfileRegistry | None = None) -> MemoryProfileSpec:
    """The spec ``profile`` names (see the module docstring for the rule), ready to
    build a manager from; a registered profile that cannot be used here raises its
    reason. ``registry`` saves rebuilding the registry when the caller has one;
    ``plugins`` default to the installed ones. Raises ``MemoryConfigurationError``
    (``ProfileLoadError``, naming each problem's path, for a file that does not load)."""
    found = find_profile(profile, plugins, registry=registry)
    if found.problem is not None:
        raise MemoryConfigurationError(f"profile {found.spec.key} (from {found.origin}) "
                                       f"cannot be used here: {found.problem}")
    return found.spec


def find_profile(profile: ProfileSource, plugins: PluginManager | None = None, *,
                 registry: ProfileRegistry | None = None) -> ResolvedProfile:
    """Like :func:`resolve_profile`, but a registered profile that cannot be used here
    is returned with its ``problem`` (``profiles show`` prints it) instead of raised."""
    if isinstance(profile, MemoryProfileSpec):
        return ResolvedProfile(profile, "code")
    if isinstance(profile, os.PathLike):
        path = Path(profile)
        if not _is_file(path):
            raise MemoryConfigurationError(f"profile file {path.absolute()}: "
                                           f"{_not_a_file(path)}")
        return _from_file(path)
    if not isinstance(profile, str):
        raise MemoryConfigurationError(
            "a profile is a registered reference ('chat-assistant@1.0.0'), the path of a "
            f"TOML file (str or os.PathLike) or a MemoryProfileSpec, not "
            f"{type(profile).__name__}")
    path = Path(profile)
    if _is_file(path):
        return _from_file(path)
    try:
        reference = Reference.parse(profile)
        if registry is None:
            from governed_memory.plugins import PluginManager

            registry = ProfileRegistry.from_plugins(plugins or PluginManager.load())
        entry = registry.entry(reference)
    except MemoryConfigurationError as exc:
        raise MemoryConfigurationError(
            f"profile {profile!r} is neither a file ({_not_a_file(path)}: "
            f"{path.absolute()}) nor a registered profile ({exc}); pass the path of a "
            "TOML file or a registered id@version") from None
    return ResolvedProfile(entry.spec, entry.origin, problem=entry.problem)


def _from_file(path: Path) -> ResolvedProfile:
    return ResolvedProfile(load_profile(path), f"file {path.absolute()}", file=path)


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # a name too long, a NUL byte: no file by that name
        return False


def _not_a_file(path: Path) -> str:
    try:
        if path.is_dir():
            return "a directory, not a file"
    except (OSError, ValueError):
        pass
    return "no such file"
