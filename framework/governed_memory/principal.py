"""The authenticated actor. It is built by the host from its own auth, never from
fields a user typed, and the scope-authorization rule trusts nothing else."""

from __future__ import annotations

import enum

import attrs

from governed_memory.limits import check_identifier


class PrincipalKind(enum.StrEnum):
    USER = "user"
    AGENT = "agent"
    SERVICE = "service"


class Permission(enum.StrEnum):
    READ = "memory:read"
    WRITE = "memory:write"
    DELETE = "memory:delete"
    REVIEW = "memory:review"
    """Approve or reject memories held for review; kept apart from ``memory:write`` so
    that whoever writes a memory under review cannot also wave it through."""
    ADMIN = "memory:admin"
    AUDIT = "audit:read"
    """Read the audit trail (``governed_memory.audit_requests``): an auditor's, granted
    on its own and implied by no memory permission, ``memory:admin`` included, so that
    whoever runs the memories cannot also read back what the trail says about them."""


def _permissions(values: object) -> frozenset[Permission]:
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, list | tuple | set | frozenset):
        raise TypeError("permissions must be a collection of permission names")
    return frozenset(Permission(v) for v in values)


@attrs.frozen(slots=True)
class Principal:
    principal_id: str
    kind: PrincipalKind = attrs.field(converter=PrincipalKind)
    tenant_id: str
    user_id: str | None = None
    permissions: frozenset[Permission] = attrs.field(
        default=frozenset({Permission.READ, Permission.WRITE}), converter=_permissions
    )

    def __attrs_post_init__(self) -> None:
        check_identifier(self.principal_id, "principal.principal_id")
        check_identifier(self.tenant_id, "principal.tenant_id")
        if self.user_id is not None:
            check_identifier(self.user_id, "principal.user_id")

    def has(self, permission: Permission) -> bool:
        """``memory:admin`` implies every other ``memory:`` permission; ``audit:read`` is
        implied by none."""
        if permission in self.permissions:
            return True
        return permission is not Permission.AUDIT and Permission.ADMIN in self.permissions
