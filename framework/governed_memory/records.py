"""The memory record and the values providers return around it.

Everything here is a frozen attrs value. Providers build fresh instances on every read,
so a caller holding a record can never see (or cause) a later change to it.
"""

from __future__ import annotations

import enum
import hashlib
import types
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

import attrs

from governed_memory.canonical import canonical_json
from governed_memory.errors import MemoryValidationError
from governed_memory.limits import MAX_JSON_DEPTH
from governed_memory.scope import Scope

T = TypeVar("T")


class MemoryType(enum.StrEnum):
    FACT = "fact"
    PREFERENCE = "preference"
    DECISION = "decision"
    EPISODE = "episode"
    SUMMARY = "summary"
    NOTE = "note"


class RecordStatus(enum.StrEnum):
    ACTIVE = "active"
    SUPERSEDED = "superseded"
    DELETED = "deleted"
    PENDING_REVIEW = "pending_review"


class Visibility(enum.StrEnum):
    """Who beyond the owning scope may be shown the record by a host application."""

    PRIVATE = "private"
    SHARED = "shared"


class IndexState(enum.StrEnum):
    INDEXED = "indexed"
    PENDING = "pending"
    FAILED = "failed"
    NOT_INDEXED = "not_indexed"


class VersionOperation(enum.StrEnum):
    ADD = "add"
    UPDATE = "update"
    DELETE = "delete"
    APPROVE = "approve"


def json_copy(value: Any, _depth: int = 0) -> Any:
    """A deep copy in plain JSON shapes (mappings to dicts, tuples to lists).

    Values JSON cannot hold are kept as they are, for validation to name them; nesting
    past the JSON depth limit is refused here, before it can exhaust the stack.
    """
    if _depth > MAX_JSON_DEPTH:
        raise MemoryValidationError(f"metadata nests deeper than {MAX_JSON_DEPTH}",
                                    field="metadata")
    if isinstance(value, Mapping):
        return {k: json_copy(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_copy(v, _depth + 1) for v in value]
    return value


def _frozen_mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """A read-only view over a private deep copy: neither the caller's later changes
    nor a reader's can reach a record."""
    if value is None:
        return types.MappingProxyType({})
    if isinstance(value, types.MappingProxyType):
        return value
    if not isinstance(value, Mapping):
        raise TypeError(f"expected a mapping, got {type(value).__name__}")
    return types.MappingProxyType(json_copy(value))


def content_hash(content: str) -> str:
    return "sha256:" + hashlib.sha256(content.encode("utf-8")).hexdigest()


@attrs.frozen(slots=True)
class Provenance:
    """Where a memory came from. Provenance is evidence, never instructions."""

    source_type: str | None = None
    source_id: str | None = None
    session_id: str | None = None
    run_id: str | None = None
    agent_id: str | None = None
    operation_id: str | None = None

    def as_dict(self) -> dict[str, str]:
        return {k: v for k, v in attrs.asdict(self).items() if v is not None}


@attrs.frozen(slots=True, eq=True, hash=False, kw_only=True)
class MemoryRecord:
    id: str
    scope: Scope
    scope_hash: str
    content: str
    memory_type: MemoryType
    version: int
    revision: str
    content_hash: str
    status: RecordStatus
    created_at: float
    updated_at: float
    key: str | None = None
    metadata: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_mapping)
    provenance: Provenance = attrs.field(factory=Provenance)
    visibility: Visibility = Visibility.PRIVATE
    importance: float = 0.5
    entity_ids: tuple[str, ...] = ()
    valid_from: float | None = None
    invalid_at: float | None = None
    supersedes: str | None = None
    superseded_by: str | None = None
    expires_at: float | None = None
    index_state: IndexState = IndexState.INDEXED
    occurred_at: float | None = None
    """When what the record tells happened (a conversation turn's time, an event's date),
    as opposed to ``created_at``, when it was written: a conversation backfilled today
    happened months ago. ``None`` when nobody said; see :attr:`event_time`."""

    @property
    def event_time(self) -> float:
        """The time recency, ``occurred_*`` filters and as-of searches measure: the
        record's ``occurred_at``, or its first write when it has none."""
        return self.created_at if self.occurred_at is None else self.occurred_at

    def is_valid_at(self, moment: float) -> bool:
        """Inside the validity interval ``[valid_from, invalid_at)``."""
        return ((self.valid_from is None or self.valid_from <= moment)
                and (self.invalid_at is None or moment < self.invalid_at))

    def happened_within(self, since: float | None, before: float | None) -> bool:
        """``event_time`` inside ``[since, before)`` (an open end when ``None``)."""
        moment = self.event_time
        return (since is None or moment >= since) and (before is None or moment < before)

    def is_expired(self, now: float) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    def is_visible(self, now: float) -> bool:
        """What every ordinary read may return: active and not expired."""
        return self.status is RecordStatus.ACTIVE and not self.is_expired(now)


@attrs.frozen(slots=True)
class MemoryVersion:
    """One entry of a record's history: the record as it was after ``operation``."""

    record: MemoryRecord
    operation: VersionOperation
    recorded_at: float
    operation_id: str | None = None


@attrs.frozen(slots=True)
class Page(Generic[T]):
    """A bounded page. Pass ``next_cursor`` back to continue, even after an empty page."""

    items: tuple[T, ...]
    next_cursor: str | None = None


@attrs.frozen(slots=True)
class SignalScore:
    """One ranking signal's contribution to a hit: its raw value and its rank among candidates."""

    name: str
    value: float
    rank: int
    weight: float = 1.0


@attrs.frozen(slots=True)
class HitExplanation:
    signals: tuple[SignalScore, ...]
    tie_break: str = "score desc, id asc"


@attrs.frozen(slots=True)
class SearchHit:
    record: MemoryRecord
    score: float
    rank: int
    explanation: HitExplanation


@attrs.frozen(slots=True)
class SearchResult:
    hits: tuple[SearchHit, ...]
    candidates: int = 0
    snapshot_id: str | None = attrs.field(default=None, eq=False)
    """The stored retrieval snapshot of this search, for ``manager.replay`` (``None``
    when the provider keeps none). Not part of equality: two searches that returned
    the same hits are equal results, each recorded by its own snapshot."""
    next_cursor: str | None = attrs.field(default=None, eq=False)
    """Pass it back as ``search(..., cursor=)`` for the next page of the same search
    (``governed_memory.search_pages``); ``None`` on the last page."""

    @property
    def records(self) -> tuple[MemoryRecord, ...]:
        return tuple(hit.record for hit in self.hits)


@attrs.frozen(slots=True)
class DeleteResult:
    record_id: str
    scope_hash: str
    hard: bool
    version: int | None = None
    revision: str | None = None


@attrs.frozen(slots=True)
class CleanupPage:
    """Physical removals of one bounded sweep; continue while ``next_cursor`` is set."""

    deleted: int
    next_cursor: str | None = None


@attrs.frozen(slots=True)
class ErasureReceipt:
    """Evidence that one data subject was erased: what was removed where, and when.

    ``receipt_hash`` covers every other field, so a stored receipt cannot be edited
    without the change showing.
    """

    request_id: str
    tenant_id: str
    user_id: str
    counts: Mapping[str, int] = attrs.field(converter=_frozen_mapping)
    scope_hashes: tuple[str, ...]
    started_at: float
    completed_at: float
    receipt_hash: str = ""

    def body(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "tenant_id": self.tenant_id,
            "user_id": self.user_id,
            "counts": dict(sorted(self.counts.items())),
            "scope_hashes": sorted(self.scope_hashes),
            "started_at": self.started_at,
            "completed_at": self.completed_at,
        }

    def sealed(self) -> ErasureReceipt:
        digest = hashlib.sha256(canonical_json(self.body()).encode()).hexdigest()
        return attrs.evolve(self, receipt_hash="sha256:" + digest)

    def verify(self) -> bool:
        return self.sealed().receipt_hash == self.receipt_hash

    @property
    def total(self) -> int:
        return int(self.counts.get("records", 0))
