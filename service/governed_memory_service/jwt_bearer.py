"""JWT bearer tokens (PyJWT): the signature, issuer, audience, expiry and algorithm
are checked before any claim is read, then configured claims become the principal.

The algorithm allow-list is explicit and never contains ``none``: a verifier that let
the token choose its own algorithm would accept forged tokens.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import jwt
from governed_memory import Permission, Principal, PrincipalKind
from governed_memory.errors import MemoryConfigurationError, MemoryValidationError
from governed_memory.profiles.spec import JwtClaimsSection, JwtSection

__all__ = ["ClaimsMapping", "JwtSettings", "JwtVerifier"]

log = logging.getLogger(__name__)

_PERMISSIONS = {p.value: p for p in Permission}


def _algorithms(values: tuple[str, ...]) -> tuple[str, ...]:
    algorithms = tuple(values)
    if not algorithms:
        raise ValueError("JwtSettings.algorithms must allow at least one algorithm")
    if any(a.lower() == "none" for a in algorithms):
        raise ValueError("JwtSettings.algorithms must not allow 'none'")
    return algorithms


ClaimsMapping = JwtClaimsSection
"""Which claims carry the principal's parts: the profile's ``[auth.jwt.claims]``.

``permissions`` may be a JSON array or an OAuth-style space-separated string
(``scope``); names that are not ``memory:*`` permissions are ignored, since a token is
often minted for several services. A token without ``kind`` is a ``user`` principal
when it names a user and ``default_kind`` otherwise.
"""


@attrs.frozen(kw_only=True)
class JwtSettings:
    """How tokens are verified: ``key`` is the HMAC secret or the PEM public key."""

    issuer: str
    audience: str
    key: str = attrs.field(repr=False)
    algorithms: tuple[str, ...] = attrs.field(converter=_algorithms)
    leeway_s: float = 0.0
    claims: ClaimsMapping = attrs.Factory(ClaimsMapping)

    @classmethod
    def from_profile(cls, section: JwtSection, *,
                     environ: Mapping[str, str] | None = None) -> JwtSettings:
        """The settings a profile's ``[auth.jwt]`` declares, with the key read from
        its file or environment variable now, so a missing key stops the server at
        start, naming the setting, instead of refusing every token later."""
        if section.key_file is not None:
            path = Path(section.key_file).expanduser()
            try:
                key = path.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise MemoryConfigurationError(
                    f"auth.jwt.key_file: cannot read {str(path)!r} "
                    f"({type(exc).__name__})") from None
            where = "auth.jwt.key_file"
        else:
            assert section.key_env is not None
            key = (os.environ if environ is None else environ).get(section.key_env, "")
            where = f"auth.jwt.key_env ({section.key_env})"
        if not key:
            raise MemoryConfigurationError(f"{where}: the key is empty or not set")
        return cls(issuer=section.issuer, audience=section.audience, key=key,
                   algorithms=section.algorithms, leeway_s=section.leeway_s,
                   claims=section.claims)


class JwtVerifier:
    """A :class:`~governed_memory_service.authentication.CredentialVerifier` for JWTs."""

    def __init__(self, settings: JwtSettings) -> None:
        self.settings = settings

    def accepts(self, token: str) -> bool:
        return token.count(".") == 2

    async def verify(self, token: str) -> Principal | None:
        s = self.settings
        try:
            claims = jwt.decode(
                token, s.key, algorithms=list(s.algorithms), audience=s.audience,
                issuer=s.issuer, leeway=s.leeway_s,
                options={"require": ["exp", "iss", "aud", s.claims.principal_id,
                                     s.claims.tenant]})
        except jwt.PyJWTError as exc:
            # The exception's class says why (expired, audience, signature); the token
            # itself is never logged.
            log.info("jwt refused: %s", type(exc).__name__)
            return None
        try:
            return principal_from_claims(claims, s.claims)
        except (MemoryValidationError, ValueError, TypeError) as exc:
            log.info("jwt claims refused: %s", type(exc).__name__)
            return None


def principal_from_claims(claims: Mapping[str, Any], mapping: ClaimsMapping) -> Principal:
    """Build the principal from verified claims; wrong types are refused, not coerced."""
    principal_id = claims[mapping.principal_id]
    tenant = claims[mapping.tenant]
    user = claims.get(mapping.user)
    if not isinstance(principal_id, str) or not isinstance(tenant, str):
        raise TypeError("principal and tenant claims must be strings")
    if user is not None and not isinstance(user, str):
        raise TypeError("the user claim must be a string")
    kind_claim = claims.get(mapping.kind)
    if kind_claim is None:
        kind = PrincipalKind.USER if user is not None else mapping.default_kind
    elif isinstance(kind_claim, str):
        kind = PrincipalKind(kind_claim)
    else:
        raise TypeError("the kind claim must be a string")
    raw = claims.get(mapping.permissions, [])
    names = raw.split() if isinstance(raw, str) else raw
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise TypeError("the permissions claim must be a list or a space-separated string")
    permissions = [_PERMISSIONS[n] for n in names if n in _PERMISSIONS]
    return Principal(principal_id, kind, tenant_id=tenant, user_id=user,
                     permissions=permissions)
