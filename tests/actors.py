"""Principals and scopes shared by the tests."""

from __future__ import annotations

from governed_memory.principal import Permission, Principal, PrincipalKind
from governed_memory.scope import Scope

ALL = frozenset(Permission)
ALICE = Principal("user:alice", PrincipalKind.USER, "acme", "alice",
                  frozenset({Permission.READ, Permission.WRITE, Permission.DELETE}))
ADMIN = Principal("svc:admin", PrincipalKind.SERVICE, "acme", permissions=ALL)
ALICE_SCOPE = Scope("acme", project_id="p", user_id="alice")
BOB_SCOPE = Scope("acme", project_id="p", user_id="bob")
GLOBEX = Scope("globex", project_id="p", user_id="alice")
