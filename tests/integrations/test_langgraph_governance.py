"""What a profile's policies do to store calls: refusals raise, transforms show."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from governed_memory import (
    GovernedMemoryManager,
    MemoryConflictError,
    MemoryPolicyDeniedError,
    Permission,
    Principal,
    Scope,
)
from governed_memory.clock import ManualClock
from governed_memory.events import InMemoryEventSink
from governed_memory.profiles.loading import loads_profile
from governed_memory_langgraph import GovernedStore, NamespaceRule, record_key
from langgraph_support import ALICE

PROFILE = """
spec_version = 1
id = "langgraph-test"
version = "1.0.0"

[provider]
name = "native"

[provider.config]
backend = "memory"

[write]
review_source_types = ["web"]

[retention]
default_ttl_s = 86_400.0

[privacy]
secret_guard = "reject"
pii_redaction = true
pii_kinds = ["email"]

[policies]
enabled = ["permissions", "write-rules", "secret-guard", "pii-redaction", "retention",
           "write-review"]
"""

REVIEWER = Principal("svc:reviewer", "service", tenant_id="acme",
                     permissions=[Permission.READ, Permission.REVIEW])
ALICE_SCOPE = Scope("acme", user_id="alice")
TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


@pytest.fixture
async def governed(clock: ManualClock, sink: InMemoryEventSink
                   ) -> AsyncIterator[GovernedMemoryManager]:
    manager = GovernedMemoryManager.from_profile(loads_profile(PROFILE), clock=clock,
                                                 sinks=[sink])
    async with manager:
        yield manager


@pytest.fixture
def store(governed: GovernedMemoryManager) -> GovernedStore:
    return GovernedStore(governed, namespaces=[
        NamespaceRule(("web", "..."), source_type="web"), ("...",)]).bind(ALICE)


async def test_a_secret_is_refused_with_the_policy_error(store: GovernedStore,
                                                        sink: InMemoryEventSink) -> None:
    with pytest.raises(MemoryPolicyDeniedError) as refused:
        await store.aput(("memories",), "k", {"content": f"my token is {TOKEN}"})
    assert "secret-guard" in " ".join(refused.value.reasons)
    with pytest.raises(MemoryPolicyDeniedError):  # in any field of the value
        await store.aput(("memories",), "k", {"content": "fine", "note": TOKEN})
    assert await store.aget(("memories",), "k") is None
    assert "memory.write.rejected" in sink.types()
    assert all(TOKEN not in repr(event) for event in sink.events)


async def test_pii_is_redacted_in_what_reads_return(store: GovernedStore) -> None:
    await store.aput(("memories",), "mail",
                     {"content": "Alice's mail is alice@example.com", "cc": "bob@example.com"})
    item = await store.aget(("memories",), "mail")
    assert item is not None
    assert "alice@example.com" not in item.value["content"]
    assert "[REDACTED:email]" in item.value["content"]
    assert item.value["cc"] == "[REDACTED:email]"


async def test_the_profile_ttl_applies_to_items(store: GovernedStore,
                                                governed: GovernedMemoryManager,
                                                clock: ManualClock) -> None:
    await store.aput(("memories",), "k", {"content": "kept a day"})
    record = await governed.get(ALICE, ALICE_SCOPE, key=record_key(("memories",), "k"))
    assert record.expires_at == clock.now() + 86_400
    clock.advance(86_401)
    assert await store.aget(("memories",), "k") is None


async def test_a_web_sourced_item_waits_for_review(store: GovernedStore,
                                                   governed: GovernedMemoryManager) -> None:
    await store.aput(("web", "pages"), "p1", {"content": "The shop opens at nine"})
    assert await store.aget(("web", "pages"), "p1") is None
    assert await store.asearch(("web",), query="shop") == []
    pending = await governed.list_pending(REVIEWER, ALICE_SCOPE)
    assert [r.provenance.source_type for r in pending.items] == ["web"]
    await governed.approve(REVIEWER, ALICE_SCOPE, pending.items[0].id)
    item = await store.aget(("web", "pages"), "p1")
    assert item is not None and item.value == {"content": "The shop opens at nine"}


async def test_a_key_held_for_review_refuses_another_put(store: GovernedStore) -> None:
    await store.aput(("web",), "p1", {"content": "The shop opens at nine"})
    with pytest.raises(MemoryConflictError, match="awaiting review"):
        await store.aput(("web",), "p1", {"content": "The shop opens at ten"})


HYBRID = """
spec_version = 1
id = "langgraph-hybrid"
version = "1.0.0"

[provider]
name = "native"

[provider.config]
backend = "memory"

[stores.embedder]
kind = "hashing"
config = { dimension = 64 }

[indexing]
mode = "sync"

[retrieval]
modes = ["lexical", "vector"]
"""


async def test_the_profiles_embedder_embeds_the_indexed_text(clock: ManualClock) -> None:
    manager = GovernedMemoryManager.from_profile(loads_profile(HYBRID), clock=clock, sinks=())
    async with manager:
        store = GovernedStore(manager).bind(ALICE)
        await store.aput(("docs",), "a", {"title": "Quarterly sales report", "body": "x"},
                         index=["title"])
        [hit] = await store.asearch(("docs",), query="quarterly sales")
        assert hit.key == "a" and hit.score is not None
        result = await manager.search(ALICE, ALICE_SCOPE, "quarterly sales")
        assert result.hits[0].record.content == "Quarterly sales report"
        signals = {s.name for s in result.hits[0].explanation.signals}
        assert any("vector" in name for name in signals), signals
