"""Key derivation: everything the answer depends on changes the digest, raw query text
never appears, and the permission boundary (not the principal id) is in it."""

from __future__ import annotations

import attrs
import pytest
from cache_support import ALICE, ALICE_SCOPE, BOB_SCOPE, SERVICE, SHARED, make_ctx
from governed_memory import MemoryType, Permission, Principal
from governed_memory.cache import (
    EPOCH,
    is_cacheable,
    permission_boundary,
    revision_names,
    search_digest,
    tenant_tag,
)
from governed_memory.operation_context import ProfileRef
from governed_memory.requests import SearchRequest

BASE = SearchRequest(scopes=(ALICE_SCOPE, SHARED), query="secret launch codes", limit=10)


def digest(request: SearchRequest = BASE, principal: Principal = ALICE,
           profile: ProfileRef | None = None, provider: str = "native@1",
           **options: bool) -> str:
    ctx = make_ctx(0.0, principal, **({"profile": profile} if profile else {}))
    return search_digest(request, ctx, provider, **options)


def test_the_digest_is_stable_and_hex() -> None:
    assert digest() == digest()
    assert len(digest()) == 64 and int(digest(), 16) >= 0


def test_the_digest_holds_no_query_text() -> None:
    value = digest()
    assert "secret" not in value and "launch" not in value


@pytest.mark.parametrize("change", [
    {"query": "other words"},
    {"limit": 11},
    {"scopes": (ALICE_SCOPE,)},
    {"scopes": (SHARED, ALICE_SCOPE)},
    {"memory_types": (MemoryType.FACT,)},
    {"metadata_filter": {"lang": "en"}},
    {"entity_ids": ("ent-1",)},
])
def test_every_request_field_changes_the_digest(change: dict[str, object]) -> None:
    assert digest(attrs.evolve(BASE, **change)) != digest()


def test_profile_and_provider_revisions_change_the_digest() -> None:
    assert digest(profile=ProfileRef("chat", "1.0.0", "rev-a")) != digest(
        profile=ProfileRef("chat", "1.0.0", "rev-b"))
    assert digest(provider="native@2") != digest(provider="native@1")


def test_the_policy_revision_changes_the_digest() -> None:
    """Entries computed under one set of policies never answer under another."""
    def under(policy_revision: str | None) -> str:
        return search_digest(BASE, make_ctx(0.0, ALICE, policy_revision=policy_revision),
                             "native@1")

    assert len({under(None), under("policies-a"), under("policies-b")}) == 3
    assert under("policies-a") == under("policies-a")


def test_the_permission_boundary_changes_the_digest() -> None:
    fewer = attrs.evolve(ALICE, permissions=frozenset({Permission.READ}))
    bob = Principal("user:bob", "user", "acme", "bob", ALICE.permissions)
    agent = Principal("agent:alice", "agent", "acme", "alice", ALICE.permissions)
    assert len({digest(), digest(principal=fewer), digest(principal=bob),
                digest(principal=agent), digest(principal=SERVICE)}) == 5


def test_the_principal_id_is_left_out_unless_asked_for() -> None:
    twin = attrs.evolve(ALICE, principal_id="user:alice-second-session")
    assert digest(principal=twin) == digest()
    assert (digest(principal=twin, include_principal_id=True)
            != digest(include_principal_id=True))


def test_permission_order_does_not_matter() -> None:
    a = attrs.evolve(ALICE, permissions=frozenset([Permission.WRITE, Permission.READ]))
    b = attrs.evolve(ALICE, permissions=frozenset([Permission.READ, Permission.WRITE]))
    assert permission_boundary(a) == permission_boundary(b)


def test_revision_names_dedupe_scopes_and_end_with_the_tenant_epoch() -> None:
    names = revision_names((ALICE_SCOPE, BOB_SCOPE, ALICE_SCOPE))
    assert names == (ALICE_SCOPE.scope_hash, BOB_SCOPE.scope_hash, EPOCH)


def test_tenant_tags_are_opaque_and_distinct() -> None:
    assert tenant_tag("acme") != tenant_tag("globex")
    assert "acme" not in tenant_tag("acme") and len(tenant_tag("acme")) == 32


def test_only_searches_that_leave_access_statistics_alone_are_cacheable() -> None:
    class Touching:
        update_access_stats = True

    assert is_cacheable(BASE)
    assert not is_cacheable(Touching())  # type: ignore[arg-type]
