"""Why a profile is refused, and the checks its sections share.

A person fixes a profile by hand, so a refusal names the dotted path of the offending
setting (``retrieval.top_k``) and, where it can, every broken rule at once. A section
checks itself with paths relative to itself and the converter prefixes them
(``ProfileProblem.within``); the checks several sections make (a positive number of
seconds, a list without repeats, a JSON-safe read-only config table) live here, so each
one is worded the same wherever it applies.
"""

from __future__ import annotations

import math
import types
from collections.abc import Mapping, Sequence
from typing import Any

from governed_memory.errors import MemoryConfigurationError, MemoryValidationError
from governed_memory.limits import check_json_safe


class ProfileProblems(MemoryConfigurationError):
    """Several broken rules found at once (a person fixes a profile in one pass)."""

    def __init__(self, problems: Sequence[ProfileProblem]) -> None:
        super().__init__("; ".join(str(problem) for problem in problems))
        self.problems = tuple(problems)


class ProfileProblem(MemoryConfigurationError):
    """One broken rule in a profile; ``path`` is dotted (``retrieval.top_k``)."""

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(f"{path}: {detail}" if path else detail)
        self.path = path
        self.detail = detail

    def within(self, prefix: str) -> ProfileProblem:
        """The same problem seen from an enclosing section."""
        if not prefix:
            return self
        return ProfileProblem(f"{prefix}.{self.path}" if self.path else prefix, self.detail)


def checked_config(value: Mapping[str, Any] | None, path: str) -> Mapping[str, Any]:
    """A JSON-safe, deeply read-only copy of a config table."""
    if value is None:
        value = {}
    if not isinstance(value, Mapping):
        raise ProfileProblem(path, f"expected a table, got {type(value).__name__}")
    try:
        check_json_safe(value, path)
    except MemoryValidationError as exc:
        raise ProfileProblem(exc.field or path, str(exc).removeprefix(f"{exc.field} ")
                             ) from None
    frozen: Mapping[str, Any] = _freeze(value)
    return frozen


def config_table(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The converter of a section's ``config`` (a plugin's own table)."""
    return checked_config(value, "config")


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return types.MappingProxyType({str(k): _freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


def frozen_dict(value: Mapping[Any, Any] | None) -> Mapping[Any, Any]:
    """A read-only copy: the converter of a section's mapping fields."""
    return types.MappingProxyType(dict(value or {}))


def check_positive(path: str, value: float | None) -> None:
    if value is not None and (not math.isfinite(value) or value <= 0):
        raise ProfileProblem(path, f"must be a positive number of seconds, got {value}")


def check_at_least_one(path: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise ProfileProblem(path, f"must be at least 1, got {value}")


def check_unique(path: str, values: tuple[Any, ...]) -> None:
    seen: set[Any] = set()
    for index, value in enumerate(values):
        if value in seen:
            raise ProfileProblem(f"{path}[{index}]", f"{value!r} is listed twice")
        seen.add(value)
