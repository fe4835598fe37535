"""Semantic versions and ``id@version`` references for profiles and domain packs.

A reference pins exact behaviour, so versions follow semver 2.0.0 strictly: a typo like
``1.0`` or ``v1.0.0`` is refused rather than guessed at, and ordering (for "the newest
version of this profile") follows the spec's precedence rules, pre-releases included.
"""

from __future__ import annotations

import re
from typing import Final

import attrs

from governed_memory.errors import MemoryConfigurationError

_NUMBER = r"(?:0|[1-9][0-9]*)"
_PRE_IDENT = rf"(?:{_NUMBER}|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
_BUILD_IDENT = r"[0-9A-Za-z-]+"
_SEMVER: Final = re.compile(
    rf"(?P<major>{_NUMBER})\.(?P<minor>{_NUMBER})\.(?P<patch>{_NUMBER})"
    rf"(?:-(?P<pre>{_PRE_IDENT}(?:\.{_PRE_IDENT})*))?"
    rf"(?:\+(?P<build>{_BUILD_IDENT}(?:\.{_BUILD_IDENT})*))?"
)
_NAME: Final = re.compile(r"[a-z0-9](?:[a-z0-9._-]{0,62}[a-z0-9])?")


@attrs.frozen(slots=True, order=False)
class SemVer:
    major: int
    minor: int
    patch: int
    prerelease: tuple[str, ...] = ()
    build: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> SemVer:
        match = _SEMVER.fullmatch(text) if isinstance(text, str) else None
        if match is None:
            raise ValueError(f"{text!r} is not a semantic version (MAJOR.MINOR.PATCH)")
        pre, build = match["pre"], match["build"]
        return cls(int(match["major"]), int(match["minor"]), int(match["patch"]),
                   tuple(pre.split(".")) if pre else (), tuple(build.split(".")) if build else ())

    def precedence(self) -> tuple[object, ...]:
        """A sort key with semver precedence: a release outranks its pre-releases,
        numeric identifiers compare as numbers and below alphanumeric ones, and build
        metadata does not count."""
        if not self.prerelease:
            return (self.major, self.minor, self.patch, 1, ())
        idents = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in self.prerelease)
        return (self.major, self.minor, self.patch, 0, idents)

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += "-" + ".".join(self.prerelease)
        if self.build:
            text += "+" + ".".join(self.build)
        return text


def is_semver(text: object) -> bool:
    return isinstance(text, str) and _SEMVER.fullmatch(text) is not None


def is_name(text: object) -> bool:
    """Profile and pack ids: lowercase, digits, ``.``, ``_``, ``-``; no ``@``."""
    return isinstance(text, str) and _NAME.fullmatch(text) is not None


@attrs.frozen(slots=True)
class Reference:
    """``id@version``; ``version`` is ``None`` for "the newest registered version"."""

    id: str
    version: str | None = None

    @classmethod
    def parse(cls, text: str, *, kind: str = "profile") -> Reference:
        if not isinstance(text, str):
            raise MemoryConfigurationError(f"a {kind} reference is a string like 'name@1.0.0'")
        name, at, version = text.partition("@")
        if not is_name(name):
            raise MemoryConfigurationError(
                f"{kind} reference {text!r}: {name!r} is not a valid {kind} id")
        if at and not is_semver(version):
            raise MemoryConfigurationError(
                f"{kind} reference {text!r}: {version!r} is not a semantic version")
        return cls(name, version if at else None)

    def __str__(self) -> str:
        return self.id if self.version is None else f"{self.id}@{self.version}"
