"""``ProviderConformance``: every area's tests composed into the one class a provider's
test module subclasses."""

from __future__ import annotations

from typing import Final

from governed_memory_conformance.suite.cas import CompareAndSetTests
from governed_memory_conformance.suite.concurrency import ConcurrencyTests
from governed_memory_conformance.suite.crud import CrudTests, LifecycleTests
from governed_memory_conformance.suite.dedup import DedupTests
from governed_memory_conformance.suite.deletion import DeletionTests, ExpiredDeletionTests
from governed_memory_conformance.suite.durability import DurabilityTests
from governed_memory_conformance.suite.event_time import EventTimeTests
from governed_memory_conformance.suite.expiry import ExpiryTests
from governed_memory_conformance.suite.history import HistoryTests
from governed_memory_conformance.suite.idempotency import IdempotencyTests
from governed_memory_conformance.suite.isolation import IsolationTests
from governed_memory_conformance.suite.keys import KeyTests
from governed_memory_conformance.suite.limits import LimitTests
from governed_memory_conformance.suite.maintenance import MaintenanceTests
from governed_memory_conformance.suite.pagination import PaginationTests
from governed_memory_conformance.suite.read_filters import ReadFilterTests
from governed_memory_conformance.suite.review import ReviewTests, UsageTests
from governed_memory_conformance.suite.revisions import ScopeRevisionTests
from governed_memory_conformance.suite.search import SearchTests
from governed_memory_conformance.suite.stateful import StatefulTests
from governed_memory_conformance.suite.zero_values import ZeroValueTests

AREAS: Final[tuple[tuple[str, tuple[type, ...]], ...]] = (
    ("lifecycle, CRUD", (LifecycleTests, CrudTests)),
    ("zero values", (ZeroValueTests,)),
    ("keys", (KeyTests,)),
    ("concurrent writes", (ConcurrencyTests,)),
    ("compare-and-set", (CompareAndSetTests,)),
    ("idempotency", (IdempotencyTests,)),
    ("dedup", (DedupTests,)),
    ("pagination", (PaginationTests,)),
    ("expiry", (ExpiryTests,)),
    ("delete", (DeletionTests, ExpiredDeletionTests)),
    ("history", (HistoryTests,)),
    ("scope isolation", (IsolationTests,)),
    ("maintenance", (MaintenanceTests,)),
    ("search", (SearchTests, ReadFilterTests)),
    ("event time", (EventTimeTests,)),
    ("limits", (LimitTests,)),
    ("review", (ReviewTests,)),
    ("usage", (UsageTests,)),
    ("scope revisions", (ScopeRevisionTests,)),
    ("durability", (DurabilityTests,)),
    ("reference model", (StatefulTests,)),
)
"""The suite's areas, in the order docs/writing-a-provider.md and docs/conformance.md
list them, each with the classes that hold its tests (reports group by area)."""


def area_of(test_name: str) -> str | None:
    """The area whose classes define the suite test ``test_name`` (``None`` for a name
    the suite does not define: a provider's own test)."""
    for area, classes in AREAS:
        if any(test_name in vars(cls) for cls in classes):
            return area
    return None


class ProviderConformance(
    LifecycleTests,
    CrudTests,
    ZeroValueTests,
    KeyTests,
    ConcurrencyTests,
    CompareAndSetTests,
    IdempotencyTests,
    DedupTests,
    PaginationTests,
    ExpiryTests,
    DeletionTests,
    ExpiredDeletionTests,
    HistoryTests,
    IsolationTests,
    MaintenanceTests,
    SearchTests,
    ReadFilterTests,
    EventTimeTests,
    LimitTests,
    ReviewTests,
    UsageTests,
    ScopeRevisionTests,
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
