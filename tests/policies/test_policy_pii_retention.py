"""``pii-redaction`` and ``retention``: allow, transform, and the deny each can give."""

from __future__ import annotations

import pytest
from actors import ALICE, ALICE_SCOPE
from governed_memory import GovernedMemoryManager
from governed_memory.clock import ManualClock
from governed_memory.policy import Effect
from governed_memory.records import MemoryType
from governed_memory.requests import AddRequest, DeleteRequest, UpdateRequest
from governed_memory_policies import pii_redaction, retention
from policy_support import NOW, check, profile

PII = profile(privacy={"pii_redaction": True}, policies={"enabled": ["pii-redaction"]})
EMAIL_ONLY = profile(privacy={"pii_redaction": True, "pii_kinds": ["email"]},
                     policies={"enabled": ["pii-redaction"]})


async def test_pii_redaction_is_off_by_default() -> None:
    policy = pii_redaction.build({}, profile(policies={"enabled": ["pii-redaction"]}))
    verdict = await policy.evaluate(check(AddRequest(scope=ALICE_SCOPE,
                                                     content="mail alice@example.com")))
    assert verdict.effect is Effect.ALLOW and verdict.request is None


async def test_pii_allows_text_without_contact_data() -> None:
    text = "Order 12345678 shipped on 2024-05-02 at 10:30 from 192.168.1.10, v1.2.3"
    verdict = await pii_redaction.build({}, PII).evaluate(check(AddRequest(scope=ALICE_SCOPE,
                                                                           content=text)))
    assert verdict.effect is Effect.ALLOW and verdict.request is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("write to alice.smith+work@example.co.uk today",
         "write to [REDACTED:email] today"),
        ("call +44 20 7946 0958 or (415) 555-0132", "call [REDACTED:phone] or [REDACTED:phone]"),
        ("mobile 06 12 34 56 78, office 020 7946 0958",
         "mobile [REDACTED:phone], office [REDACTED:phone]"),
        ("US 415-555-0132 / +1 415 555 0132", "US [REDACTED:phone] / [REDACTED:phone]"),
    ],
)
async def test_pii_transform(text: str, expected: str) -> None:
    verdict = await pii_redaction.build({}, PII).evaluate(check(AddRequest(scope=ALICE_SCOPE,
                                                                           content=text)))
    assert verdict.effect is Effect.ALLOW
    assert isinstance(verdict.request, AddRequest)
    assert verdict.request.content == expected
    assert verdict.reason.startswith("redacted ")


async def test_pii_kinds_limit_what_is_redacted() -> None:
    request = AddRequest(scope=ALICE_SCOPE, content="bob@example.com +44 20 7946 0958")
    verdict = await pii_redaction.build({}, EMAIL_ONLY).evaluate(check(request))
    assert verdict.request is not None
    assert verdict.request.content == "[REDACTED:email] +44 20 7946 0958"  # type: ignore[union-attr]


async def test_pii_in_a_metadata_key_is_denied_and_updates_are_redacted() -> None:
    policy = pii_redaction.build({}, PII)
    denied = await policy.evaluate(check(AddRequest(scope=ALICE_SCOPE, content="x",
                                                    metadata={"bob@example.com": 1})))
    assert (denied.effect, denied.reason) == (Effect.DENY,
                                              "personal data in a metadata key: email")
    update = UpdateRequest(scope=ALICE_SCOPE, record_id="01ABC",
                           metadata={"contact": "bob@example.com"})
    verdict = await policy.evaluate(check(update))
    assert dict(verdict.request.metadata) == {"contact": "[REDACTED:email]"}  # type: ignore[union-attr]


TTL = profile(retention={"default_ttl_s": 100.0, "max_ttl_s": 1000.0,
                         "ttl_by_type": {"episode": 10.0}},
              policies={"enabled": ["retention"]})
MAX_ONLY = profile(retention={"max_ttl_s": 500.0}, policies={"enabled": ["retention"]})


@pytest.mark.parametrize(("memory_type", "ttl"), [(MemoryType.EPISODE, 10.0),
                                                   (MemoryType.FACT, 100.0)])
async def test_retention_sets_a_ttl_per_type(memory_type: MemoryType, ttl: float) -> None:
    request = AddRequest(scope=ALICE_SCOPE, content="x", memory_type=memory_type)
    verdict = await retention.build({}, TTL).evaluate(check(request))
    assert verdict.request is not None and verdict.request.expires_at == NOW + ttl  # type: ignore[union-attr]


async def test_retention_without_a_default_uses_the_maximum() -> None:
    verdict = await retention.build({}, MAX_ONLY).evaluate(check(AddRequest(scope=ALICE_SCOPE,
                                                                            content="x")))
    assert verdict.request.expires_at == NOW + 500.0  # type: ignore[union-attr]


async def test_retention_allows_an_expiry_within_the_maximum() -> None:
    request = AddRequest(scope=ALICE_SCOPE, content="x", expires_at=NOW + 999.0)
    verdict = await retention.build({}, TTL).evaluate(check(request))
    assert verdict.effect is Effect.ALLOW and verdict.request is None
    delete = await retention.build({}, TTL).evaluate(check(DeleteRequest(scope=ALICE_SCOPE,
                                                                         record_id="01A")))
    assert delete.request is None


async def test_retention_clamps_to_the_maximum() -> None:
    policy = retention.build({}, TTL)
    add = await policy.evaluate(check(AddRequest(scope=ALICE_SCOPE, content="x",
                                                 expires_at=NOW + 10**9)))
    assert add.request.expires_at == NOW + 1000.0  # type: ignore[union-attr]
    assert add.reason == "expires_at clamped to max_ttl_s"
    update = await policy.evaluate(check(UpdateRequest(scope=ALICE_SCOPE, record_id="01ABC",
                                                       expires_at=NOW + 10**9)))
    assert update.request.expires_at == NOW + 1000.0  # type: ignore[union-attr]
    cleared = await policy.evaluate(check(UpdateRequest(scope=ALICE_SCOPE, record_id="01ABC",
                                                        clear_expires_at=True)))
    assert cleared.request is not None
    assert (cleared.request.clear_expires_at, cleared.request.expires_at) == (  # type: ignore[union-attr]
        False, NOW + 1000.0)


async def test_retention_through_a_manager_never_outlives_the_maximum() -> None:
    from governed_memory_native import build_native_provider

    clock = ManualClock(NOW)
    async with GovernedMemoryManager(build_native_provider({"backend": "memory"}, clock),
                                     clock=clock,
                                     policies=[retention.build({}, TTL)]) as m:
        record = await m.add(ALICE, ALICE_SCOPE, "a long-lived fact", expires_at=NOW + 10**8)
        assert record.expires_at == NOW + 1000.0
        retry = await m.add(ALICE, ALICE_SCOPE, "episode", memory_type="episode",
                            idempotency_key="k1")
        clock.advance(5)
        again = await m.add(ALICE, ALICE_SCOPE, "episode", memory_type="episode",
                            idempotency_key="k1")
        assert again.id == retry.id  # a retry matches despite the time-dependent TTL
        clock.advance(1001)
        assert (await m.list(ALICE, ALICE_SCOPE)).items == ()
