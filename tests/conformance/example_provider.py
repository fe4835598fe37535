"""The smallest correct provider: plain dicts in one process, honest capabilities.

It exists to show a third party what the conformance suite asks for, and it is the
healthy baseline of the meta-tests (``broken.py`` breaks it three ways). Everything
here runs without an ``await`` between reading and writing state, so each operation is
atomic on the event loop; that is what lets it declare ``transactional`` and
compare-and-set honestly without a lock.
"""

from __future__ import annotations

import re
from typing import Any, NoReturn

import attrs
from governed_memory import (
    DeleteResult,
    ErasureReceipt,
    MemoryConflictError,
    MemoryNotFoundError,
    MemoryRecord,
    MemoryValidationError,
    MemoryVersion,
    Page,
    RecordStatus,
    Scope,
    SearchHit,
    SearchResult,
)
from governed_memory.capabilities import Capabilities, HealthStatus
from governed_memory.clock import Clock
from governed_memory.cursor import decode_cursor, encode_cursor
from governed_memory.ids import new_id, new_revision
from governed_memory.operation_context import OperationContext
from governed_memory.provider_kit import NoOptionalFeatures
from governed_memory.records import (
    CleanupPage,
    HitExplanation,
    SignalScore,
    VersionOperation,
    content_hash,
    json_copy,
)
from governed_memory.requests import (
    AddRequest,
    DeleteAllRequest,
    DeleteRequest,
    DeleteUserRequest,
    GetRequest,
    HistoryRequest,
    ListRequest,
    PurgeExpiredRequest,
    SearchRequest,
    UpdateRequest,
)


def detached(record: MemoryRecord) -> MemoryRecord:
    """A new record object sharing nothing mutable with storage."""
    return attrs.evolve(record, metadata=json_copy(record.metadata))


def words(text: str) -> set[str]:
    return set(re.findall(r"[^\W_]+", text.lower()))


@attrs.define
class Stored:
    record: MemoryRecord
    versions: list[MemoryVersion]


class ExampleProvider(NoOptionalFeatures):
    name = "example"

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._rows: dict[str, Stored] = {}
        self._replies: dict[tuple[str, str, str], tuple[str, Any]] = {}

    def capabilities(self) -> Capabilities:
        return Capabilities(durable=False, transactional=True, compare_and_set=True,
                            idempotency=True, history=True, soft_delete=True,
                            hard_delete=True, lexical_search=True, metadata_filters=True,
                            expiry=True, purge_expired=True, delete_all=True,
                            delete_user=True)

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def health(self) -> HealthStatus:
        return HealthStatus(ok=True, provider=self.name, detail=f"{len(self._rows)} records")

    # -- helpers ------------------------------------------------------------------

    def _owned(self, record: MemoryRecord, scope: Scope) -> bool:
        """Scopes are exact: compare the hash, never "at least these dimensions"."""
        return record.scope_hash == scope.scope_hash

    def _readable(self, record: MemoryRecord, now: float) -> bool:
        return record.is_visible(now)  # active and not expired

    def _check_revision(self, record: MemoryRecord, expected: str | None) -> None:
        if expected is not None and expected != record.revision:
            raise MemoryConflictError("expected_revision is stale")

    def _find(self, scope: Scope, record_id: str) -> Stored | None:
        row = self._rows.get(record_id)
        return row if row is not None and self._owned(row.record, scope) else None

    def _linkable(self, scope: Scope, record_id: str, now: float) -> bool:
        """A supersession link names a stored record of the scope (in any status) that
        has not expired: an expired record is gone, whether or not it was purged yet."""
        row = self._find(scope, record_id)
        return row is not None and not row.record.is_expired(now)

    def _visible(self, scopes: tuple[Scope, ...], now: float) -> list[MemoryRecord]:
        return sorted((row.record for row in self._rows.values()
                       if any(self._owned(row.record, scope) for scope in scopes)
                       and self._readable(row.record, now)),
                      key=lambda record: record.id)

    def _replay(self, request: Any, ctx: OperationContext) -> Any:
        """The first result of an identical earlier write, or ``None`` if this one is new."""
        if request.idempotency_key is None:
            return None
        entry = self._replies.get((request.scope.scope_hash, request.operation.value,
                                   request.idempotency_key))
        if entry is None:
            return None
        if entry[0] != ctx.fingerprint_of(request):
            raise MemoryConflictError("idempotency key reused for a different request")
        return entry[1]

    def _remember(self, request: Any, ctx: OperationContext, result: Any) -> None:
        if request.idempotency_key is not None:
            slot = (request.scope.scope_hash, request.operation.value, request.idempotency_key)
            self._replies[slot] = (ctx.fingerprint_of(request), result)

    def _commit(self, record: MemoryRecord, operation: VersionOperation,
                ctx: OperationContext) -> None:
        row = self._rows.setdefault(record.id, Stored(record, []))
        row.record = record
        row.versions.append(MemoryVersion(record, operation, ctx.now, ctx.operation_id))

    def _erase(self, record_ids: set[str]) -> None:
        for record_id in record_ids:
            self._rows.pop(record_id, None)
        self._replies = {slot: entry for slot, entry in self._replies.items()
                         if getattr(entry[1], "id", getattr(entry[1], "record_id", None))
                         not in record_ids}

    # -- writes -------------------------------------------------------------------

    async def add(self, request: AddRequest, ctx: OperationContext) -> MemoryRecord:
        request.validate()
        replay = self._replay(request, ctx)
        if replay is not None:
            return detached(replay)
        scope_hash = request.scope.scope_hash
        if request.supersedes is not None and not self._linkable(request.scope,
                                                                 request.supersedes, ctx.now):
            raise MemoryValidationError("supersedes names no record in this scope",
                                        field="supersedes")
        for row in list(self._rows.values()):
            held = row.record
            if (held.scope_hash == scope_hash and held.key is not None
                    and held.key == request.key and held.status is not RecordStatus.DELETED):
                if not held.is_expired(ctx.now):
                    raise MemoryConflictError("the key is held by a live record of this scope")
                self._erase({held.id})  # an expired record is gone; so is its claim
        record = MemoryRecord(
            id=new_id(), scope=request.scope, scope_hash=scope_hash, content=request.content,
            memory_type=request.memory_type, version=1, revision=new_revision(),
            content_hash=content_hash(request.content), status=request.status,
            created_at=ctx.now, updated_at=ctx.now, key=request.key,
            metadata=json_copy(request.metadata), provenance=request.provenance,
            visibility=request.visibility, importance=request.importance,
            entity_ids=request.entity_ids, valid_from=request.valid_from,
            invalid_at=request.invalid_at, supersedes=request.supersedes,
            expires_at=request.expires_at, occurred_at=request.occurred_at,
        )
        self._commit(record, VersionOperation.ADD, ctx)
        self._remember(request, ctx, record)
        return detached(record)

    async def update(self, request: UpdateRequest, ctx: OperationContext) -> MemoryRecord:
        request.validate()
        replay = self._replay(request, ctx)
        if replay is not None:
            return detached(replay)
        row = self._find(request.scope, request.record_id)
        if row is None or not row.record.is_visible(ctx.now):
            _missing(request.expected_revision)
        current = row.record
        self._check_revision(current, request.expected_revision)
        if request.superseded_by is not None and not self._linkable(
                request.scope, request.superseded_by, ctx.now):
            raise MemoryValidationError("superseded_by names no record in this scope",
                                        field="superseded_by")
        changes = {name: getattr(request, name) for name in (
            "content", "memory_type", "importance", "visibility", "entity_ids", "expires_at",
            "invalid_at", "occurred_at", "superseded_by") if getattr(request, name) is not None}
        if request.metadata is not None:
            changes["metadata"] = json_copy(request.metadata)
        if request.clear_expires_at:
            changes["expires_at"] = None
        content = changes.get("content", current.content)
        record = attrs.evolve(current, **changes, content_hash=content_hash(content),
                              version=current.version + 1, revision=new_revision(),
                              updated_at=ctx.now)
        self._commit(record, VersionOperation.UPDATE, ctx)
        self._remember(request, ctx, record)
        return detached(record)

    async def delete(self, request: DeleteRequest, ctx: OperationContext) -> DeleteResult:
        request.validate()
        replay = self._replay(request, ctx)
        if replay is not None:
            return replay  # type: ignore[no-any-return]
        row = self._find(request.scope, request.record_id)
        gone = row is None or (not request.hard and (
            row.record.status is RecordStatus.DELETED or row.record.is_expired(ctx.now)))
        if gone:
            _missing(request.expected_revision)
        assert row is not None
        self._check_revision(row.record, request.expected_revision)
        if request.hard:
            self._erase({row.record.id})
            result = DeleteResult(row.record.id, row.record.scope_hash, hard=True)
        else:
            tombstone = attrs.evolve(row.record, status=RecordStatus.DELETED,
                                     version=row.record.version + 1, revision=new_revision(),
                                     updated_at=ctx.now)
            self._commit(tombstone, VersionOperation.DELETE, ctx)
            result = DeleteResult(tombstone.id, tombstone.scope_hash, hard=False,
                                  version=tombstone.version, revision=tombstone.revision)
        self._remember(request, ctx, result)
        return result

    # -- reads --------------------------------------------------------------------

    async def get(self, request: GetRequest, ctx: OperationContext) -> MemoryRecord:
        request.validate()
        for record in self._visible((request.scope,), ctx.now):
            if record.id == request.record_id or (request.key is not None
                                                  and record.key == request.key):
                return detached(record)
        raise MemoryNotFoundError("no live record with that id or key in this scope")

    async def list(self, request: ListRequest, ctx: OperationContext) -> Page[MemoryRecord]:
        request.validate()
        scope_hash = request.scope.scope_hash
        after = decode_cursor(request.cursor, "list", scope_hash) if request.cursor else ""
        page = [record for record in self._visible((request.scope,), ctx.now)
                if record.id > after and (not request.memory_types
                                          or record.memory_type in request.memory_types)
                ][: request.limit]
        cursor = (encode_cursor("list", scope_hash, page[-1].id)
                  if len(page) == request.limit else None)
        return Page(tuple(detached(record) for record in page), cursor)

    async def search(self, request: SearchRequest, ctx: OperationContext) -> SearchResult:
        request.validate()
        wanted = words(request.query)
        scored = []
        for record in self._visible(request.scopes, ctx.now):
            score = len(wanted & words(record.content))
            if score and _matches(record, request, ctx.now):
                scored.append((-score, record.id, record))
        scored.sort(key=lambda item: item[:2])  # best first, then by id: a stable tie-break
        hits = tuple(
            SearchHit(detached(record), float(-negative), rank,
                      HitExplanation((SignalScore("word_overlap", float(-negative), rank),)))
            for rank, (negative, _, record) in enumerate(scored[: request.limit], start=1))
        return SearchResult(hits, candidates=len(scored))

    async def history(self, request: HistoryRequest,
                      ctx: OperationContext) -> tuple[MemoryVersion, ...]:
        request.validate()
        row = self._find(request.scope, request.record_id)
        if row is None or row.record.is_expired(ctx.now):
            raise MemoryNotFoundError("no record with that id in this scope")
        return tuple(attrs.evolve(v, record=detached(v.record)) for v in row.versions)

    # -- maintenance --------------------------------------------------------------

    async def delete_all(self, request: DeleteAllRequest, ctx: OperationContext) -> int:
        request.validate()
        scope_hash = request.scope.scope_hash
        doomed = {rid for rid, row in self._rows.items() if row.record.scope_hash == scope_hash}
        self._erase(doomed)
        self._replies = {slot: entry for slot, entry in self._replies.items()
                         if slot[0] != scope_hash}
        return len(doomed)

    async def delete_user(self, request: DeleteUserRequest,
                          ctx: OperationContext) -> ErasureReceipt:
        request.validate()
        doomed = {rid: row.record.scope_hash for rid, row in self._rows.items()
                  if (row.record.scope.tenant_id, row.record.scope.user_id)
                  == (request.tenant_id, request.user_id)}
        self._erase(set(doomed))
        return ErasureReceipt(
            request_id=ctx.operation_id, tenant_id=request.tenant_id, user_id=request.user_id,
            counts={"records": len(doomed)}, scope_hashes=tuple(sorted(set(doomed.values()))),
            started_at=ctx.now, completed_at=max(ctx.now, self._clock.now()),
        ).sealed()

    async def purge_expired(self, request: PurgeExpiredRequest,
                            ctx: OperationContext) -> CleanupPage:
        request.validate()
        scope_hash = request.scope.scope_hash
        after = decode_cursor(request.after, "purge", scope_hash, field="after") \
            if request.after else ""
        inspected = sorted(rid for rid, row in self._rows.items()
                           if row.record.scope_hash == scope_hash and rid > after
                           )[: request.limit]
        expired = {rid for rid in inspected if self._rows[rid].record.is_expired(ctx.now)}
        self._erase(expired)
        cursor = (encode_cursor("purge", scope_hash, inspected[-1])
                  if len(inspected) == request.limit else None)
        return CleanupPage(deleted=len(expired), next_cursor=cursor)


def _matches(record: MemoryRecord, request: SearchRequest, now: float) -> bool:
    """The search's filters: valid at ``as_of`` (else now), inside the event window,
    and the type, entity and metadata filters."""
    if not record.is_valid_at(now if request.as_of is None else request.as_of):
        return False
    if not record.happened_within(*request.event_window()):
        return False
    if request.memory_types and record.memory_type not in request.memory_types:
        return False
    if request.entity_ids and not set(request.entity_ids) & set(record.entity_ids):
        return False
    return request.admits(record) and all(  # visibility, source and sensitivity
        name in record.metadata and _same_json(record.metadata[name], value)
        for name, value in request.metadata_filter.items())


def _same_json(left: object, right: object) -> bool:
    """Equal as JSON values: ``True`` is not ``1`` and ``"1"`` is not ``1``."""
    same_kind = type(left) is type(right) or {type(left), type(right)} <= {int, float}
    return same_kind and left == right


def _missing(expected_revision: str | None) -> NoReturn:
    if expected_revision is not None:
        raise MemoryConflictError("expected_revision names a missing or deleted record")
    raise MemoryNotFoundError("no live record with that id in this scope")


def build_example_provider(config: dict[str, Any], clock: Clock) -> ExampleProvider:
    """The factory a plugin would register: config in, unstarted provider out, no I/O."""
    return ExampleProvider(clock)

