"""Domain packs: a named, versioned choice of one profile per use.

A support-desk product uses memory for chat and for agent runs, with different rules
for each. Its domain pack says which profile each use gets (``chat`` →
``chat-assistant@1.0.0``), pinned to exact versions. The pack's ``dependency_hash``
covers the revisions of the profiles it selects, so a profile whose content changes
under the same version number (which the registry already refuses within one process)
still shows up as a different pack deployment across processes and releases.
"""

from __future__ import annotations

import hashlib
import types
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from governed_memory.canonical import canonical_json
from governed_memory.errors import MemoryConfigurationError
from governed_memory.profiles.registry import ProfileRegistry
from governed_memory.profiles.spec import MemoryProfileSpec
from governed_memory.profiles.versions import Reference, SemVer, is_name, is_semver

if TYPE_CHECKING:
    from governed_memory.plugins import PluginManager


def _selections(value: Mapping[str, str]) -> Mapping[str, str]:
    if not isinstance(value, Mapping):
        raise MemoryConfigurationError("selections map each use to a profile reference")
    return types.MappingProxyType(dict(value))


@attrs.frozen(slots=True)
class DomainPack:
    name: str
    version: str
    selections: Mapping[str, str] = attrs.field(converter=_selections)
    """Use (``chat``, ``agent``, ``workflow``, …) → pinned ``id@version``."""
    description: str = ""

    def __attrs_post_init__(self) -> None:
        if not is_name(self.name):
            raise MemoryConfigurationError(f"domain pack name {self.name!r} is not valid")
        if not is_semver(self.version):
            raise MemoryConfigurationError(f"domain pack {self.name}: version "
                                           f"{self.version!r} is not a semantic version")
        if not self.selections:
            raise MemoryConfigurationError(f"domain pack {self.key} selects no profile")
        for use, ref in self.selections.items():
            if not is_name(use):
                raise MemoryConfigurationError(f"domain pack {self.key}: use {use!r} is "
                                               "not a valid name")
            if Reference.parse(ref).version is None:
                raise MemoryConfigurationError(
                    f"domain pack {self.key}: selections.{use} must pin a version "
                    f"({ref}@MAJOR.MINOR.PATCH)")

    @property
    def key(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def uses(self) -> tuple[str, ...]:
        return tuple(sorted(self.selections))


@attrs.frozen(slots=True)
class ResolvedPack:
    """A pack with its selected profiles looked up in a registry."""

    pack: DomainPack
    profiles: Mapping[str, MemoryProfileSpec]
    dependency_hash: str

    def profile_for(self, use: str) -> MemoryProfileSpec:
        try:
            return self.profiles[use]
        except KeyError:
            raise MemoryConfigurationError(
                f"domain pack {self.pack.key} has no use {use!r}; it selects "
                f"{', '.join(self.pack.uses)}") from None


def dependency_hash(profiles: Mapping[str, MemoryProfileSpec]) -> str:
    """``sha256:`` over (use, profile key, profile revision), sorted by use."""
    body = [[use, profiles[use].key, profiles[use].revision] for use in sorted(profiles)]
    return "sha256:" + hashlib.sha256(canonical_json(body).encode("utf-8")).hexdigest()


class PackRegistry:
    def __init__(self) -> None:
        self._packs: dict[tuple[str, str], tuple[DomainPack, str]] = {}

    def register(self, pack: DomainPack, *, origin: str = "code") -> None:
        if not isinstance(pack, DomainPack):
            raise MemoryConfigurationError(f"{origin}: expected a DomainPack, "
                                           f"got {type(pack).__name__}")
        existing = self._packs.get((pack.name, pack.version))
        if existing is not None and existing[0] != pack:
            raise MemoryConfigurationError(
                f"domain pack {pack.key} registered twice with different selections "
                f"(by {existing[1]} and {origin})")
        self._packs.setdefault((pack.name, pack.version), (pack, origin))

    def get(self, ref: str | Reference) -> DomainPack:
        wanted = ref if isinstance(ref, Reference) else Reference.parse(ref, kind="domain pack")
        if wanted.version is not None:
            found = self._packs.get((wanted.id, wanted.version))
        else:
            candidates = [p for (name, _), (p, _) in self._packs.items() if name == wanted.id]
            found_pack = max(candidates, key=lambda p: SemVer.parse(p.version).precedence(),
                             default=None)
            found = None if found_pack is None else (found_pack, "")
        if found is None:
            known = ", ".join(p.key for p in self.all()) or "none"
            raise MemoryConfigurationError(f"unknown domain pack {wanted}; registered: {known}")
        return found[0]

    def origin(self, pack: DomainPack) -> str:
        return self._packs[(pack.name, pack.version)][1]

    def resolve(self, ref: str | Reference | DomainPack,
                profiles: ProfileRegistry) -> ResolvedPack:
        """The pack with its profiles; every selected profile must be registered."""
        pack = ref if isinstance(ref, DomainPack) else self.get(ref)
        selected: dict[str, MemoryProfileSpec] = {}
        for use in pack.uses:
            try:
                selected[use] = profiles.entry(pack.selections[use]).spec
            except MemoryConfigurationError as exc:
                raise MemoryConfigurationError(
                    f"domain pack {pack.key}: selections.{use}: {exc}") from None
        return ResolvedPack(pack, types.MappingProxyType(selected), dependency_hash(selected))

    def all(self) -> tuple[DomainPack, ...]:
        return tuple(pack for _, (pack, _) in sorted(
            self._packs.items(),
            key=lambda item: (item[0][0], SemVer.parse(item[0][1]).precedence())))

    @classmethod
    def from_plugins(cls, plugins: PluginManager) -> PackRegistry:
        registry = cls()
        for origin, item in plugins.packs:
            registry.register(_pack_of(origin, item), origin=origin)
        return registry


def _pack_of(origin: str, item: Any) -> DomainPack:
    if isinstance(item, DomainPack):
        return item
    raise MemoryConfigurationError(f"plugin {origin} registered a domain pack as "
                                   f"{type(item).__name__}; register a DomainPack")
