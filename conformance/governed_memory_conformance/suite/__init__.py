"""``ProviderConformance``: every area's tests composed into the one class a provider's
test module subclasses."""

from __future__ import annotations

from governed_memory_conformance.suite.cas import CompareAndSetTests
from governed_memory_conformance.suite.crud import CrudTests, LifecycleTests
from governed_memory_conformance.suite.deletion import DeletionTests, ExpiredDeletionTests
from governed_memory_conformance.suite.durability import DurabilityTests
from governed_memory_conformance.suite.event_time import EventTimeTests
from governed_memory_conformance.suite.expiry import ExpiryTests
from governed_memory_conformance.suite.history import HistoryTests
from governed_memory_conformance.suite.idempotency import IdempotencyTests
from governed_memory_conformance.suite.isolation import IsolationTests
from governed_memory_conformance.suite.limits import LimitTests
from governed_memory_conformance.suite.maintenance import MaintenanceTests
from governed_memory_conformance.suite.pagination import PaginationTests
from governed_memory_conformance.suite.review import ReviewTests, UsageTests
from governed_memory_conformance.suite.search import SearchTests
from governed_memory_conformance.suite.stateful import StatefulTests


class ProviderConformance(
    LifecycleTests,
    CrudTests,
    CompareAndSetTests,
    IdempotencyTests,
    PaginationTests,
    ExpiryTests,
    DeletionTests,
    ExpiredDeletionTests,
    HistoryTests,
    IsolationTests,
    MaintenanceTests,
    SearchTests,
    EventTimeTests,
    LimitTests,
    ReviewTests,
    UsageTests,
    DurabilityTests,
    StatefulTests,
):
    """The shared provider conformance suite.

    Subclass it in a module pytest collects (the class name must start with ``Test``)
    and implement one method::

        class TestAcmeProvider(ProviderConformance):
            async def make_provider(self, clock: Clock) -> MemoryProvider:
                provider = build_acme_provider({...}, clock)
                await provider.start()
                return provider

    ``make_provider`` returns a fresh, empty, started provider that reads time from
    ``clock`` (a ``ManualClock`` the suite moves to test expiry); the suite closes it.
    A durable provider's class also implements ``reopen_provider(clock)``: a new started
    provider over the storage ``make_provider`` built last (see ``ConformanceBase``).
    ``capabilities()`` decides what runs: a test of an undeclared capability is skipped
    with the capability named, a declared one must pass.

    Suite tests may not be removed or replaced. To record a known failure, replace the
    test with one marked ``pytest.mark.xfail(reason=...)`` (see ``expected_failure``);
    the plugin fails the run for any other override.
    """
