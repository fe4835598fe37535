"""The profiles plugins registered, looked up by ``id@version``.

A reference must mean one thing: registering the same ``id@version`` twice with
different content is an error (the same content twice, say from two plugins that
vendor one file, is fine). Each profile a plugin registered is checked against the
registered plugins when it is first looked up (``entry``, ``get``, ``all_entries``):
checking builds its provider and policies, which a command that uses one profile
should not do for every other. A profile that cannot be used here (its provider is
not installed, a policy is blocked) is kept with its problem and refuses to build, so
one broken third-party profile does not take the others down with it. The same holds for
plugins that disagree: when two register one ``id@version`` with different content,
that reference refuses to build (naming both plugins: neither can be trusted to be the
real one) and every other profile stays usable; a registration that is not a profile
at all is listed in ``broken`` instead of failing the registry.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from governed_memory.errors import MemoryConfigurationError
from governed_memory.operation_context import ProfileRef
from governed_memory.profiles.build import check_against_plugins
from governed_memory.profiles.loading import load_profile, parse_profile
from governed_memory.profiles.spec import MemoryProfileSpec
from governed_memory.profiles.versions import Reference, SemVer

if TYPE_CHECKING:
    from governed_memory.plugins import PluginManager


@attrs.frozen(slots=True)
class RegisteredProfile:
    spec: MemoryProfileSpec
    origin: str
    """The plugin (or ``code``) that registered it."""
    problem: str | None = None
    """Why it cannot be built with the installed plugins, if it cannot."""

    @property
    def usable(self) -> bool:
        return self.problem is None


class ProfileRegistry:
    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], RegisteredProfile] = {}
        self._unchecked: dict[tuple[str, str], PluginManager] = {}
        """Entries still to be checked against these plugins on first lookup."""
        self.broken: list[str] = []
        """Plugin registrations that are not profiles at all (unreadable files, bad
        shapes), each with its error; they make no entry."""

    def register(self, spec: MemoryProfileSpec, *, origin: str = "code",
                 problem: str | None = None, conflicts: str = "raise") -> RegisteredProfile:
        """Add ``spec``. The same ``id@version`` with other content raises, or with
        ``conflicts="refuse"`` (how plugins' profiles are collected) marks that reference
        unusable, naming both origins, and returns the refused entry."""
        if not isinstance(spec, MemoryProfileSpec):
            raise MemoryConfigurationError(f"{origin}: expected a MemoryProfileSpec, "
                                           f"got {type(spec).__name__}")
        key = (spec.id, spec.version)
        existing = self._entries.get(key)
        if existing is not None:
            if existing.spec.revision != spec.revision:
                conflict = (f"profile {spec.key} registered twice with different content "
                            f"(by {existing.origin}: {existing.spec.revision}; by {origin}: "
                            f"{spec.revision})")
                if conflicts != "refuse":
                    raise MemoryConfigurationError(conflict)
                refused = RegisteredProfile(existing.spec, existing.origin, conflict)
                self._entries[key] = refused
                return refused
            return existing
        entry = RegisteredProfile(spec, origin, problem)
        self._entries[key] = entry
        return entry

    def entry(self, ref: str | Reference | ProfileRef) -> RegisteredProfile:
        """The registration behind a reference; ``id`` alone means its newest version."""
        wanted = _reference(ref)
        if wanted.version is not None:
            found = self._entries.get((wanted.id, wanted.version))
        else:
            versions = [e for (pid, _), e in self._entries.items() if pid == wanted.id]
            found = max(versions, key=lambda e: SemVer.parse(e.spec.version).precedence(),
                        default=None)
        if found is None:
            known = ", ".join(sorted(e.spec.key for e in self._entries.values())) or "none"
            raise MemoryConfigurationError(f"unknown profile {wanted}; registered: {known}")
        found = self._checked((found.spec.id, found.spec.version))
        if isinstance(ref, ProfileRef) and ref.revision not in ("unversioned",
                                                                found.spec.revision):
            raise MemoryConfigurationError(
                f"profile {found.spec.key} has revision {found.spec.revision}, "
                f"not {ref.revision}")
        return found

    def get(self, ref: str | Reference | ProfileRef) -> MemoryProfileSpec:
        """A profile that can be built here; otherwise the reason it cannot."""
        entry = self.entry(ref)
        if entry.problem is not None:
            raise MemoryConfigurationError(
                f"profile {entry.spec.key} (from {entry.origin}) cannot be used here: "
                f"{entry.problem}")
        return entry.spec

    def _checked(self, key: tuple[str, str]) -> RegisteredProfile:
        """The entry, checked against the plugins it came with if it was not yet."""
        entry = self._entries[key]
        plugins = self._unchecked.pop(key, None)
        if plugins is not None and entry.problem is None:
            try:
                check_against_plugins(entry.spec, plugins)
            except MemoryConfigurationError as exc:
                entry = RegisteredProfile(entry.spec, entry.origin, str(exc))
                self._entries[key] = entry
        return entry

    def all_entries(self) -> tuple[RegisteredProfile, ...]:
        for key in list(self._unchecked):
            self._checked(key)
        return tuple(sorted(self._entries.values(),
                            key=lambda e: (e.spec.id,
                                           SemVer.parse(e.spec.version).precedence())))

    def all(self) -> tuple[MemoryProfileSpec, ...]:
        return tuple(e.spec for e in self.all_entries())

    def __contains__(self, ref: object) -> bool:
        try:
            self.entry(ref)  # type: ignore[arg-type]
        except MemoryConfigurationError:
            return False
        return True

    def __len__(self) -> int:
        return len(self._entries)

    @classmethod
    def from_plugins(cls, plugins: PluginManager) -> ProfileRegistry:
        """Every profile registered through ``register_memory_profiles``, each checked
        against ``plugins`` when first looked up.

        A registration is a ``MemoryProfileSpec``, a mapping in the TOML shape, or the
        path of a TOML file (a ``str``, ``Path`` or package resource).
        """
        registry = cls()
        for origin, item in plugins.profiles:
            try:
                spec = _spec_of(origin, item)
            except MemoryConfigurationError as exc:
                registry.broken.append(str(exc))
                continue
            entry = registry.register(spec, origin=origin, conflicts="refuse")
            if entry.problem is None:
                registry._unchecked[(spec.id, spec.version)] = plugins
        return registry


def _spec_of(origin: str, item: Any) -> MemoryProfileSpec:
    try:
        if isinstance(item, MemoryProfileSpec):
            return item
        if isinstance(item, str | Path | Traversable):
            return load_profile(item)
        if isinstance(item, Mapping):
            return parse_profile(item, source=f"profile from {origin}")
    except MemoryConfigurationError as exc:
        raise MemoryConfigurationError(f"plugin {origin}: {exc}") from None
    raise MemoryConfigurationError(
        f"plugin {origin} registered a profile as {type(item).__name__}; register a "
        "MemoryProfileSpec, a TOML path or a mapping")


def _reference(ref: str | Reference | ProfileRef) -> Reference:
    if isinstance(ref, Reference):
        return ref
    if isinstance(ref, ProfileRef):
        return Reference(ref.id, ref.version)
    return Reference.parse(ref)
