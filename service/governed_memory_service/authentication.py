"""Authentication: an ``Authorization`` header in, a ``Principal`` out.

The principal is built only from verified credentials (an API key in the key store or
a signed JWT), never from the request body or query, because the library's scope rule
trusts the principal completely.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from governed_memory import Principal

from governed_memory_service.errors import AuthenticationError

__all__ = ["Authenticator", "BearerAuthenticator", "CredentialVerifier"]


@runtime_checkable
class CredentialVerifier(Protocol):
    """One kind of bearer credential (API key, JWT)."""

    def accepts(self, token: str) -> bool:
        """Whether the token has this verifier's shape; decides routing only, never
        validity, so two verifiers never both try one token."""
        ...

    async def verify(self, token: str) -> Principal | None:
        """The principal the token proves, or ``None`` if it proves nothing."""
        ...


class Authenticator(Protocol):
    """What the app asks of authentication."""

    async def authenticate(self, authorization: str | None) -> Principal:
        """The principal, or :class:`AuthenticationError`."""
        ...


class BearerAuthenticator:
    """``Authorization: Bearer <token>``, handed to the first verifier that accepts it.

    Every failure raises the same :class:`AuthenticationError` message, so a caller
    cannot tell an unknown key from a revoked one or a bad signature from an expired
    token.
    """

    def __init__(self, *verifiers: CredentialVerifier) -> None:
        if not verifiers:
            raise ValueError("a BearerAuthenticator needs at least one verifier")
        self._verifiers = verifiers

    @property
    def verifiers(self) -> tuple[CredentialVerifier, ...]:
        """The verifiers, in the order tokens are offered to them (readiness asks the
        ones with a ``check`` for a round trip to their store)."""
        return self._verifiers

    async def authenticate(self, authorization: str | None) -> Principal:
        if not authorization:
            raise AuthenticationError()
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise AuthenticationError(credentials_given=True)
        for verifier in self._verifiers:
            if verifier.accepts(token):
                principal = await verifier.verify(token)
                if principal is None:
                    break
                return principal
        raise AuthenticationError(credentials_given=True)
