"""The requests that read: get, list, search, history.

A read changes nothing, so what matters is what it may return: only records of the
scopes it was allowed, only what is visible now (or, for a search ``as_of``, what was
valid then), and nothing the search's own filters left out, even if a provider returned
it. Each read's check says so for its shape of answer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Set
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import attrs

from governed_memory.errors import MemoryValidationError
from governed_memory.limits import (
    MAX_KEY_BYTES,
    MAX_QUERY_BYTES,
    check_json_safe,
    check_page_size,
    check_text,
)
from governed_memory.operations import Operation
from governed_memory.ranking_options import RankingOptions
from governed_memory.read_filters import check_read_filters, passes_read_filters
from governed_memory.records import (
    MemoryRecord,
    MemoryType,
    MemoryVersion,
    Page,
    SearchResult,
    Visibility,
    _frozen_mapping,
)
from governed_memory.request import Checked, Summary, wrong_result
from governed_memory.request_fields import (
    check_entities,
    check_optional_text,
    check_record_id,
    check_time,
)
from governed_memory.request_kinds import LongTermRequest, PageRequest, RecordRequest, owned
from governed_memory.scope import Scope
from governed_memory.telemetry import ATTR_QUERY_TEXT

if TYPE_CHECKING:
    from governed_memory.operation_context import OperationContext


@attrs.frozen(slots=True, kw_only=True)
class GetRequest(RecordRequest):
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
            check_record_id(self.record_id)
        check_optional_text(self.key, "key", MAX_KEY_BYTES)

    async def send(self, target: ReadTarget, ctx: OperationContext) -> MemoryRecord:
        return await target.get(self, ctx)


@attrs.frozen(slots=True, kw_only=True)
class ListRequest(PageRequest):
    operation: ClassVar[Operation] = Operation.LIST

    scope: Scope
    limit: int = 20
    cursor: str | None = None
    memory_types: tuple[MemoryType, ...] = ()

    def _validate(self) -> None:
        check_page_size(self.limit)
        check_optional_text(self.cursor, "cursor", 2048)

    async def send(self, target: ReadTarget, ctx: OperationContext) -> Page[MemoryRecord]:
        return await target.list(self, ctx)

    def shows(self, record: MemoryRecord, now: float) -> bool:
        return record.is_visible(now)


@attrs.frozen(slots=True, kw_only=True)
class SearchRequest(LongTermRequest[SearchResult]):
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
    visibility: Visibility | None = None
    """Only records of this visibility (``governed_memory.read_filters``)."""
    source_types: tuple[str, ...] = ()
    """Only records whose ``provenance.source_type`` is one of these; a record with no
    source type never matches."""
    sensitivity: tuple[str, ...] = ()
    """Only records whose sensitivity label (the string ``metadata["sensitivity"]``) is
    one of these."""
    exclude_sensitivity: tuple[str, ...] = ()
    """No record whose sensitivity label is one of these; unlabelled records stay."""

    def admits(self, record: MemoryRecord) -> bool:
        """Whether ``record`` passes this search's visibility, source and sensitivity
        filters (a provider that filters in Python applies them before its top-k)."""
        return passes_read_filters(record, visibility=self.visibility,
                                   source_types=self.source_types,
                                   sensitivity=self.sensitivity,
                                   exclude_sensitivity=self.exclude_sensitivity)

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
        check_entities(self.entity_ids)
        check_read_filters(self.visibility, self.source_types, self.sensitivity,
                           self.exclude_sensitivity)
        for name in ("occurred_since", "occurred_before", "as_of"):
            check_time(getattr(self, name), name)
        if (self.occurred_since is not None and self.occurred_before is not None
                and self.occurred_since >= self.occurred_before):
            raise MemoryValidationError("occurred_since must be before occurred_before (the "
                                        "window is [occurred_since, occurred_before))",
                                        field="occurred_since")
        if self.ranking is not None:
            if not isinstance(self.ranking, RankingOptions):
                raise MemoryValidationError("ranking is RankingOptions", field="ranking")
            self.ranking.validate()

    async def send(self, target: ReadTarget, ctx: OperationContext) -> SearchResult:
        return await target.search(self, ctx)

    def check(self, result: SearchResult, allowed: Set[str],
              ctx: OperationContext) -> Checked[SearchResult]:
        if not isinstance(result, SearchResult):
            return wrong_result(self, result)
        if result.snapshot_id is not None:
            ctx.notes.add(f"snapshot {result.snapshot_id}")  # where replay finds it
        stray = tuple(h.record.id for h in result.hits if not owned(h.record, allowed))
        moment = ctx.now if self.as_of is None else self.as_of
        window = self.event_window()
        # What the search asked to leave out is left out even if a provider returned it.
        hits = tuple(h for h in result.hits
                     if owned(h.record, allowed) and h.record.is_visible(ctx.now)
                     and h.record.is_valid_at(moment) and h.record.happened_within(*window)
                     and self.admits(h.record))
        shown = attrs.evolve(result, hits=hits)  # keeps candidates, snapshot_id
        return Checked(shown, self.summarize(shown), stray)

    @classmethod
    def summarize(cls, result: SearchResult) -> Summary:
        return Summary(record_ids=tuple(h.record.id for h in result.hits),
                       versions=tuple(h.record.version for h in result.hits),
                       count=len(result.hits))


@attrs.frozen(slots=True, kw_only=True)
class HistoryRequest(LongTermRequest[tuple[MemoryVersion, ...]]):
    operation: ClassVar[Operation] = Operation.HISTORY

    scope: Scope
    record_id: str

    def _validate(self) -> None:
        check_record_id(self.record_id)

    async def send(self, target: ReadTarget,
                   ctx: OperationContext) -> tuple[MemoryVersion, ...]:
        return await target.history(self, ctx)

    def check(self, result: tuple[MemoryVersion, ...], allowed: Set[str],
              ctx: OperationContext) -> Checked[tuple[MemoryVersion, ...]]:
        if not (isinstance(result, tuple)
                and all(isinstance(v, MemoryVersion) for v in result)):
            return wrong_result(self, result)
        stray = tuple(v.record.id for v in result if not owned(v.record, allowed))
        versions = tuple(v for v in result if owned(v.record, allowed))
        return Checked(versions, self.summarize(versions), stray)

    @classmethod
    def summarize(cls, result: tuple[MemoryVersion, ...]) -> Summary:
        return Summary(record_ids=tuple(dict.fromkeys(v.record.id for v in result)),
                       versions=tuple(v.record.version for v in result), count=len(result))


class ReadTarget(Protocol):
    """What the read requests are sent to: the read operations of
    ``governed_memory.requests.Operations``."""

    async def get(self, request: GetRequest, ctx: OperationContext) -> MemoryRecord: ...

    async def list(self, request: ListRequest, ctx: OperationContext) -> Page[MemoryRecord]: ...

    async def search(self, request: SearchRequest, ctx: OperationContext) -> SearchResult: ...

    async def history(
        self, request: HistoryRequest, ctx: OperationContext
    ) -> tuple[MemoryVersion, ...]: ...
