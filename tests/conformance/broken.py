"""Three deliberately broken providers, each the example provider with one classic bug.

The meta-tests run the conformance suite on each and insist it fails, and fails in the
tests that name the bug: a suite that passes a broken provider proves nothing.
"""

from __future__ import annotations

from example_provider import ExampleProvider
from governed_memory import MemoryRecord, RecordStatus, Scope


class ScopeLeakingProvider(ExampleProvider):
    """Matches a scope as "at least these dimensions": a user's query also sees the
    user's session records (the prefix mistake exact scope hashes exist to prevent)."""

    name = "broken-scope-leak"

    def _owned(self, record: MemoryRecord, scope: Scope) -> bool:
        have = record.scope.dimensions()
        return all(have.get(name) == value for name, value in scope.dimensions().items())


class RevisionIgnoringProvider(ExampleProvider):
    """Accepts any ``expected_revision``: compare-and-set in name only."""

    name = "broken-revisions"

    def _check_revision(self, record: MemoryRecord, expected: str | None) -> None:
        return None


class ExpiredReturningProvider(ExampleProvider):
    """Forgets expiry on reads: get, list and search still return expired records."""

    name = "broken-expiry"

    def _readable(self, record: MemoryRecord, now: float) -> bool:
        return record.status is RecordStatus.ACTIVE
