"""Whose tier data a call touches: the owner scope, and the exact scope each tier keeps.

The principal always comes from the host's authentication. When the scope has no
``user_id``, the principal's is used, so the same human always gets the same session
key, run key and blocks whether or not the caller spelled it out.
"""

from __future__ import annotations

from governed_memory.errors import MemoryScopeError, MemoryValidationError
from governed_memory.principal import Principal
from governed_memory.scope import Scope, ScopeLevel, narrow

__all__ = ["check_owner", "level_scope", "owner_scope", "run_scope", "session_scope"]


def owner_scope(principal: Principal, scope: Scope) -> Scope:
    """The scope with ``user_id`` taken from the principal when the scope has none."""
    if not isinstance(principal, Principal):
        raise MemoryValidationError("principal must be a Principal from authenticated "
                                    "context", field="principal")
    if not isinstance(scope, Scope):
        raise MemoryValidationError("scope must be a Scope", field="scope")
    if scope.user_id is None and principal.user_id is not None:
        return scope.replace(user_id=principal.user_id)
    return scope


def check_owner(principal: Principal, scope: Scope) -> Scope:
    """Refuse an owner that is not the authenticated caller's: another tenant, or
    another user than the one the principal is bound to."""
    owner = owner_scope(principal, scope)
    if owner.tenant_id != principal.tenant_id:
        raise MemoryScopeError("the owner's tenant is not the authenticated principal's")
    if principal.user_id is not None and owner.user_id != principal.user_id:
        raise MemoryScopeError("the owner is not the authenticated principal's user")
    return owner


def session_scope(principal: Principal, scope: Scope) -> Scope:
    """Where a session's turns and rolling summary live: tenant, workspace, user,
    session, agent and domain pack, not the project, so a session that moves between
    projects keeps one history and one summary (the reference's owner scoping)."""
    return narrow(owner_scope(principal, scope), ScopeLevel.SESSION)


def level_scope(principal: Principal, scope: Scope, level: ScopeLevel | str | None) -> Scope:
    """The owner as given (``level=None``), or narrowed to exactly ``level``'s
    dimensions; an unknown level, or one the owner cannot address (``PROJECT`` without
    a project), is a ``MemoryValidationError``, never a wider scope."""
    owner = owner_scope(principal, scope)
    if level is None:
        return owner
    try:
        chosen = ScopeLevel(level)
    except ValueError:
        raise MemoryValidationError(f"unknown scope level {level!r}", field="level") from None
    return narrow(owner, chosen)


def run_scope(principal: Principal, scope: Scope) -> Scope:
    return narrow(owner_scope(principal, scope), ScopeLevel.RUN)
