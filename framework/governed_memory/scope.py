"""Who a memory belongs to, and the hash that makes that ownership exact.

A record's scope is compared by hash, never by prefix: ``{tenant: a, user: u}`` and
``{tenant: a}`` are different scopes with different hashes, so a provider that matches
on "at least these dimensions" is caught by the hash check on the way back.
"""

from __future__ import annotations

import enum
import hashlib
from collections.abc import Mapping
from typing import Final

import attrs

from governed_memory.canonical import canonical_json
from governed_memory.errors import MemoryValidationError
from governed_memory.limits import check_identifier

SCOPE_HASH_PREFIX: Final = "sh1:"
DIMENSIONS: Final = (
    "tenant_id",
    "workspace_id",
    "project_id",
    "user_id",
    "session_id",
    "run_id",
    "agent_id",
    "domain_pack",
)


@attrs.frozen(slots=True)
class Scope:
    """The exact owner of a memory. ``tenant_id`` is required; the rest narrow it."""

    tenant_id: str
    workspace_id: str | None = None
    project_id: str | None = None
    user_id: str | None = None
    session_id: str | None = None
    run_id: str | None = None
    agent_id: str | None = None
    domain_pack: str | None = None
    scope_hash: str = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        check_identifier(self.tenant_id, "scope.tenant_id")
        for name in DIMENSIONS[1:]:
            value = getattr(self, name)
            if value is not None:
                check_identifier(value, f"scope.{name}")
        object.__setattr__(self, "scope_hash", compute_scope_hash(self.dimensions()))

    def dimensions(self) -> dict[str, str]:
        """The set dimensions only, in canonical order."""
        return {name: value for name in DIMENSIONS
                if (value := getattr(self, name)) is not None}

    @classmethod
    def from_dimensions(cls, values: Mapping[str, object]) -> Scope:
        """Build from a mapping, refusing unknown dimension names."""
        unknown = sorted(set(values) - set(DIMENSIONS))
        if unknown:
            raise MemoryValidationError(
                f"unknown scope dimension(s): {', '.join(unknown)}; known: {', '.join(DIMENSIONS)}",
                field="scope",
            )
        if "tenant_id" not in values or values["tenant_id"] is None:
            raise MemoryValidationError("scope.tenant_id is required", field="scope.tenant_id")
        return cls(**values)  # type: ignore[arg-type]  # checked in __attrs_post_init__

    def replace(self, **changes: str | None) -> Scope:
        """A copy with some dimensions changed (``None`` unsets one)."""
        return Scope.from_dimensions({**self.dimensions(), **changes})


def compute_scope_hash(dimensions: Mapping[str, str]) -> str:
    """``sh1:`` + sha256 of the canonical JSON of the set dimensions (sorted keys)."""
    digest = hashlib.sha256(canonical_json(dict(dimensions)).encode("utf-8")).hexdigest()
    return SCOPE_HASH_PREFIX + digest


class ScopeLevel(enum.StrEnum):
    """Which dimensions are load-bearing when recalling at a level.

    As in the reference's owner scoping: a PROJECT memory belongs to the project
    (anyone of the tenant working in it), a USER memory to the user wherever they work
    (a preference follows them from project to project), a SESSION memory to the user's
    session, and a RUN memory to everything through the run. So PROJECT and USER are
    siblings, not nested: USER drops ``project_id``. ``tenant_id``, ``workspace_id``
    (a division of the tenant) and ``domain_pack`` (an isolation boundary of its own)
    are kept at every level below GLOBAL; ``agent_id`` from SESSION down, where an
    agent's own working memory lives.
    """

    GLOBAL = "global"
    TENANT = "tenant"
    PROJECT = "project"
    USER = "user"
    SESSION = "session"
    RUN = "run"


_LEVEL_KEEPS: Final[dict[ScopeLevel, tuple[str, ...]]] = {
    ScopeLevel.GLOBAL: ("tenant_id", "domain_pack"),
    ScopeLevel.TENANT: ("tenant_id", "workspace_id", "domain_pack"),
    ScopeLevel.PROJECT: ("tenant_id", "workspace_id", "project_id", "domain_pack"),
    ScopeLevel.USER: ("tenant_id", "workspace_id", "user_id", "domain_pack"),
    ScopeLevel.SESSION: ("tenant_id", "workspace_id", "user_id", "session_id", "agent_id",
                         "domain_pack"),
    ScopeLevel.RUN: ("tenant_id", "workspace_id", "project_id", "user_id", "session_id",
                     "run_id", "agent_id", "domain_pack"),
}

_LEVEL_REQUIRES: Final[dict[ScopeLevel, str | None]] = {
    ScopeLevel.GLOBAL: None,
    ScopeLevel.TENANT: None,
    ScopeLevel.PROJECT: "project_id",
    ScopeLevel.USER: "user_id",
    ScopeLevel.SESSION: "session_id",
    ScopeLevel.RUN: "run_id",
}


def narrow(scope: Scope, level: ScopeLevel) -> Scope:
    """Keep only the dimensions ``level`` makes load-bearing.

    A level whose defining dimension is absent cannot be narrowed to: recalling "the
    user's memories" of a scope with no user would silently mean "the tenant's".
    """
    required = _LEVEL_REQUIRES[level]
    if required is not None and getattr(scope, required) is None:
        raise MemoryValidationError(
            f"cannot narrow to {level.value} level: scope has no {required}",
            field=f"scope.{required}",
        )
    keep = _LEVEL_KEEPS[level]
    return Scope(**{name: getattr(scope, name) for name in keep})


def narrow_levels(scope: Scope, levels: tuple[ScopeLevel, ...]) -> tuple[Scope, ...]:
    """Distinct exact scopes for a recall over several levels, narrowest first."""
    order = list(ScopeLevel)
    seen: dict[str, Scope] = {}
    for level in sorted(levels, key=order.index, reverse=True):
        narrowed = narrow(scope, level)
        seen.setdefault(narrowed.scope_hash, narrowed)
    return tuple(seen.values())
