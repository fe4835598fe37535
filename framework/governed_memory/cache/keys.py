"""How a search becomes a cache identity, without any raw query text in a store key.

The digest covers everything the provider's answer depends on apart from the data:
the caller's permission boundary, the profile, policy and provider revisions and the
whole request (scopes, query, filters, retrieval options and page size). The data's state
enters separately, as the revision of each scope searched plus the tenant epoch, so a
write can change it without anyone enumerating the digests it affects.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, Final

from governed_memory.canonical import canonical_json
from governed_memory.converter import unstructure
from governed_memory.operation_context import OperationContext
from governed_memory.principal import Principal
from governed_memory.requests import SearchRequest
from governed_memory.scope import Scope

KEY_SCHEMA: Final = "gmc2"
"""Versions the derivation: changing what a digest covers must change this, so entries
written under the old rule are never read under the new one. ``gmc2`` added the
policy revision."""

EPOCH: Final = "epoch"
"""The per-tenant revision every key of the tenant includes. ``delete_user`` bumps it
because it cannot know in advance which scopes of the tenant hold the user's records."""

_DIGEST_DOMAIN: Final = b"governed-memory/cache/search\x00"
_TENANT_DOMAIN: Final = b"governed-memory/cache/tenant\x00"


def tenant_tag(tenant_id: str) -> str:
    """A fixed-length, opaque stand-in for the tenant in store keys (and the Redis
    hash tag that keeps one tenant's keys in one cluster slot)."""
    return hashlib.sha256(_TENANT_DOMAIN + tenant_id.encode("utf-8")).hexdigest()[:32]


def permission_boundary(principal: Principal, *,
                        include_principal_id: bool = False) -> dict[str, Any]:
    """What decides which scopes a principal may read: tenant, kind, bound user and
    permissions. The principal id is left out by default, so two agents with the same
    boundary share entries for the shared scopes they may both read; the cache sits
    below authorization, and the provider's answer does not depend on who asked."""
    boundary: dict[str, Any] = {
        "tenant_id": principal.tenant_id,
        "kind": principal.kind.value,
        "user_id": principal.user_id,
        "permissions": sorted(permission.value for permission in principal.permissions),
    }
    if include_principal_id:
        boundary["principal_id"] = principal.principal_id
    return boundary


def revision_names(scopes: Sequence[Scope]) -> tuple[str, ...]:
    """The revisions a search over ``scopes`` depends on: each distinct scope hash, in
    request order, then the tenant epoch."""
    return (*dict.fromkeys(scope.scope_hash for scope in scopes), EPOCH)


def search_digest(request: SearchRequest, ctx: OperationContext, provider_revision: str, *,
                  include_principal_id: bool = False) -> str:
    """A SHA-256 over the canonical JSON of everything but the data's state.

    The request is unstructured whole, so a field added to ``SearchRequest`` later is
    covered without touching this function. Raises ``ValueError`` when the request
    cannot be serialized (the caller then bypasses the cache).
    """
    body = {
        "schema": KEY_SCHEMA,
        "boundary": permission_boundary(ctx.principal, include_principal_id=include_principal_id),
        "profile": [ctx.profile.id, ctx.profile.version, ctx.profile.revision],
        # The policies that decided this search: a changed policy set (a new redaction
        # rule, a retention change) must not be answered from entries it never saw.
        "policy": ctx.policy_revision,
        "provider": provider_revision,
        "operation": request.operation.value,
        "request": unstructure(request),
    }
    text = canonical_json(body)
    return hashlib.sha256(_DIGEST_DOMAIN + text.encode("utf-8")).hexdigest()
