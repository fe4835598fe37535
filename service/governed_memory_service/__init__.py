"""governed-memory over HTTP: the service app, its authentication and remote clients.

Built on the manager's public API only: every request is one governed operation
(decision, span, events) as the principal its credentials prove.

Names are loaded on first use: this package is also the home of the ``service`` plugin,
which every plugin load imports, so importing it must not need the ``service`` extra
(Starlette, httpx, PyJWT) until one of these names is asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from governed_memory.exports import lazy_exports

if TYPE_CHECKING:
    from governed_memory_service.api_keys import ApiKey, ApiKeyStore, IssuedKey, KeyStore
    from governed_memory_service.app import DEFAULT_MAX_BODY_BYTES, create_app
    from governed_memory_service.authentication import (
        Authenticator,
        BearerAuthenticator,
        CredentialVerifier,
    )
    from governed_memory_service.client import AsyncMemoryClient, MemoryClient
    from governed_memory_service.errors import (
        AuthenticationError,
        PayloadTooLargeError,
        PreconditionFailedError,
    )
    from governed_memory_service.jwt_bearer import ClaimsMapping, JwtSettings, JwtVerifier
    from governed_memory_service.postgres_keys import PostgresApiKeyStore

_LAZY: dict[str, str] = {
    "ApiKey": "governed_memory_service.api_keys",
    "ApiKeyStore": "governed_memory_service.api_keys",
    "AsyncMemoryClient": "governed_memory_service.client",
    "AuthenticationError": "governed_memory_service.errors",
    "Authenticator": "governed_memory_service.authentication",
    "BearerAuthenticator": "governed_memory_service.authentication",
    "ClaimsMapping": "governed_memory_service.jwt_bearer",
    "CredentialVerifier": "governed_memory_service.authentication",
    "DEFAULT_MAX_BODY_BYTES": "governed_memory_service.app",
    "IssuedKey": "governed_memory_service.api_keys",
    "JwtSettings": "governed_memory_service.jwt_bearer",
    "JwtVerifier": "governed_memory_service.jwt_bearer",
    "KeyStore": "governed_memory_service.api_keys",
    "MemoryClient": "governed_memory_service.client",
    "PayloadTooLargeError": "governed_memory_service.errors",
    "PostgresApiKeyStore": "governed_memory_service.postgres_keys",
    "PreconditionFailedError": "governed_memory_service.errors",
    "create_app": "governed_memory_service.app",
}


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "ApiKey",
    "ApiKeyStore",
    "AsyncMemoryClient",
    "AuthenticationError",
    "Authenticator",
    "BearerAuthenticator",
    "ClaimsMapping",
    "CredentialVerifier",
    "IssuedKey",
    "JwtSettings",
    "JwtVerifier",
    "KeyStore",
    "MemoryClient",
    "PayloadTooLargeError",
    "PostgresApiKeyStore",
    "PreconditionFailedError",
    "create_app",
]
