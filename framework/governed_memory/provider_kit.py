"""The provider kit: what every provider does the same way, offered to provider authors.

Providers never import each other, yet each one must refuse a reused idempotency key, a
stale ``expected_revision`` and a write to a missing record with the same typed errors
and the same words, apply an update field by field the same way, and compare a metadata
filter with the same JSON typing, or a caller would see different answers for the same
request depending on the backend. These helpers are that one behaviour; the conformance
suite holds every provider to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TypeGuard, TypeVar

import attrs

from governed_memory.errors import (
    MemoryConflictError,
    MemoryNotFoundError,
    MemoryValidationError,
)
from governed_memory.ids import new_id, new_revision
from governed_memory.limits import check_metadata_budget
from governed_memory.operation_context import OperationContext
from governed_memory.records import IndexState, MemoryRecord, Provenance, content_hash
from governed_memory.request import Request
from governed_memory.requests import AddRequest, SearchRequest, UpdateRequest

__all__ = [
    "NoOptionalFeatures",
    "StoredFingerprint",
    "apply_update",
    "check_fingerprint",
    "check_key_holder",
    "check_link",
    "check_revision",
    "erased_key_holder",
    "idempotency_fingerprint",
    "json_kind",
    "matches_filters",
    "metadata_matches",
    "new_record",
    "raise_missing",
    "stamped_provenance",
]

if TYPE_CHECKING:
    from governed_memory.extraction_jobs import ExtractionJobStore
    from governed_memory.indexing import IndexingProvider
    from governed_memory.outbox import EventOutboxProvider
    from governed_memory.provider import ReviewingProvider
    from governed_memory.rates import RateWindows
    from governed_memory.replay import SnapshotReplay
    from governed_memory.scope_revisions import ScopeRevisions
    from governed_memory.usage import UsageMeter

T = TypeVar("T")


class NoOptionalFeatures:
    """The optional-feature accessors of a provider that offers none of them (review,
    indexing, event outbox, replay, usage, scope revisions, rate windows, extraction
    jobs): mix it in and override the ones you offer."""

    __slots__ = ()

    @property
    def review(self) -> ReviewingProvider | None:
        return None

    @property
    def indexing(self) -> IndexingProvider | None:
        return None

    @property
    def outbox(self) -> EventOutboxProvider | None:
        return None

    @property
    def replay(self) -> SnapshotReplay | None:
        return None

    @property
    def usage_meter(self) -> UsageMeter | None:
        return None

    @property
    def revisions(self) -> ScopeRevisions | None:
        return None

    @property
    def rate_windows(self) -> RateWindows | None:
        return None

    @property
    def extraction_jobs(self) -> ExtractionJobStore | None:
        return None


class StoredFingerprint(Protocol):
    """A provider's stored idempotency entry: only its fingerprint is compared."""

    @property
    def fingerprint(self) -> str: ...


def idempotency_fingerprint(ctx: OperationContext, request: Request[Any]) -> str:
    """The idempotency fingerprint, or a validation error if it cannot be computed.

    The context's fingerprint wins when the manager set one: it hashes the request as
    the caller sent it, before a policy transformed it (a TTL stamped from the clock),
    so a retry still matches its first attempt. ``validate()`` lets an infinite time
    through, which canonical JSON refuses.
    """
    try:
        return ctx.fingerprint_of(request)
    except ValueError:
        raise MemoryValidationError(
            "the request holds a value JSON cannot represent (a non-finite number?)",
            field="idempotency_key",
        ) from None


def check_fingerprint(entry: StoredFingerprint, fingerprint: str) -> None:
    """Refuse a reused idempotency key whose request differs from the first one."""
    if entry.fingerprint != fingerprint:
        raise MemoryConflictError("the idempotency key was already used for a different request")


def check_revision(current: MemoryRecord, expected: str | None) -> None:
    """Refuse a write whose ``expected_revision`` is no longer the record's revision."""
    if expected is not None and current.revision != expected:
        raise MemoryConflictError("expected_revision is stale; re-read and retry")


def raise_missing(expected_revision: str | None) -> NoReturn:
    """The error for a write to a deleted or missing record: a conflict when the caller
    expected a revision (it saw the record once), else not-found."""
    if expected_revision is not None:
        raise MemoryConflictError("expected_revision refers to a deleted or missing record")
    raise MemoryNotFoundError("no live record with that id in this scope")


def stamped_provenance(request: AddRequest, ctx: OperationContext) -> Provenance:
    """The provenance an add stores: the request's, with the operation's id when it
    names none; within the metadata budget, which ``validate()`` measured on the
    provenance as sent (a record stored over it could never be updated)."""
    provenance = request.provenance
    if provenance.operation_id is None:
        provenance = attrs.evolve(provenance, operation_id=ctx.operation_id)
    check_metadata_budget(request.metadata, provenance.as_dict())
    return provenance


def check_link(found: MemoryRecord | None, field: str, now: float) -> None:
    """A supersession link (``supersedes``, ``superseded_by``) names a record of the
    same scope that exists, in any status (an old fact may already be invalid), and has
    not expired: an expired record is gone for every read and write, purged or not yet,
    so the answer must not depend on when a purge runs."""
    if found is None or found.is_expired(now):
        raise MemoryValidationError(f"{field} names no record in this scope", field=field)


def check_key_holder(holder: MemoryRecord | None, now: float) -> TypeGuard[MemoryRecord]:
    """Whether the record holding an add's key must be erased first: a live holder is
    a conflict; an expired one is invisible, so its key is free once it is erased (with
    its idempotency entries, as ``purge_expired`` would). After erasing it, add
    :func:`erased_key_holder` to the operation's notes, so the trail says so."""
    if holder is None:
        return False
    if not holder.is_expired(now):
        raise MemoryConflictError("the key is already used by a record in this scope")
    return True


def erased_key_holder(record_id: str) -> str:
    """The note an add leaves when it erased an expired record to free its key."""
    return f"erased expired key holder {record_id}"


def new_record(request: AddRequest, ctx: OperationContext, provenance: Provenance, *,
               digest: str | None = None,
               index_state: IndexState = IndexState.INDEXED) -> MemoryRecord:
    """Version 1 of the record an add creates (``digest``: the content hash, when the
    caller computed it already)."""
    scope = request.scope
    return MemoryRecord(
        id=new_id(), scope=scope, scope_hash=scope.scope_hash, content=request.content,
        memory_type=request.memory_type, version=1, revision=new_revision(),
        content_hash=digest if digest is not None else content_hash(request.content),
        status=request.status, created_at=ctx.now, updated_at=ctx.now, key=request.key,
        metadata=request.metadata, provenance=provenance, visibility=request.visibility,
        importance=request.importance, entity_ids=request.entity_ids,
        valid_from=request.valid_from, invalid_at=request.invalid_at,
        supersedes=request.supersedes, expires_at=request.expires_at,
        occurred_at=request.occurred_at, index_state=index_state,
    )


def apply_update(current: MemoryRecord, request: UpdateRequest, now: float) -> MemoryRecord:
    """The next version of ``current``: the requested fields replaced, everything else
    carried over, a new revision, ``version + 1``, ``updated_at = now``."""
    content = _given(request.content, current.content)
    expires_at = None if request.clear_expires_at else _given(request.expires_at,
                                                               current.expires_at)
    return attrs.evolve(
        current,
        content=content,
        content_hash=content_hash(content),
        memory_type=_given(request.memory_type, current.memory_type),
        metadata=_given(request.metadata, current.metadata),
        importance=_given(request.importance, current.importance),
        visibility=_given(request.visibility, current.visibility),
        entity_ids=_given(request.entity_ids, current.entity_ids),
        expires_at=expires_at,
        invalid_at=_given(request.invalid_at, current.invalid_at),
        occurred_at=_given(request.occurred_at, current.occurred_at),
        superseded_by=_given(request.superseded_by, current.superseded_by),
        version=current.version + 1,
        revision=new_revision(),
        updated_at=now,
        index_state=IndexState.INDEXED,
    )


def _given(value: T | None, current: T) -> T:
    return current if value is None else value


def json_kind(value: Any) -> str:
    """The JSON type of a value, where Python blurs them (``True == 1``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "structured"


def metadata_matches(metadata: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Every wanted top-level key is present with an equal value of the same JSON type:
    ``"1"`` never matches ``1`` and ``True`` never matches ``1``, as the SQL backends
    compare JSON types in storage."""
    for name, expected in wanted.items():
        if name not in metadata:
            return False
        actual = metadata[name]
        kind = json_kind(expected)
        if kind == "structured" or json_kind(actual) != kind or actual != expected:
            return False
    return True


def matches_filters(record: MemoryRecord, request: SearchRequest, now: float) -> bool:
    """A search's type, entity, metadata, visibility, source, sensitivity, validity and
    event-time filters, for a provider that applies them in Python: valid at ``as_of``
    (``now`` without one) and inside the request's event window."""
    if not record.is_valid_at(now if request.as_of is None else request.as_of):
        return False
    if not record.happened_within(*request.event_window()):
        return False
    if request.memory_types and record.memory_type not in request.memory_types:
        return False
    if request.entity_ids and not set(request.entity_ids).intersection(record.entity_ids):
        return False
    return (metadata_matches(record.metadata, request.metadata_filter)
            and request.admits(record))
