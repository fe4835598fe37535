"""What a provider promises (``Capabilities``) and how it is doing (``HealthStatus``).

Apart from the record values because they are a provider's self-description, read by
the activity port, the profile loader and the conformance suite, never stored.
"""

from __future__ import annotations

from typing import TypeVar

import attrs

from governed_memory.errors import MemoryCapabilityUnsupportedError

F = TypeVar("F")


def offered(feature: F | None, provider: object, lacks: str) -> F:
    """The object a provider's optional-feature accessor returned, or the one typed
    refusal every caller gives when it is ``None`` ("provider <name> <lacks>")."""
    if feature is None:
        raise MemoryCapabilityUnsupportedError(
            f"provider {getattr(provider, 'name', type(provider).__name__)} {lacks}")
    return feature


@attrs.frozen(slots=True)
class Capabilities:
    """What a provider promises. The conformance suite tests exactly these claims.

    Every feature is off unless the provider says it is on: an honest provider that
    names only what it does claims nothing by accident. ``durable`` and
    ``transactional`` must always be stated. Each flag is explained in
    ``docs/writing-a-provider.md``.
    """

    durable: bool
    """A committed write survives the process and the machine going down."""
    transactional: bool
    """A write is all or nothing: a record, its version and its index entries commit
    together or not at all."""
    multi_process: bool = False
    """Several processes may use the same storage at once, with every guarantee kept."""
    compare_and_set: bool = False
    """``update``/``delete`` honour ``expected_revision`` (``MemoryConflictError``)."""
    idempotency: bool = False
    """Writes honour ``idempotency_key``: a retry returns the first result."""
    history: bool = False
    """``history`` returns every version of a record."""
    soft_delete: bool = False
    """``delete`` leaves a tombstone version (``hard=False``)."""
    hard_delete: bool = False
    """``delete(hard=True)`` removes the record and its history physically."""
    lexical_search: bool = False
    """``search`` ranks by the query's words (BM25 or similar)."""
    vector_search: bool = False
    """``search`` ranks by embedding similarity."""
    metadata_filters: bool = False
    """``search`` honours ``metadata_filter`` (equality on top-level keys)."""
    expiry: bool = False
    """``expires_at`` hides a record from every read once it has passed."""
    purge_expired: bool = False
    """``purge_expired`` removes expired records physically, in pages."""
    purge_expired_all: bool = False
    """``purge_expired_all`` removes a bounded batch of expired records of every scope,
    earliest expiry first, as ``purge_expired`` removes them from one, and is safe when
    several processes run it at once (the maintenance round's data minimisation)."""
    delete_all: bool = False
    """``delete_all`` erases one exact scope."""
    delete_user: bool = False
    """``delete_user`` erases a user in every scope of the tenant, with a receipt."""
    review: bool = False
    """``approve``, ``reject`` and ``list_pending`` of records held as ``pending_review``."""
    dedup: bool = False
    """``AddRequest.dedup`` is honoured: an identical add returns the existing record
    (``content_hash``; ``similarity`` also needs ``vector_search``)."""
    usage: bool = False
    """``usage`` reports record and byte counts per scope and per tenant (quotas)."""
    event_outbox: bool = False
    """A write's ``committed`` event is stored in the write's own transaction and read
    back through ``pending_events`` / ``acknowledge_events`` (``governed_memory.outbox``)."""
    scope_revisions: bool = False
    """``revisions`` reads per-scope revisions that every committed write advances in
    its own transaction, and a tenant epoch that ``delete_user`` advances
    (``governed_memory.scope_revisions``): a search cache in any process can then check
    a page against storage."""
    max_page_size: int = 100


@attrs.frozen(slots=True)
class HealthStatus:
    ok: bool
    provider: str
    detail: str = ""
    latency_ms: float = 0.0
