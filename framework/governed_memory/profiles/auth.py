"""How the service authenticates its callers (``[auth]``).

Read by ``governed-memory serve`` and ``create_app`` only: an in-process manager takes
its principal from the host. Keys never appear in a profile, whose content is hashed
into every event's revision and shipped in packs; the section names where they are.
"""

from __future__ import annotations

import math
from typing import Final

import attrs

from governed_memory.principal import PrincipalKind
from governed_memory.profiles.problems import ProfileProblem, check_unique


@attrs.frozen(slots=True)
class JwtClaimsSection:
    """Which verified claims carry the principal's parts (``[auth.jwt.claims]``)."""

    principal_id: str = "sub"
    tenant: str = "tenant_id"
    user: str = "user_id"
    kind: str = "kind"
    permissions: str = "permissions"
    default_kind: PrincipalKind = PrincipalKind.SERVICE

    def __attrs_post_init__(self) -> None:
        names = ("principal_id", "tenant", "user", "kind", "permissions")
        for name in names:
            if not getattr(self, name):
                raise ProfileProblem(name, "must name a claim")
        check_unique("claims", tuple(getattr(self, name) for name in names))


JWT_ALGORITHMS: Final = frozenset({"HS256", "HS384", "HS512", "RS256", "RS384", "RS512",
                                   "PS256", "PS384", "PS512", "ES256", "ES384", "ES512",
                                   "EdDSA"})
"""The signature algorithms a profile may allow (never ``none``)."""


@attrs.frozen(slots=True)
class JwtSection:
    """How ``governed-memory serve`` verifies bearer JWTs (``[auth.jwt]``).

    The key itself is never in the profile (a profile's content is hashed into every
    event's revision and shipped in packs): ``key_file`` names a PEM public key or a
    file holding an HMAC secret, ``key_env`` an environment variable holding either;
    exactly one of them.
    """

    issuer: str
    audience: str
    algorithms: tuple[str, ...]
    key_file: str | None = None
    key_env: str | None = None
    leeway_s: float = 0.0
    claims: JwtClaimsSection = attrs.field(factory=JwtClaimsSection)

    def __attrs_post_init__(self) -> None:
        for name in ("issuer", "audience"):
            if not getattr(self, name):
                raise ProfileProblem(name, "must not be empty")
        if not self.algorithms:
            raise ProfileProblem("algorithms", "must allow at least one algorithm")
        for index, algorithm in enumerate(self.algorithms):
            if algorithm not in JWT_ALGORITHMS:
                raise ProfileProblem(f"algorithms[{index}]", f"{algorithm!r} is not one of "
                                     f"{', '.join(sorted(JWT_ALGORITHMS))}")
        check_unique("algorithms", self.algorithms)
        if (self.key_file is None) == (self.key_env is None):
            raise ProfileProblem("key_file", "give exactly one of key_file and key_env")
        if not math.isfinite(self.leeway_s) or not 0 <= self.leeway_s <= 300:
            raise ProfileProblem("leeway_s", f"must be between 0 and 300 seconds, got "
                                             f"{self.leeway_s}")


@attrs.frozen(slots=True)
class AuthSection:
    """How the service authenticates callers; read by ``governed-memory serve`` and
    ``create_app`` only (an in-process manager takes its principal from the host).
    API keys need no section: they live in the service's key store."""

    jwt: JwtSection | None = None
