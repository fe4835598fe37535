"""Profiles in and out of plain data, with errors that name the dotted path.

The profile converter is the framework's strict converter (unknown keys, ``"1"`` for an
int, a string for a list: all errors), so a profile is held to the same strictness as
every request and record. What differs is the error: a person edits a profile by hand,
so every problem is reported at once, as ``retrieval.top_k: expected int, got str``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
    IterableValidationNote,
)

from governed_memory.converter import make_converter
from governed_memory.errors import MemoryConfigurationError
from governed_memory.profiles.spec import (
    MemoryProfileSpec,
    ProfileProblem,
    ProfileProblems,
    enforcement_problems,
)

_converter = make_converter()


def unstructure_profile(spec: MemoryProfileSpec) -> dict[str, Any]:
    """Plain JSON-safe data; structuring it again gives an equal spec (same revision)."""
    return spec.canonical()


def structure_profile(data: Mapping[str, Any], *, source: str = "profile") -> MemoryProfileSpec:
    """Build a spec from plain data, raising one ``MemoryConfigurationError`` that lists
    every problem with its path."""
    if not isinstance(data, Mapping):
        raise MemoryConfigurationError(f"{source}: a profile is a table, "
                                       f"not {type(data).__name__}")
    try:
        return _converter.structure(dict(data), MemoryProfileSpec)
    except (ClassValidationError, IterableValidationError, ProfileProblem,
            ProfileProblems) as exc:
        problems = describe(exc)
        if isinstance(exc, ClassValidationError | IterableValidationError):
            # A section that could not be built kept the profile-wide checks from running:
            # run them on the table as written, so one broken section hides nothing else.
            problems.extend(problem for problem in _raw_enforcement(data)
                            if problem not in problems)
    except (TypeError, ValueError, KeyError) as exc:  # pragma: no cover - defensive
        problems = [f"profile: {exc}"]
    raise ProfileLoadError(source, problems)


def _raw_enforcement(data: Mapping[str, Any]) -> list[str]:
    policies = data.get("policies")
    enabled = policies.get("enabled", []) if isinstance(policies, Mapping) else []
    if not isinstance(enabled, list):
        return []

    def asks(path: str) -> bool:
        value: Any = data
        for part in path.split("."):
            if not isinstance(value, Mapping) or part not in value:
                return False
            value = value[part]
        if path == "scope.required":
            return isinstance(value, list) and any(v != "tenant_id" for v in value)
        return bool(value) and value != "off"

    return [str(problem) for problem in enforcement_problems(asks, enabled)]


class ProfileLoadError(MemoryConfigurationError):
    """Every problem found in one profile; ``problems`` are ``path: detail`` lines."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = tuple(problems)
        super().__init__(f"{source}: " + "; ".join(problems))


def describe(exc: BaseException, path: str = "") -> list[str]:
    """``path: detail`` for every leaf error under a cattrs validation error."""
    if isinstance(exc, ProfileProblem):
        return [str(exc.within(path.lstrip(".")))]
    if isinstance(exc, ProfileProblems):
        return [str(problem.within(path.lstrip("."))) for problem in exc.problems]
    if isinstance(exc, ForbiddenExtraKeysError):
        return [f"{_join(path.lstrip('.'), str(key))}: unknown key"
                for key in sorted(exc.extra_fields)]
    if isinstance(exc, ClassValidationError | IterableValidationError):
        found: list[str] = []
        for sub in exc.exceptions:
            found.extend(describe(sub, path + _step(sub)))
        return found
    return [f"{path.lstrip('.') or 'profile'}: {_detail(exc)}"]


def _step(exc: BaseException) -> str:
    for note in getattr(exc, "__notes__", ()):
        if isinstance(note, AttributeValidationNote):
            return "." + note.name
        if isinstance(note, IterableValidationNote):
            if str(note).startswith("Structuring mapping"):
                return f".{note.index}"
            return f"[{note.index}]"
    return ""


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _detail(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return "required, but missing"
    return str(exc) or type(exc).__name__
