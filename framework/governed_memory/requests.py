"""Typed requests, one per operation, each holding its operation's rules.

Each validates itself (the activity port runs that before the requested event, the
policy decision and the provider call, so a rejected request never reaches storage),
checks and summarizes what came back, and says what governance sets on it and what a
trace may see of it: the port asks, and never branches on which request it runs.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Set
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar, runtime_checkable

import attrs

from governed_memory.capabilities import offered
from governed_memory.dedup import DedupMode as DedupMode  # named here too: a request field
from governed_memory.errors import (
    MemoryNotFoundError,
    MemoryStorageError,
    MemoryValidationError,
)
from governed_memory.events import ErasureEvidence
from governed_memory.limits import (
    MAX_CONTENT_BYTES,
    MAX_ENTITY_IDS,
    MAX_EPOCH_SECONDS,
    MAX_IDEMPOTENCY_KEY_BYTES,
    MAX_KEY_BYTES,
    MAX_QUERY_BYTES,
    check_identifier,
    check_json_safe,
    check_metadata_budget,
    check_page_size,
    check_text,
    is_real,
)
from governed_memory.operations import Operation
from governed_memory.ranking_options import RankingOptions
from governed_memory.records import (
    CleanupPage,
    DeleteResult,
    ErasureReceipt,
    MemoryRecord,
    MemoryType,
    MemoryVersion,
    Page,
    Provenance,
    RecordStatus,
    SearchResult,
    Visibility,
    _frozen_mapping,
)
from governed_memory.request import Checked, Request, Summary, wrong_result
from governed_memory.scope import Scope
from governed_memory.telemetry import ATTR_CONTENT, ATTR_QUERY_TEXT

if TYPE_CHECKING:
    from governed_memory.operation_context import OperationContext
    from governed_memory.settings import GovernanceSettings

ResultT = TypeVar("ResultT")


def _check_optional_text(value: str | None, field: str, max_bytes: int) -> None:
    if value is not None:
        check_text(value, field, max_bytes=max_bytes)


def _check_time(value: float | None, field: str) -> None:
    if value is None:
        return
    if not is_real(value):  # a bool, a non-number, NaN, an infinity or an int past 1e308
        raise MemoryValidationError(f"{field} must be finite UTC epoch seconds", field=field)
    if value < 0:
        raise MemoryValidationError(f"{field} must not be negative", field=field)
    if value > MAX_EPOCH_SECONDS:
        raise MemoryValidationError(
            f"{field} is past the year 9999 ({MAX_EPOCH_SECONDS:.0f}): not a date", field=field)


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


def _check_record_id(value: object, field: str = "record_id") -> None:
    check_identifier(value, field)


def _check_record_write(record_id: object, expected_revision: str | None,
                        idempotency_key: str | None) -> None:
    """What every write addressed to one existing record carries."""
    _check_record_id(record_id)
    _check_optional_text(expected_revision, "expected_revision", 256)
    _check_optional_text(idempotency_key, "idempotency_key", MAX_IDEMPOTENCY_KEY_BYTES)


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


def _check_entities(entity_ids: tuple[str, ...]) -> None:
    if len(entity_ids) > MAX_ENTITY_IDS:
        raise MemoryValidationError(
            f"entity_ids has {len(entity_ids)} entries; the limit is {MAX_ENTITY_IDS}",
            field="entity_ids",
        )
    for i, entity in enumerate(entity_ids):
        check_identifier(entity, f"entity_ids[{i}]")


def _optional_mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    return None if value is None else _frozen_mapping(value)


class _Request(Request[ResultT]):
    """A long-term memory operation: its scope (or scopes) checked by type before its
    own limits, and its result checked by the kind of value it is."""

    __slots__ = ()

    def validate(self) -> None:
        self._check_scope_types()
        self._validate()

    def _check_scope_types(self) -> None:
        """Its scope is a ``Scope`` (a request over several checks its ``scopes``)."""
        if hasattr(self, "scope") and not isinstance(getattr(self, "scope"), Scope):  # noqa: B009
            raise MemoryValidationError("scope must be a Scope", field="scope")

    def _validate(self) -> None:  # pragma: no cover - every request overrides
        raise NotImplementedError


def _reviewer(target: Operations) -> ReviewingProvider:
    return offered(target.review, target, "does not support review (capability 'review')")


def _owned(record: MemoryRecord, allowed: Set[str]) -> bool:
    return record.scope_hash in allowed and record.scope.scope_hash == record.scope_hash


def _one_record(request: Request[Any], result: object, allowed: Set[str],
                ctx: OperationContext, *, reading: bool) -> Checked[MemoryRecord]:
    """A single record: of another scope it is a violation and nothing is returned (a
    read answers "not found", a write reports a storage error); a read also hides a
    record that is not visible now."""
    if not isinstance(result, MemoryRecord):
        return wrong_result(request, result)
    if not _owned(result, allowed):
        error = (MemoryNotFoundError("no such record in this scope") if reading
                 else MemoryStorageError("provider returned a record of another scope"))
        return Checked(result, stray=(result.id,), error=error)
    if reading and not result.is_visible(ctx.now):
        return Checked(result, error=MemoryNotFoundError("no such record in this scope"))
    return Checked(result, request.summarize(result))


def _page(request: Request[Any], result: object, allowed: Set[str],
          shown: Callable[[MemoryRecord], bool]) -> Checked[Page[MemoryRecord]]:
    """A page: records of another scope are reported and left out, records the
    operation does not show (expired, pending) are left out silently."""
    if not isinstance(result, Page):
        return wrong_result(request, result)
    stray = tuple(r.id for r in result.items if not _owned(r, allowed))
    page = Page(tuple(r for r in result.items if _owned(r, allowed) and shown(r)),
                result.next_cursor)
    return Checked(page, request.summarize(page), stray)


def _deleted(request: Request[Any], result: object,
             allowed: Set[str]) -> Checked[DeleteResult]:
    if not isinstance(result, DeleteResult):
        return wrong_result(request, result)
    if result.scope_hash not in allowed:
        return Checked(result, stray=(result.record_id,),
                       error=MemoryStorageError("provider deleted in another scope"))
    return Checked(result, request.summarize(result))


class _RecordRequest(_Request[MemoryRecord]):
    """An operation answered by one record: a write's (add, update, approve) or a
    read's (``reading``: get)."""

    __slots__ = ()

    reading: ClassVar[bool] = False

    def check(self, result: MemoryRecord, allowed: Set[str],
              ctx: OperationContext) -> Checked[MemoryRecord]:
        return _one_record(self, result, allowed, ctx, reading=self.reading)

    @classmethod
    def summarize(cls, result: MemoryRecord) -> Summary:
        return Summary(record_ids=(result.id,), versions=(result.version,),
                       content_hashes=(result.content_hash,), count=1)


class _PageRequest(_Request[Page[MemoryRecord]]):
    """An operation answered by a page of records (list, the review queue)."""

    __slots__ = ()

    @classmethod
    def summarize(cls, result: Page[MemoryRecord]) -> Summary:
        return Summary(record_ids=tuple(r.id for r in result.items),
                       versions=tuple(r.version for r in result.items),
                       count=len(result.items))


class _DeletionRequest(_Request[DeleteResult]):
    """An operation that removes one record (delete, reject)."""

    __slots__ = ()

    def check(self, result: DeleteResult, allowed: Set[str],
              ctx: OperationContext) -> Checked[DeleteResult]:
        return _deleted(self, result, allowed)

    @classmethod
    def summarize(cls, result: DeleteResult) -> Summary:
        return Summary(record_ids=(result.record_id,),
                       versions=() if result.version is None else (result.version,), count=1)


@attrs.frozen(slots=True, kw_only=True)
class AddRequest(_RecordRequest):
    operation: ClassVar[Operation] = Operation.ADD
    later_fields: ClassVar[tuple[str, ...]] = ("occurred_at",)

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
        _check_optional_text(self.key, "key", MAX_KEY_BYTES)
        _check_optional_text(self.idempotency_key, "idempotency_key", MAX_IDEMPOTENCY_KEY_BYTES)
        _check_provenance(self.provenance)
        check_metadata_budget(self.metadata, self.provenance.as_dict())
        _check_importance(self.importance)
        _check_entities(self.entity_ids)
        for name in ("valid_from", "invalid_at", "expires_at", "occurred_at"):
            _check_time(getattr(self, name), name)
        _check_interval(self.valid_from, self.invalid_at)
        if self.supersedes is not None:
            _check_record_id(self.supersedes, "supersedes")
        if self.status not in (RecordStatus.ACTIVE, RecordStatus.PENDING_REVIEW):
            raise MemoryValidationError("a new record is active or pending_review",
                                        field="status")
        if not isinstance(self.dedup, DedupMode):
            raise MemoryValidationError("dedup must be a DedupMode", field="dedup")
        threshold = self.dedup_threshold
        if not is_real(threshold) or not 0 < threshold <= 1:
            raise MemoryValidationError("dedup_threshold must be in (0, 1]",
                                        field="dedup_threshold")

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

    async def send(self, target: Operations, ctx: OperationContext) -> MemoryRecord:
        return await target.add(self, ctx)


@attrs.frozen(slots=True, kw_only=True)
class GetRequest(_RecordRequest):
    operation: ClassVar[Operation] = Operation.GET
    reading: ClassVar[bool] = True

    scope: Scope
    record_id: str | None = None
    key: str | None = None

    def _validate(self) -> None:
        if (self.record_id is None) == (self.key is None):
            raise MemoryValidationError("get needs exactly one of record_id or key",
                                        field="record_id")
        if self.record_id is not None:
            _check_record_id(self.record_id)
        _check_optional_text(self.key, "key", MAX_KEY_BYTES)

    async def send(self, target: Operations, ctx: OperationContext) -> MemoryRecord:
        return await target.get(self, ctx)


@attrs.frozen(slots=True, kw_only=True)
class ListPendingRequest(_PageRequest):
    """The review queue of one exact scope: records held as ``pending_review``."""

    operation: ClassVar[Operation] = Operation.LIST_PENDING
    capability: ClassVar[str | None] = "review"

    scope: Scope
    limit: int = 20
    cursor: str | None = None

    def _validate(self) -> None:
        check_page_size(self.limit)
        _check_optional_text(self.cursor, "cursor", 2048)

    async def send(self, target: Operations, ctx: OperationContext) -> Page[MemoryRecord]:
        return await _reviewer(target).list_pending(self, ctx)

    def check(self, result: Page[MemoryRecord], allowed: Set[str],
              ctx: OperationContext) -> Checked[Page[MemoryRecord]]:
        return _page(self, result, allowed,
                     lambda r: r.status is RecordStatus.PENDING_REVIEW
                     and not r.is_expired(ctx.now))


@attrs.frozen(slots=True, kw_only=True)
class ListRequest(_PageRequest):
    operation: ClassVar[Operation] = Operation.LIST

    scope: Scope
    limit: int = 20
    cursor: str | None = None
    memory_types: tuple[MemoryType, ...] = ()

    def _validate(self) -> None:
        check_page_size(self.limit)
        _check_optional_text(self.cursor, "cursor", 2048)

    async def send(self, target: Operations, ctx: OperationContext) -> Page[MemoryRecord]:
        return await target.list(self, ctx)

    def check(self, result: Page[MemoryRecord], allowed: Set[str],
              ctx: OperationContext) -> Checked[Page[MemoryRecord]]:
        return _page(self, result, allowed, lambda r: r.is_visible(ctx.now))


@attrs.frozen(slots=True, kw_only=True)
class SearchRequest(_Request[SearchResult]):
    """A search over one or more exact scopes (a recall over several levels)."""

    operation: ClassVar[Operation] = Operation.SEARCH

    scopes: tuple[Scope, ...]
    query: str
    limit: int = 10
    memory_types: tuple[MemoryType, ...] = ()
    metadata_filter: Mapping[str, Any] = attrs.field(factory=dict, converter=_frozen_mapping)
    entity_ids: tuple[str, ...] = ()
    ranking: RankingOptions | None = None
    """This search's changes to the profile's ranking (``governed_memory.ranking_options``);
    the manager has checked them against the profile's bounds."""
    occurred_since: float | None = None
    """Only records whose ``event_time`` is at or after this (inclusive)."""
    occurred_before: float | None = None
    """Only records whose ``event_time`` is before this (exclusive)."""
    as_of: float | None = None
    """Search memory as it stood at this time: records that had happened by then
    (``event_time <= as_of``) and were valid then (``valid_from <= as_of < invalid_at``,
    so superseded facts answer for their time), with recency measured from it. Expiry,
    deletion and review still apply as of now: what is gone stays gone."""

    def event_window(self) -> tuple[float | None, float | None]:
        """``[since, before)`` on ``event_time`` that this search's filters and ``as_of``
        leave: ``as_of`` bounds it from above like ``occurred_before = as_of + ε``."""
        before = self.occurred_before
        if self.as_of is not None:
            after_as_of = math.nextafter(self.as_of, math.inf)
            before = after_as_of if before is None else min(before, after_as_of)
        return self.occurred_since, before

    def target_scopes(self) -> tuple[Scope, ...]:
        return self.scopes

    def _check_scope_types(self) -> None:
        if not isinstance(self.scopes, tuple) or not all(
            isinstance(scope, Scope) for scope in self.scopes
        ):
            raise MemoryValidationError("scopes must be a tuple of Scope", field="scopes")

    def traced_text(self) -> dict[str, str]:
        return {ATTR_QUERY_TEXT: self.query}

    def _validate(self) -> None:
        if not self.scopes:
            raise MemoryValidationError("search needs at least one scope", field="scopes")
        if len(self.scopes) > 16:
            raise MemoryValidationError("search spans at most 16 scopes", field="scopes")
        tenants = {scope.tenant_id for scope in self.scopes}
        if len(tenants) > 1:
            raise MemoryValidationError("one search never spans tenants", field="scopes")
        check_text(self.query, "query", max_bytes=MAX_QUERY_BYTES)
        check_page_size(self.limit)
        check_json_safe(self.metadata_filter, "metadata_filter")
        for name, value in self.metadata_filter.items():
            if isinstance(value, Mapping | list | tuple):
                raise MemoryValidationError(
                    "metadata_filter compares scalar values for equality",
                    field=f"metadata_filter.{name}",
                )
            if "\x00" in name or (isinstance(value, str) and "\x00" in value):
                # Datastores disagree on NUL inside JSON text (SQLite's JSON functions stop
                # at it, PostgreSQL refuses it): no filter can promise one answer.
                raise MemoryValidationError("metadata_filter keys and values cannot hold NUL",
                                            field=f"metadata_filter.{name}")
        _check_entities(self.entity_ids)
        for name in ("occurred_since", "occurred_before", "as_of"):
            _check_time(getattr(self, name), name)
        if (self.occurred_since is not None and self.occurred_before is not None
                and self.occurred_since >= self.occurred_before):
            raise MemoryValidationError("occurred_since must be before occurred_before (the "
                                        "window is [occurred_since, occurred_before))",
                                        field="occurred_since")
        if self.ranking is not None:
            if not isinstance(self.ranking, RankingOptions):
                raise MemoryValidationError("ranking is RankingOptions", field="ranking")
            self.ranking.validate()

    async def send(self, target: Operations, ctx: OperationContext) -> SearchResult:
        return await target.search(self, ctx)

    def check(self, result: SearchResult, allowed: Set[str],
              ctx: OperationContext) -> Checked[SearchResult]:
        if not isinstance(result, SearchResult):
            return wrong_result(self, result)
        if result.snapshot_id is not None:
            ctx.notes.add(f"snapshot {result.snapshot_id}")  # where replay finds it
        stray = tuple(h.record.id for h in result.hits if not _owned(h.record, allowed))
        moment = ctx.now if self.as_of is None else self.as_of
        window = self.event_window()
        # What the search asked to leave out is left out even if a provider returned it.
        hits = tuple(h for h in result.hits
                     if _owned(h.record, allowed) and h.record.is_visible(ctx.now)
                     and h.record.is_valid_at(moment) and h.record.happened_within(*window))
        shown = attrs.evolve(result, hits=hits)  # keeps candidates, snapshot_id
        return Checked(shown, self.summarize(shown), stray)

    @classmethod
    def summarize(cls, result: SearchResult) -> Summary:
        return Summary(record_ids=tuple(h.record.id for h in result.hits),
                       versions=tuple(h.record.version for h in result.hits),
                       count=len(result.hits))


@attrs.frozen(slots=True, kw_only=True)
class UpdateRequest(_RecordRequest):
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
        _check_record_id(self.record_id)
        if self.superseded_by is not None:
            _check_record_id(self.superseded_by, "superseded_by")
        _check_optional_text(self.expected_revision, "expected_revision", 256)
        _check_optional_text(self.content, "content", MAX_CONTENT_BYTES)
        _check_optional_text(self.idempotency_key, "idempotency_key", MAX_IDEMPOTENCY_KEY_BYTES)
        if self.metadata is not None:
            check_metadata_budget(self.metadata, {})
        _check_importance(self.importance)
        if self.entity_ids is not None:
            _check_entities(self.entity_ids)
        _check_time(self.expires_at, "expires_at")
        _check_time(self.invalid_at, "invalid_at")
        _check_time(self.occurred_at, "occurred_at")
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

    async def send(self, target: Operations, ctx: OperationContext) -> MemoryRecord:
        return await target.update(self, ctx)


@attrs.frozen(slots=True, kw_only=True)
class DeleteRequest(_DeletionRequest):
    operation: ClassVar[Operation] = Operation.DELETE

    scope: Scope
    record_id: str
    expected_revision: str | None = None
    hard: bool = False
    idempotency_key: str | None = None

    def _validate(self) -> None:
        _check_record_write(self.record_id, self.expected_revision, self.idempotency_key)

    async def send(self, target: Operations, ctx: OperationContext) -> DeleteResult:
        return await target.delete(self, ctx)


@attrs.frozen(slots=True, kw_only=True)
class HistoryRequest(_Request[tuple[MemoryVersion, ...]]):
    operation: ClassVar[Operation] = Operation.HISTORY

    scope: Scope
    record_id: str

    def _validate(self) -> None:
        _check_record_id(self.record_id)

    async def send(self, target: Operations,
                   ctx: OperationContext) -> tuple[MemoryVersion, ...]:
        return await target.history(self, ctx)

    def check(self, result: tuple[MemoryVersion, ...], allowed: Set[str],
              ctx: OperationContext) -> Checked[tuple[MemoryVersion, ...]]:
        if not (isinstance(result, tuple)
                and all(isinstance(v, MemoryVersion) for v in result)):
            return wrong_result(self, result)
        stray = tuple(v.record.id for v in result if not _owned(v.record, allowed))
        versions = tuple(v for v in result if _owned(v.record, allowed))
        return Checked(versions, self.summarize(versions), stray)

    @classmethod
    def summarize(cls, result: tuple[MemoryVersion, ...]) -> Summary:
        return Summary(record_ids=tuple(dict.fromkeys(v.record.id for v in result)),
                       versions=tuple(v.record.version for v in result), count=len(result))


@attrs.frozen(slots=True, kw_only=True)
class DeleteAllRequest(_Request[int]):
    """Physically erase one exact scope, live and expired records alike."""

    operation: ClassVar[Operation] = Operation.DELETE_ALL

    scope: Scope

    def _validate(self) -> None:
        return None

    async def send(self, target: Operations, ctx: OperationContext) -> int:
        return await target.delete_all(self, ctx)

    def check(self, result: int, allowed: Set[str],
              ctx: OperationContext) -> Checked[int]:
        if isinstance(result, bool) or not isinstance(result, int):
            return wrong_result(self, result)
        return Checked(result, self.summarize(result))

    @classmethod
    def summarize(cls, result: int) -> Summary:
        return Summary(count=result)


@attrs.frozen(slots=True, kw_only=True)
class DeleteUserRequest(_Request[ErasureReceipt]):
    """Erase one user in every scope of their tenant; the result is an erasure receipt."""

    operation: ClassVar[Operation] = Operation.DELETE_USER

    tenant_id: str
    user_id: str

    def tenant(self, default: str) -> str:
        return self.tenant_id

    def _validate(self) -> None:
        check_identifier(self.tenant_id, "tenant_id")
        check_identifier(self.user_id, "user_id")

    async def send(self, target: Operations, ctx: OperationContext) -> ErasureReceipt:
        return await target.delete_user(self, ctx)

    def check(self, result: ErasureReceipt, allowed: Set[str],
              ctx: OperationContext) -> Checked[ErasureReceipt]:
        if not isinstance(result, ErasureReceipt):
            return wrong_result(self, result)
        if (result.tenant_id, result.user_id) != (self.tenant_id, self.user_id):
            return Checked(result, error=MemoryStorageError("provider erased another subject"))
        return Checked(result, self.summarize(result))

    @classmethod
    def summarize(cls, result: ErasureReceipt) -> Summary:
        return Summary(count=result.total, scope_hashes=result.scope_hashes,
                       reasons=(f"receipt {result.receipt_hash}",),
                       erasure=erasure_evidence(result))


@attrs.frozen(slots=True, kw_only=True)
class PurgeExpiredRequest(_Request[CleanupPage]):
    operation: ClassVar[Operation] = Operation.PURGE_EXPIRED

    scope: Scope
    limit: int = 100
    after: str | None = None

    def _validate(self) -> None:
        check_page_size(self.limit)
        _check_optional_text(self.after, "after", 2048)

    async def send(self, target: Operations, ctx: OperationContext) -> CleanupPage:
        return await target.purge_expired(self, ctx)

    def check(self, result: CleanupPage, allowed: Set[str],
              ctx: OperationContext) -> Checked[CleanupPage]:
        if not isinstance(result, CleanupPage):
            return wrong_result(self, result)
        return Checked(result, self.summarize(result))

    @classmethod
    def summarize(cls, result: CleanupPage) -> Summary:
        return Summary(count=result.deleted)


@attrs.frozen(slots=True, kw_only=True)
class ApproveRequest(_RecordRequest):
    """Make a ``pending_review`` record active (a new version), so reads can see it."""

    operation: ClassVar[Operation] = Operation.APPROVE
    capability: ClassVar[str | None] = "review"

    scope: Scope
    record_id: str
    expected_revision: str | None = None
    idempotency_key: str | None = None

    def _validate(self) -> None:
        _check_record_write(self.record_id, self.expected_revision, self.idempotency_key)

    async def send(self, target: Operations, ctx: OperationContext) -> MemoryRecord:
        return await _reviewer(target).approve(self, ctx)


@attrs.frozen(slots=True, kw_only=True)
class RejectRequest(_DeletionRequest):
    """Erase a ``pending_review`` record and its history: it was never accepted, so
    nothing of it is kept (the events still record that it was rejected)."""

    operation: ClassVar[Operation] = Operation.REJECT
    capability: ClassVar[str | None] = "review"

    scope: Scope
    record_id: str
    expected_revision: str | None = None
    idempotency_key: str | None = None

    def _validate(self) -> None:
        _check_record_write(self.record_id, self.expected_revision, self.idempotency_key)

    async def send(self, target: Operations, ctx: OperationContext) -> DeleteResult:
        return await _reviewer(target).reject(self, ctx)


def erasure_evidence(receipt: ErasureReceipt) -> ErasureEvidence:
    """What of a receipt goes into the trail: all of it but the user id."""
    return ErasureEvidence(receipt.request_id, dict(receipt.counts), receipt.started_at,
                           receipt.completed_at, receipt.receipt_hash)


def _no_summary(result: object) -> Summary:
    raise TypeError(f"no committed event for a {type(result).__name__} result")


@functools.singledispatch
def committed_summary(result: object) -> Summary:
    """What a write's committed event says about its result: the summary of the request
    kind that answers with it, so an event a provider stores in its outbox
    (``outbox.finish_committed_event``) says what the port's own would."""
    return _no_summary(result)


committed_summary.register(MemoryRecord, _RecordRequest.summarize)
committed_summary.register(DeleteResult, _DeletionRequest.summarize)
committed_summary.register(ErasureReceipt, DeleteUserRequest.summarize)
committed_summary.register(CleanupPage, PurgeExpiredRequest.summarize)
committed_summary.register(int, DeleteAllRequest.summarize)
committed_summary.register(bool, _no_summary)  # an int, but never a count


MemoryRequest = (
    AddRequest | GetRequest | ListRequest | SearchRequest | UpdateRequest | DeleteRequest
    | HistoryRequest | DeleteAllRequest | DeleteUserRequest | PurgeExpiredRequest
    | ApproveRequest | RejectRequest | ListPendingRequest
)


class Operations(Protocol):
    """What the requests are sent to (each request's ``send`` calls one of these): the
    operations of ``governed_memory.provider.MemoryProvider``, which adds its lifecycle,
    capabilities and the other feature accessors. Declared here so the requests and the
    provider protocol do not import each other."""

    async def add(self, request: AddRequest, ctx: OperationContext) -> MemoryRecord: ...

    async def get(self, request: GetRequest, ctx: OperationContext) -> MemoryRecord: ...

    async def list(self, request: ListRequest, ctx: OperationContext) -> Page[MemoryRecord]: ...

    async def search(self, request: SearchRequest, ctx: OperationContext) -> SearchResult: ...

    async def update(self, request: UpdateRequest, ctx: OperationContext) -> MemoryRecord: ...

    async def delete(self, request: DeleteRequest, ctx: OperationContext) -> DeleteResult: ...

    async def history(
        self, request: HistoryRequest, ctx: OperationContext
    ) -> tuple[MemoryVersion, ...]: ...

    async def delete_all(self, request: DeleteAllRequest, ctx: OperationContext) -> int: ...

    async def delete_user(
        self, request: DeleteUserRequest, ctx: OperationContext
    ) -> ErasureReceipt: ...

    async def purge_expired(
        self, request: PurgeExpiredRequest, ctx: OperationContext
    ) -> CleanupPage: ...

    @property
    def review(self) -> ReviewingProvider | None:
        """Deciding records held for review (capability ``review``)."""
        ...


@runtime_checkable
class ReviewingProvider(Protocol):
    """The ``review`` capability: deciding records held as ``pending_review``.

    - ``approve`` turns a pending record active as a new version whose history entry
      has operation ``approve``;
    - ``reject`` erases a pending record with its history (it was never accepted) and
      returns a hard ``DeleteResult``;
    - either on a record that is not pending raises ``MemoryConflictError``; an unknown
      id raises ``MemoryNotFoundError``; a stale ``expected_revision`` is a conflict;
    - ``list_pending`` pages through one scope's pending, unexpired records by id (the
      review queue), with a cursor like ``list``.
    """

    async def approve(self, request: ApproveRequest, ctx: OperationContext) -> MemoryRecord: ...

    async def reject(self, request: RejectRequest, ctx: OperationContext) -> DeleteResult: ...

    async def list_pending(self, request: ListPendingRequest,
                           ctx: OperationContext) -> Page[MemoryRecord]: ...
