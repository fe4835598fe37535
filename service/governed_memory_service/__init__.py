"""governed-memory over HTTP: the service app, its authentication and remote clients.

Built on the manager's public API only: every request is one governed operation
(decision, span, events) as the principal its credentials prove.
"""

from __future__ import annotations

from governed_memory_service.api_keys import ApiKey, ApiKeyStore, IssuedKey
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
    "MemoryClient",
    "PayloadTooLargeError",
    "PreconditionFailedError",
    "create_app",
]
