"""``quotas`` (records, bytes, writes per minute; never failing open) and
``write-review`` (review verdicts for listed source types)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import pytest
from actors import ALICE, ALICE_SCOPE, BOB_SCOPE
from governed_memory import GovernedMemoryManager, MemoryPolicyDeniedError, Provenance, Scope
from governed_memory.capabilities import Capabilities
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryUnavailableError
from governed_memory.operation_context import OperationContext
from governed_memory.policy import Effect
from governed_memory.rates import ProcessRateWindows, RateLimit
from governed_memory.requests import AddRequest, DeleteRequest, UpdateRequest
from governed_memory.usage import Usage, UsageQuery
from governed_memory_policies import quotas, write_review
from policy_support import NOW, check, fixed_usage, profile

LIMITS = profile(quotas={"max_records_per_tenant": 10, "max_records_per_scope": 3,
                         "max_bytes_per_scope": 100},
                 policies={"enabled": ["quotas"]})
RATE = profile(quotas={"writes_per_minute_per_scope": 2, "writes_per_minute_per_tenant": 3},
               policies={"enabled": ["quotas"]})


async def test_quota_allows_within_limits() -> None:
    probe = fixed_usage(Usage(5, 50), Usage(2, 50))
    verdict = await quotas.build({}, LIMITS).evaluate(check(AddRequest(scope=ALICE_SCOPE,
                                                                       content="x" * 50),
                                                            usage=probe))
    assert verdict.effect is Effect.ALLOW


@pytest.mark.parametrize(
    ("tenant", "scope", "content", "reason"),
    [
        (Usage(10, 0), Usage(0, 0), "x", "tenant record quota of 10 reached"),
        (Usage(5, 0), Usage(3, 0), "x", "scope record quota of 3 reached"),
        (Usage(5, 0), Usage(1, 60), "x" * 41, "scope byte quota of 100 would be exceeded"),
    ],
)
async def test_quota_denies_over_limits(tenant: Usage, scope: Usage, content: str,
                                        reason: str) -> None:
    verdict = await quotas.build({}, LIMITS).evaluate(
        check(AddRequest(scope=ALICE_SCOPE, content=content), usage=fixed_usage(tenant, scope)))
    assert (verdict.effect, verdict.reason) == (Effect.DENY, reason)


async def test_quota_never_fails_open() -> None:
    policy = quotas.build({}, LIMITS)
    no_probe = await policy.evaluate(check(AddRequest(scope=ALICE_SCOPE, content="x")))
    assert no_probe.effect is Effect.DENY
    assert no_probe.reason == "usage cannot be determined for this provider; quota enforced"

    async def broken(query: UsageQuery) -> Usage:
        raise RuntimeError("store down")

    failed = await policy.evaluate(check(AddRequest(scope=ALICE_SCOPE, content="x"), usage=broken))
    assert (failed.effect, failed.reason) == (Effect.DENY,
                                              "usage could not be read; quota enforced")


async def test_quota_never_blocks_forgetting() -> None:
    verdict = await quotas.build({}, LIMITS).evaluate(check(DeleteRequest(scope=ALICE_SCOPE,
                                                                          record_id="01A")))
    assert verdict.effect is Effect.ALLOW


async def test_write_rate_slides_per_scope_and_per_tenant() -> None:
    policy = quotas.build({}, RATE)
    windows = ProcessRateWindows()

    async def write(scope: Scope, at: float) -> Any:
        rated = attrs.evolve(check(AddRequest(scope=scope, content="x"), now=at),
                             rate_windows=windows)
        return (await policy.evaluate(rated)).reason

    assert await write(ALICE_SCOPE, NOW) == ""
    assert await write(ALICE_SCOPE, NOW + 1) == ""
    assert await write(ALICE_SCOPE, NOW + 2) == "scope write rate above 2 per minute"
    assert await write(BOB_SCOPE, NOW + 3) == ""  # another scope, same tenant
    assert await write(BOB_SCOPE, NOW + 4) == "tenant write rate above 3 per minute"
    assert await write(ALICE_SCOPE, NOW + 60.5) == ""  # the first write left the window
    update = UpdateRequest(scope=ALICE_SCOPE, record_id="01A", content="y")
    rated = attrs.evolve(check(update, now=NOW + 60.6), rate_windows=windows)
    assert (await policy.evaluate(rated)).effect is Effect.DENY


class FailingWindows:
    """Windows whose store is down: every admit raises."""

    shared = True

    def __init__(self) -> None:
        self.admits = 0

    async def admit(self, limits: Sequence[RateLimit], now: float) -> RateLimit | None:
        self.admits += 1
        raise MemoryUnavailableError("rate store down")

    async def close(self) -> None:
        return None


async def test_write_rate_that_cannot_be_checked_denies() -> None:
    policy = quotas.build({}, RATE)
    request = AddRequest(scope=ALICE_SCOPE, content="x")
    unbound = await policy.evaluate(check(request))  # a check built without windows
    assert (unbound.effect, unbound.reason) == (
        Effect.DENY, "write rate cannot be checked here; quota enforced")
    failing = FailingWindows()
    down = await policy.evaluate(attrs.evolve(check(request), rate_windows=failing))
    assert (down.effect, down.reason) == (Effect.DENY,
                                          "write rate could not be checked; quota enforced")
    assert failing.admits == 1
    # Forgetting is never rate-limited, so it never asks the windows either.
    forget = await policy.evaluate(attrs.evolve(
        check(DeleteRequest(scope=ALICE_SCOPE, record_id="01A")), rate_windows=failing))
    assert forget.effect is Effect.ALLOW and failing.admits == 1


async def test_a_failing_rate_store_denies_through_the_manager_and_writes_nothing() -> None:
    from governed_memory_native import build_native_provider

    clock = ManualClock()
    failing = FailingWindows()
    async with GovernedMemoryManager(build_native_provider({"backend": "memory"}, clock),
                                     clock=clock, policies=[quotas.build({}, RATE)],
                                     rate_windows=failing) as m:
        with pytest.raises(MemoryPolicyDeniedError, match="write rate could not be checked"):
            await m.add(ALICE, ALICE_SCOPE, "first")
        assert (await m.list(ALICE, ALICE_SCOPE)).items == ()


async def test_the_memory_backend_counts_write_rates_in_this_process() -> None:
    """Unchanged for the memory backend: its own windows, in process, shared by every
    manager over the same provider, a denial naming the window."""
    from governed_memory_native import build_native_provider

    clock = ManualClock(NOW)
    provider = build_native_provider({"backend": "memory"}, clock)
    windows = provider.rate_windows
    assert isinstance(windows, ProcessRateWindows) and not windows.shared
    async with GovernedMemoryManager(provider, clock=clock,
                                     policies=[quotas.build({}, RATE)]) as m:
        assert m.activity.rate_windows is windows
        await m.add(ALICE, ALICE_SCOPE, "one")
        await m.add(ALICE, ALICE_SCOPE, "two")
        with pytest.raises(MemoryPolicyDeniedError, match="scope write rate above 2 per minute"):
            await m.add(ALICE, ALICE_SCOPE, "three")
        clock.advance(61)
        await m.add(ALICE, ALICE_SCOPE, "three, a minute later")
        assert len((await m.list(ALICE, ALICE_SCOPE)).items) == 3


class Recording:
    """The native provider, recording the usage queries the quota policy makes (or, with
    ``usage=False``, declaring that it cannot report usage)."""

    def __init__(self, inner: Any, *, usage: bool = True) -> None:
        self._inner = inner
        self._usage = usage
        self.name = inner.name
        self.queries: list[UsageQuery] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def capabilities(self) -> Capabilities:
        return attrs.evolve(self._inner.capabilities(), usage=self._usage)

    @property
    def usage_meter(self) -> Recording:
        return self  # the port reads usage through this accessor

    async def usage(self, query: UsageQuery, ctx: OperationContext) -> Usage:
        self.queries.append(query)
        return await self._inner.usage(query, ctx)  # type: ignore[no-any-return]


async def test_quota_reads_usage_through_the_activity_port() -> None:
    from governed_memory_native import build_native_provider

    clock = ManualClock()
    provider = Recording(build_native_provider({"backend": "memory"}, clock))
    async with GovernedMemoryManager(provider, clock=clock,
                                     policies=[quotas.build({}, LIMITS)]) as m:
        for i in range(3):
            await m.add(ALICE, ALICE_SCOPE, f"memory {i}")
        with pytest.raises(MemoryPolicyDeniedError, match="scope record quota of 3 reached"):
            await m.add(ALICE, ALICE_SCOPE, "one too many")
        assert len((await m.list(ALICE, ALICE_SCOPE)).items) == 3
    assert UsageQuery("acme") in provider.queries
    assert UsageQuery("acme", ALICE_SCOPE) in provider.queries


async def test_without_usage_reports_a_record_quota_denies_every_add() -> None:
    from governed_memory_native import build_native_provider

    clock = ManualClock()
    provider = Recording(build_native_provider({"backend": "memory"}, clock), usage=False)
    async with GovernedMemoryManager(provider, clock=clock,
                                     policies=[quotas.build({}, LIMITS)]) as m:
        with pytest.raises(MemoryPolicyDeniedError, match="usage cannot be determined"):
            await m.add(ALICE, ALICE_SCOPE, "first")


REVIEW = profile(write={"review_source_types": ["web", "tool"]},
                 policies={"enabled": ["write-review"]})


async def test_review_allows_unlisted_sources() -> None:
    policy = write_review.build({}, REVIEW)
    for provenance in (Provenance(), Provenance(source_type="user")):
        verdict = await policy.evaluate(check(AddRequest(scope=ALICE_SCOPE, content="x",
                                                         provenance=provenance)))
        assert verdict.effect is Effect.ALLOW


async def test_review_holds_listed_sources() -> None:
    request = AddRequest(scope=ALICE_SCOPE, content="x", provenance=Provenance(source_type="web"))
    verdict = await write_review.build({}, REVIEW).evaluate(check(request))
    assert (verdict.effect, verdict.reason) == (
        Effect.REVIEW, "memories from source type web are reviewed before they are visible")
