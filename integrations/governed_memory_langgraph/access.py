"""What the LangChain retriever and tools share: who acts, and in which scopes.

A retriever or a tool is built once (a chain, an agent's tool list) and called for many
users, so, like the store, it finds the principal per call
(:class:`~governed_memory_langgraph.principals.PrincipalSource`) and derives the scopes
from it: by default the principal's user scope, ``Scope(tenant, user_id=...)``, the
scope the default LangGraph store mapping and the per-turn context builder use. Nothing
the model writes as a tool argument names a principal or a scope.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs
from governed_memory import GovernedMemoryManager, MemoryValidationError, Principal, Scope
from governed_memory.sync import SyncMemoryManager

from governed_memory_langgraph.ports import Operation, R, Runner
from governed_memory_langgraph.principals import PrincipalFrom, PrincipalSource

__all__ = ["MemoryAccess", "ScopeChoice", "ScopesChoice", "user_scope"]

ScopeChoice = Scope | Callable[[Principal], Scope]
"""One exact scope, or how to derive it from the call's principal."""
ScopesChoice = Scope | Sequence[Scope] | Callable[[Principal], Sequence[Scope]]
"""Scopes a read spans (at most 16, one tenant), or how to derive them."""


def user_scope(principal: Principal) -> Scope:
    """The principal's own user scope (its tenant's shared scope for a principal bound
    to no user)."""
    return Scope(principal.tenant_id, user_id=principal.user_id)


def _scopes(choice: ScopesChoice, principal: Principal) -> tuple[Scope, ...]:
    if isinstance(choice, Scope):
        return (choice,)
    if callable(choice):
        found = choice(principal)
        if isinstance(found, Scope):
            return (found,)
        return tuple(found)
    return tuple(choice)


@attrs.frozen(slots=True)
class MemoryAccess:
    """A manager, the principal source and the scope choices of one retriever or tool
    set."""

    runner: Runner
    principals: PrincipalSource
    write_scope: ScopeChoice = user_scope
    read_scopes: ScopesChoice | None = None
    """Defaults to the write scope."""

    @classmethod
    def build(cls, manager: GovernedMemoryManager | SyncMemoryManager, *,
              principal: Principal | None = None, principal_key: str = "principal",
              principal_from: PrincipalFrom | None = None,
              scope: ScopeChoice | None = None,
              read_scopes: ScopesChoice | None = None) -> MemoryAccess:
        return cls(Runner(manager), PrincipalSource(principal, principal_key, principal_from),
                   scope if scope is not None else user_scope, read_scopes)

    def principal(self) -> Principal:
        return self.principals.resolve()

    def scope_for(self, principal: Principal) -> Scope:
        choice = self.write_scope
        scope = choice if isinstance(choice, Scope) else choice(principal)
        if not isinstance(scope, Scope):
            raise MemoryValidationError("the scope choice returned no Scope", field="scope")
        return scope

    def scopes_for(self, principal: Principal) -> tuple[Scope, ...]:
        if self.read_scopes is None:
            return (self.scope_for(principal),)
        scopes = _scopes(self.read_scopes, principal)
        if not scopes or not all(isinstance(s, Scope) for s in scopes):
            raise MemoryValidationError("the read scopes are one or more Scope values",
                                        field="scopes")
        return scopes

    def call(self, operation: Operation[R]) -> R:
        return self.runner.call(operation)

    async def acall(self, operation: Operation[R]) -> R:
        return await self.runner.acall(operation)
