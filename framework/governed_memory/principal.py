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
    ADMIN = "memory:admin"


def _permissions(values: object) -> frozenset[Permission]:
    if isinstance(values, str):
        values = [values]
    return frozenset(Permission(v) for v in values)  # type: ignore[attr-defined]


def _optional_user(value: object) -> str | None:
    return None if value is None else check_identifier(value, "principal.user_id")


@attrs.frozen(slots=True)
class Principal:
    principal_id: str = attrs.field(converter=lambda v: check_identifier(v, "principal.principal_id"))
    kind: PrincipalKind = attrs.field(converter=PrincipalKind)
    tenant_id: str = attrs.field(converter=lambda v: check_identifier(v, "principal.tenant_id"))
    user_id: str | None = attrs.field(default=None, converter=_optional_user)
    permissions: frozenset[Permission] = attrs.field(
        default=frozenset({Permission.READ, Permission.WRITE}), converter=_permissions
    )

    def has(self, permission: Permission) -> bool:
        """``memory:admin`` implies every other permission."""
        return permission in self.permissions or Permission.ADMIN in self.permissions
