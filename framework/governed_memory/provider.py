"""The provider protocol: what a plugin implements so the manager can govern it.

Providers enforce the exact scope in their datastore and return fresh (detached)
values; the manager still verifies every returned record's scope hash, so a provider
bug degrades to a dropped result and an audit event, never to a leak.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from governed_memory.capabilities import Capabilities, HealthStatus
from governed_memory.clock import Clock
from governed_memory.requests import Operations, ReviewingProvider
from governed_memory.usage import UsageMeter

__all__ = ["MemoryProvider", "ProviderFactory", "ReviewingProvider"]
"""``ReviewingProvider`` is declared with the operations (``governed_memory.requests``)
and named here too, where provider authors look for it."""

if TYPE_CHECKING:
    from governed_memory.extraction_jobs import ExtractionJobStore
    from governed_memory.indexing import IndexingProvider
    from governed_memory.outbox import EventOutboxProvider
    from governed_memory.rates import RateWindows
    from governed_memory.replay import SnapshotReplay
    from governed_memory.scope_revisions import ScopeRevisions


@runtime_checkable
class MemoryProvider(Operations, Protocol):
    """Async memory storage behind the governed contract: the operations the requests
    are sent to (``governed_memory.requests.Operations``: add, get, list, search,
    update, delete, history, delete_all, delete_user, purge_expired, and the ``review``
    accessor), with its lifecycle, capabilities and the other feature accessors.

    Contract highlights (the conformance suite checks each):

    - ``get`` / ``list`` / ``search`` / ``history`` never return a record of another
      scope, a deleted or expired record, or (except ``history``) a pending-review one;
    - ``list`` pages ascend by id; a cursor survives concurrent inserts;
    - ``update`` and ``delete`` compare-and-set on ``expected_revision`` and raise
      ``MemoryConflictError`` when it is stale, also once the record is deleted;
    - a write with an ``idempotency_key`` seen before returns the first result for the
      same request and raises ``MemoryConflictError`` for a different one;
    - a rejected write leaves storage unchanged.
    """

    name: str

    def capabilities(self) -> Capabilities: ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def health(self) -> HealthStatus: ...

    # Optional features: each accessor is the object that offers the feature, or
    # ``None``. A wrapper answers with what its inner provider offers (forwarded, or
    # wrapped where the wrapper must see the calls); nothing is detected by attribute.
    # ``review`` is declared with the operations, since review requests go through it.

    @property
    def indexing(self) -> IndexingProvider | None:
        """The indexing outbox and its worker (``governed_memory.indexing``)."""
        ...

    @property
    def outbox(self) -> EventOutboxProvider | None:
        """Committed events stored with the writes (capability ``event_outbox``)."""
        ...

    @property
    def replay(self) -> SnapshotReplay | None:
        """Retrieval snapshots: replay, cache-hit snapshots, retention."""
        ...

    @property
    def usage_meter(self) -> UsageMeter | None:
        """Record and byte counts per scope and per tenant, for quotas (capability
        ``usage``; ``governed_memory.usage.UsageMeter``)."""
        ...

    @property
    def revisions(self) -> ScopeRevisions | None:
        """Per-scope revisions kept in storage with the writes (capability
        ``scope_revisions``): how a search cache in any process checks a page."""
        ...

    @property
    def rate_windows(self) -> RateWindows | None:
        """Write-rate windows kept in the provider's storage, so every process sharing
        that storage counts into the same windows (``governed_memory.rates``): what
        ``[quotas] rate_store = "provider"`` uses for writes-per-minute limits."""
        ...

    @property
    def extraction_jobs(self) -> ExtractionJobStore | None:
        """The extraction queue kept in the provider's storage
        (``governed_memory.extraction_jobs``): turns whose facts a worker extracts
        later, surviving a crash or a model timeout."""
        ...


ProviderFactory = Callable[[Mapping[str, Any], Clock], MemoryProvider]
"""Builds an unstarted provider from its profile config and the manager's clock."""


def __getattr__(name: str) -> Any:
    """``UsageReportingProvider``, the protocol the provider guide named for ``usage``
    before the ``usage_meter`` accessor: still importable, with a warning, so a provider
    written to that guide loads while it moves to the accessor
    (docs/provider-changelog.md)."""
    if name == "UsageReportingProvider":
        import warnings

        warnings.warn("governed_memory.provider.UsageReportingProvider is deprecated: "
                      "return a governed_memory.usage.UsageMeter from the provider's "
                      "usage_meter property instead (docs/provider-changelog.md)",
                      DeprecationWarning, stacklevel=2)
        return UsageMeter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
