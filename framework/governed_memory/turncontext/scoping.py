"""Per-level owner narrowing: recall reads, and extraction writes, only exact scopes
the caller already owns.

Each level consulted is the owner narrowed to exactly the dimensions that level keys
on (``governed_memory.scope.narrow``), as in the reference's owner scoping: SESSION on
tenant, user and session; USER on tenant and user, so a preference is the same scope in
every project of its user; PROJECT on tenant and project; TENANT on the tenant. USER and
PROJECT are siblings, neither inside the other, which is why recall queries each level
as its own exact scope instead of walking up a chain. A level whose defining dimension
the owner lacks (a project level for an owner with no project) is skipped, never
widened.
"""

from __future__ import annotations

from governed_memory.scope import Scope, ScopeLevel, narrow

NARROWNESS: dict[ScopeLevel, int] = {
    ScopeLevel.RUN: 0,
    ScopeLevel.SESSION: 1,
    ScopeLevel.USER: 2,
    ScopeLevel.PROJECT: 3,
    ScopeLevel.TENANT: 4,
    ScopeLevel.GLOBAL: 5,
}
"""Ties in recall break toward the narrower scope (lower first): SESSION < USER <
PROJECT < TENANT, the reference's order. USER and PROJECT do not nest; a user's own
memory ranks before the project's shared one."""

_DEFINING: dict[ScopeLevel, str | None] = {
    ScopeLevel.GLOBAL: None, ScopeLevel.TENANT: None, ScopeLevel.PROJECT: "project_id",
    ScopeLevel.USER: "user_id", ScopeLevel.SESSION: "session_id", ScopeLevel.RUN: "run_id",
}


def addressable(owner: Scope, level: ScopeLevel) -> bool:
    dimension = _DEFINING[level]
    return dimension is None or getattr(owner, dimension) is not None


def recall_scopes(owner: Scope,
                  levels: tuple[ScopeLevel, ...]) -> tuple[tuple[ScopeLevel, Scope], ...]:
    """``(level, exact scope)`` for every addressable level, narrowest first; two
    levels that narrow to the same scope are queried once, as the narrower."""
    seen: dict[str, tuple[ScopeLevel, Scope]] = {}
    for level in sorted(set(levels), key=NARROWNESS.__getitem__):
        if addressable(owner, level):
            scope = narrow(owner, level)
            seen.setdefault(scope.scope_hash, (level, scope))
    return tuple(seen.values())
