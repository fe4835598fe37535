"""The requests that write one record: add, update, delete.

These are what a caller shapes most freely (content, metadata, provenance, times,
entities), so their rules are the longest, and an add is the one request governance
changes on its way to the provider (a review hold, the profile's dedup mode). Kept
together, and apart from the reads, so what a write must hold reads in one place.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import attrs

from governed_memory.dedup import DedupMode
from governed_memory.errors import MemoryValidationError
from governed_memory.limits import (
    MAX_CONTENT_BYTES,
    MAX_IDEMPOTENCY_KEY_BYTES,
    MAX_KEY_BYTES,
    check_metadata_budget,
    check_text,
    is_real,
)
from governed_memory.operations import Operation
from governed_memory.records import (
    DeleteResult,
    MemoryRecord,
    MemoryType,
    Provenance,
    RecordStatus,
    Visibility,
    _frozen_mapping,
)
from governed_memory.request_fields import (
    check_entities,
    check_optional_text,
    check_record_id,
    check_record_write,
    check_similarity,
    check_time,
)
from governed_memory.request_kinds import DeletionRequest, RecordRequest
from governed_memory.scope import Scope
from governed_memory.telemetry import ATTR_CONTENT

if TYPE_CHECKING:
    from governed_memory.operation_context import OperationContext
    from governed_memory.settings import GovernanceSettings


def _provenance(value: object) -> Provenance:
    """A ``Provenance``, or a mapping of its fields (``{"source_type": "web"}``): the
    shape a caller naturally writes, checked strictly (unknown fields, non-strings)."""
    if isinstance(value, Provenance):
        return value
    if value is None:
        return Provenance()
    if isinstance(value, Mapping):
        from governed_memory.converter import structure

        try:
            return structure(dict(value), Provenance)
        except MemoryValidationError as exc:
            raise MemoryValidationError(f"provenance: {exc}", field="provenance") from None
    raise MemoryValidationError(
        f"provenance must be a Provenance or a mapping of its fields, not "
        f"{type(value).__name__}", field="provenance")


def _check_provenance(provenance: Provenance) -> None:
    if not isinstance(provenance, Provenance):
        raise MemoryValidationError("provenance must be a Provenance", field="provenance")
    for name, value in provenance.as_dict().items():
        check_text(value, f"provenance.{name}", max_bytes=1024)


def _check_interval(valid_from: float | None, invalid_at: float | None) -> None:
    if valid_from is not None and invalid_at is not None and valid_from >= invalid_at:
        raise MemoryValidationError("valid_from must be before invalid_at (a record is valid "
                                    "from valid_from until invalid_at)", field="valid_from")


def _check_importance(value: float | None) -> None:
    if value is None:
        return
    if not is_real(value) or not 0.0 <= value <= 1.0:
        raise MemoryValidationError("importance must be a number between 0 and 1",
                                    field="importance")


def _optional_mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    return None if value is None else _frozen_mapping(value)


@attrs.frozen(slots=True, kw_only=True)
class AddRequest(RecordRequest):
    operation: ClassVar[Operation] = Operation.ADD
    later_fields: ClassVar[tuple[str, ...]] = ("occurred_at",)
    reviewable: ClassVar[bool] = True
    """A new record can wait for a reviewer (``status = pending_review``)."""

    scope: Scope
    content: str
    memory_type: MemoryType = MemoryType.NOTE
    key: str | None = None
    metadata: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_mapping)
    provenance: Provenance = attrs.field(factory=Provenance, converter=_provenance)
    visibility: Visibility = Visibility.PRIVATE
    importance: float = 0.5
    entity_ids: tuple[str, ...] = ()
    valid_from: float | None = None
    invalid_at: float | None = None
    supersedes: str | None = None
    expires_at: float | None = None
    occurred_at: float | None = None
    """When it happened (``MemoryRecord.occurred_at``); ``None``: when it is written."""
    idempotency_key: str | None = None
    status: RecordStatus = RecordStatus.ACTIVE
    """Set by governance (a review decision), never by the caller of the manager."""
    dedup: DedupMode = DedupMode.OFF
    """Set by governance (the profile's ``[write] dedup``), never by the caller."""
    dedup_threshold: float = 0.95
    """With ``dedup = similarity``: the similarity at or above which it is a duplicate."""

    def _validate(self) -> None:
        check_text(self.content, "content", max_bytes=MAX_CONTENT_BYTES)
        check_optional_text(self.key, "key", MAX_KEY_BYTES)
        check_optional_text(self.idempotency_key, "idempotency_key", MAX_IDEMPOTENCY_KEY_BYTES)
        _check_provenance(self.provenance)
        check_metadata_budget(self.metadata, self.provenance.as_dict())
        _check_importance(self.importance)
        check_entities(self.entity_ids)
        for name in ("valid_from", "invalid_at", "expires_at", "occurred_at"):
            check_time(getattr(self, name), name)
        _check_interval(self.valid_from, self.invalid_at)
        if self.supersedes is not None:
            check_record_id(self.supersedes, "supersedes")
        if self.status not in (RecordStatus.ACTIVE, RecordStatus.PENDING_REVIEW):
            raise MemoryValidationError("a new record is active or pending_review",
                                        field="status")
        if not isinstance(self.dedup, DedupMode):
            raise MemoryValidationError("dedup must be a DedupMode", field="dedup")
        check_similarity(self.dedup_threshold)

    def validate_at(self, now: float) -> None:
        # A new record that would already be expired is invisible to every read from the
        # moment it is written: writing it is a mistake, not a memory. (An update may
        # still set an expiry that has passed: that is how a caller ends a record's life
        # without a tombstone.)
        if self.expires_at is not None and self.expires_at <= now:
            raise MemoryValidationError("expires_at must be in the future for a new record",
                                        field="expires_at")

    def governed(self, settings: GovernanceSettings, *,
                 held_for_review: bool) -> AddRequest:
        """Held for review when a policy said so, and the profile's dedup mode."""
        request = self
        if held_for_review:
            request = attrs.evolve(request, status=RecordStatus.PENDING_REVIEW)
        if settings.dedup is not DedupMode.OFF:
            request = attrs.evolve(request, dedup=settings.dedup,
                                   dedup_threshold=settings.dedup_threshold)
        return request

    def traced_text(self) -> dict[str, str]:
        return {ATTR_CONTENT: self.content}

    async def send(self, target: WriteTarget, ctx: OperationContext) -> MemoryRecord:
        return await target.add(self, ctx)


@attrs.frozen(slots=True, kw_only=True)
class UpdateRequest(RecordRequest):
    """Fields left ``None`` keep their value; ``clear_expires_at`` removes an expiry."""

    operation: ClassVar[Operation] = Operation.UPDATE
    later_fields: ClassVar[tuple[str, ...]] = ("occurred_at",)

    scope: Scope
    record_id: str
    expected_revision: str | None = None
    content: str | None = None
    memory_type: MemoryType | None = None
    metadata: Mapping[str, Any] | None = attrs.field(default=None, converter=_optional_mapping)
    importance: float | None = None
    visibility: Visibility | None = None
    entity_ids: tuple[str, ...] | None = None
    expires_at: float | None = None
    clear_expires_at: bool = False
    invalid_at: float | None = None
    occurred_at: float | None = None
    """A corrected event time (``MemoryRecord.occurred_at``)."""
    idempotency_key: str | None = None
    superseded_by: str | None = None
    """The id of the record that replaces this one (set with ``invalid_at`` when a
    newer fact supersedes it; the record stays readable for "as of" questions)."""

    def _validate(self) -> None:
        check_record_id(self.record_id)
        if self.superseded_by is not None:
            check_record_id(self.superseded_by, "superseded_by")
        check_optional_text(self.expected_revision, "expected_revision", 256)
        check_optional_text(self.content, "content", MAX_CONTENT_BYTES)
        check_optional_text(self.idempotency_key, "idempotency_key", MAX_IDEMPOTENCY_KEY_BYTES)
        if self.metadata is not None:
            check_metadata_budget(self.metadata, {})
        _check_importance(self.importance)
        if self.entity_ids is not None:
            check_entities(self.entity_ids)
        check_time(self.expires_at, "expires_at")
        check_time(self.invalid_at, "invalid_at")
        check_time(self.occurred_at, "occurred_at")
        if self.clear_expires_at and self.expires_at is not None:
            raise MemoryValidationError("set expires_at or clear it, not both",
                                        field="expires_at")
        if not self.changes_something():
            raise MemoryValidationError(
                "update changes nothing: give at least one of content, memory_type, "
                "metadata, importance, visibility, entity_ids, expires_at, "
                "clear_expires_at, invalid_at, occurred_at, superseded_by", field="update")

    def changes_something(self) -> bool:
        """Whether any field is set: an update of nothing would still issue a version."""
        return self.clear_expires_at or any(getattr(self, name) is not None for name in (
            "content", "memory_type", "metadata", "importance", "visibility", "entity_ids",
            "expires_at", "invalid_at", "occurred_at", "superseded_by"))

    def traced_text(self) -> dict[str, str]:
        return {} if self.content is None else {ATTR_CONTENT: self.content}

    async def send(self, target: WriteTarget, ctx: OperationContext) -> MemoryRecord:
        return await target.update(self, ctx)


@attrs.frozen(slots=True, kw_only=True)
class DeleteRequest(DeletionRequest):
    operation: ClassVar[Operation] = Operation.DELETE

    scope: Scope
    record_id: str
    expected_revision: str | None = None
    hard: bool = False
    idempotency_key: str | None = None

    def _validate(self) -> None:
        check_record_write(self.record_id, self.expected_revision, self.idempotency_key)

    async def send(self, target: WriteTarget, ctx: OperationContext) -> DeleteResult:
        return await target.delete(self, ctx)


class WriteTarget(Protocol):
    """What the write requests are sent to: the write operations of
    ``governed_memory.requests.Operations``."""

    async def add(self, request: AddRequest, ctx: OperationContext) -> MemoryRecord: ...

    async def update(self, request: UpdateRequest, ctx: OperationContext) -> MemoryRecord: ...

    async def delete(self, request: DeleteRequest, ctx: OperationContext) -> DeleteResult: ...
