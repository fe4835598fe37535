"""Profiles from TOML: one reader per ``spec_version``.

A profile file says which schema it was written for (``spec_version``). Each version
has its own reader that turns the file into the current model, so when the schema
grows, a reader for the new version is added and files written for the old one keep
loading unchanged. Structure alone is not enough to trust a profile: the provider and
every policy it names must be registered and must accept their configuration, which
``profiles.build.check_against_plugins`` proves by building each one once (factories
do no I/O); reading a file never needs the plugins.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from governed_memory.errors import MemoryConfigurationError
from governed_memory.profiles.convert import ProfileLoadError, structure_profile
from governed_memory.profiles.spec import CURRENT_SPEC_VERSION, MemoryProfileSpec

if TYPE_CHECKING:
    pass

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
