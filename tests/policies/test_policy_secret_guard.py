"""``secret-guard``: measured on the corpus, and allow / deny / transform through the
engine and a manager, with reasons that name detectors and never the secret."""

from __future__ import annotations

import json

import pytest
from actors import ALICE, ALICE_SCOPE
from governed_memory import GovernedMemoryManager, MemoryPolicyDeniedError, Provenance
from governed_memory.clock import ManualClock
from governed_memory.events import InMemoryEventSink
from governed_memory.policy import Effect
from governed_memory.requests import AddRequest, GetRequest, UpdateRequest
from governed_memory_policies import secret_guard
from governed_memory_policies.secret_guard import detect
from policy_support import check, profile
from secret_corpus import NON_SECRETS, SECRETS, non_secrets, secrets

REJECT = profile(privacy={"secret_guard": "reject"}, policies={"enabled": ["secret-guard"]})
REDACT = profile(privacy={"secret_guard": "redact"}, policies={"enabled": ["secret-guard"]})
OFF = profile(policies={"enabled": ["secret-guard"]})


def test_the_corpus_is_big_enough() -> None:
    assert len(SECRETS) >= 50
    assert len(NON_SECRETS) >= 50


def test_detection_and_false_positive_rates(capsys: pytest.CaptureFixture[str]) -> None:
    caught = [(expected, text) for expected, text in secrets() if detect(text)]
    missed = [(expected, text[:40]) for expected, text in secrets() if not detect(text)]
    misnamed = [(expected, detect(text)) for expected, text in secrets()
                if detect(text) and expected not in detect(text)]
    flagged = [(text[:60], detect(text)) for text in non_secrets() if detect(text)]
    detection = len(caught) / len(SECRETS)
    false_positives = len(flagged) / len(NON_SECRETS)
    with capsys.disabled():
        print(f"\nsecret guard: detection {detection:.1%} ({len(caught)}/{len(SECRETS)}), "
              f"false positives {false_positives:.1%} ({len(flagged)}/{len(NON_SECRETS)})")
    assert missed == []
    assert misnamed == []
    assert false_positives < 0.05, flagged


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_rates_hold_for_other_random_fills(seed: int) -> None:
    assert all(detect(text) for _, text in secrets(seed))
    assert sum(bool(detect(text)) for text in non_secrets(seed)) / len(NON_SECRETS) < 0.05


async def test_allow_when_there_is_no_secret() -> None:
    policy = secret_guard.build({}, REJECT)
    verdict = await policy.evaluate(check(AddRequest(scope=ALICE_SCOPE,
                                                     content="Alice likes green tea")))
    assert verdict.effect is Effect.ALLOW and verdict.request is None


async def test_deny_names_the_detector_and_the_field_only() -> None:
    _, token = secrets()[4]  # a GitHub token in a sentence
    secret = token.split()[3]
    request = AddRequest(scope=ALICE_SCOPE, content="note", metadata={"deploy": {"auth": token}})
    verdict = await secret_guard.build({}, REJECT).evaluate(check(request))
    assert verdict.effect is Effect.DENY
    assert verdict.reason == "secret detected: github_token in metadata"
    assert secret not in verdict.reason


@pytest.mark.parametrize("where", ["content", "key", "metadata", "provenance"])
async def test_every_stored_text_is_scanned(where: str) -> None:
    secret = "AKIA" + "Q7X2M4N8P1R5T3V9"
    fields = {"content": {"content": f"key {secret}"}, "key": {"key": secret},
              "metadata": {"metadata": {"list": ["a", {"deep": secret}]}},
              "provenance": {"provenance": Provenance(source_id=secret)}}[where]
    request = AddRequest(**{"scope": ALICE_SCOPE, "content": "x", **fields})  # type: ignore[arg-type]
    verdict = await secret_guard.build({}, REJECT).evaluate(check(request))
    assert verdict.reason == f"secret detected: aws_access_key_id in {where}"


async def test_redact_transforms_each_match() -> None:
    text = ("db at postgres://app:Zq81vXc0pLm4@db.internal/orders and "
            "token ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8 ok")
    request = AddRequest(scope=ALICE_SCOPE, content=text, key="token ghp_" + "Zz" * 18,
                         metadata={"note": "password=Hunter22!x", "n": 3})
    verdict = await secret_guard.build({}, REDACT).evaluate(check(request))
    assert verdict.effect is Effect.ALLOW
    assert verdict.reason == ("secret redacted: connection_string, github_token in content; "
                              "github_token in key; password_assignment in metadata")
    redacted = verdict.request
    assert isinstance(redacted, AddRequest)
    assert redacted.content == ("db at postgres://app:[REDACTED:connection_string]@db.internal/"
                                "orders and token [REDACTED:github_token] ok")
    assert redacted.key == "token [REDACTED:github_token]"
    assert dict(redacted.metadata) == {"note": "password=[REDACTED:password_assignment]",
                                       "n": 3}


async def test_redact_refuses_a_secret_in_a_metadata_key() -> None:
    request = AddRequest(scope=ALICE_SCOPE, content="x",
                         metadata={"sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc": 1})
    verdict = await secret_guard.build({}, REDACT).evaluate(check(request))
    assert verdict.effect is Effect.DENY
    assert verdict.reason == "secret detected: stripe_secret_key in metadata key"


async def test_updates_are_scanned_and_off_allows_everything() -> None:
    update = UpdateRequest(scope=ALICE_SCOPE, record_id="01ABC", content="pwd=Tr0ub4dor&3")
    assert (await secret_guard.build({}, REJECT).evaluate(check(update))).effect is Effect.DENY
    assert (await secret_guard.build({}, OFF).evaluate(check(update))).effect is Effect.ALLOW
    read = GetRequest(scope=ALICE_SCOPE, record_id="01ABC")
    assert (await secret_guard.build({}, REJECT).evaluate(check(read))).effect is Effect.ALLOW


def test_revision_follows_the_mode() -> None:
    revisions = {secret_guard.build({}, p).revision for p in (REJECT, REDACT, OFF)}
    assert len(revisions) == 3


async def test_through_a_manager_events_never_carry_the_secret() -> None:
    from governed_memory_native import build_native_provider

    clock, sink = ManualClock(), InMemoryEventSink()
    secret = "sk_live_" + "51HqLyjWDarjtT1zdp7dcXy"
    for spec, denied in ((REJECT, True), (REDACT, False)):
        provider = build_native_provider({"backend": "memory"}, clock)
        async with GovernedMemoryManager(provider, clock=clock, sinks=[sink],
                                         policies=[secret_guard.build({}, spec)]) as m:
            if denied:
                with pytest.raises(MemoryPolicyDeniedError) as info:
                    await m.add(ALICE, ALICE_SCOPE, f"stripe key {secret}")
                assert info.value.reasons == (
                    "secret-guard: secret detected: stripe_secret_key in content",)
                assert info.value.decision_id == sink.events[-1].decision_id
                assert sink.events[-1].reasons == info.value.reasons
                assert (await m.list(ALICE, ALICE_SCOPE)).items == ()
            else:
                record = await m.add(ALICE, ALICE_SCOPE, f"stripe key {secret}")
                assert record.content == "stripe key [REDACTED:stripe_secret_key]"
                assert sink.events[-1].reasons == (
                    "secret-guard: secret redacted: stripe_secret_key in content",)
    trail = json.dumps([e.to_json() for e in sink.events])
    assert secret not in trail


@pytest.mark.parametrize("unit", ["a.", "a", "a:", "://", "a://a:", "password ", "eyJa.",
                                  "sk-a", "+1 ", "a@a.", "Bearer ", "token=", "-----BEGIN "])
def test_detection_stays_linear_on_adversarial_input(unit: str) -> None:
    """No detector backtracks quadratically: 64 KiB of a repeated fragment (the largest
    content a write may carry) is scanned in well under a second."""
    import time

    from governed_memory_policies.detection import find
    from governed_memory_policies.pii_detectors import EMAIL, PHONE
    from governed_memory_policies.secret_detectors import SECRET_DETECTORS

    text = (unit * (65536 // len(unit) + 1))[:65536]
    started = time.perf_counter()
    find(text, (*SECRET_DETECTORS, EMAIL, PHONE))
    assert time.perf_counter() - started < 2.0
