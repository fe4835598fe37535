"""Deliberately broken providers, each the example provider with one classic bug.

The meta-tests run the conformance suite on each and insist it fails, and fails in the
tests that name the bug: a suite that passes a broken provider proves nothing. The
first three are the classics; then the bugs a provider written from the docs passed
the suite with before issue 14, the new areas (review, durability), and the bugs of
issue 28 (keys, zero values, races, cursors, metadata filters, look-alike scopes,
idempotency across operations and replays, dedup).
"""

from __future__ import annotations

import asyncio
import unicodedata
from typing import Any

import attrs
from example_provider import ExampleProvider, Stored, _same_json, detached
from governed_memory import (
    DeleteResult,
    MemoryConflictError,
    MemoryNotFoundError,
    MemoryRecord,
    MemoryValidationError,
    MemoryVersion,
    Page,
    RecordStatus,
    Scope,
    SearchResult,
)
from governed_memory.capabilities import Capabilities
from governed_memory.clock import Clock
from governed_memory.cursor import decode_cursor, encode_cursor
from governed_memory.ids import new_id, new_revision
from governed_memory.operation_context import OperationContext
from governed_memory.records import CleanupPage, VersionOperation, content_hash, json_copy
from governed_memory.requests import (
    AddRequest,
    ApproveRequest,
    DedupMode,
    DeleteRequest,
    HistoryRequest,
    ListRequest,
    PurgeExpiredRequest,
    RejectRequest,
    SearchRequest,
    UpdateRequest,
)
from reviewing_provider import ReviewingExampleProvider


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


# -- the bugs a provider written from the docs passed the suite with (issue 14) ---------------


class ReplayKeepingProvider(ExampleProvider):
    """Erasing a record (hard delete, ``delete_user``) leaves its idempotency-replay
    entry, content and all: a retried add hands the erased record back."""

    name = "broken-replay-kept"

    def _erase(self, record_ids: set[str]) -> None:
        for record_id in record_ids:
            self._rows.pop(record_id, None)


class ExpiredHistoryProvider(ExampleProvider):
    """``history`` still answers for a record whose expiry has passed."""

    name = "broken-expired-history"

    async def history(self, request: HistoryRequest,
                      ctx: OperationContext) -> tuple[MemoryVersion, ...]:
        request.validate()
        row = self._find(request.scope, request.record_id)
        if row is None:
            raise MemoryNotFoundError("no record with that id in this scope")
        return tuple(attrs.evolve(v, record=detached(v.record)) for v in row.versions)


class SupersessionDroppingProvider(ExampleProvider):
    """``update`` ignores ``superseded_by``, so extraction's supersession is lost."""

    name = "broken-supersession"

    async def update(self, request: UpdateRequest, ctx: OperationContext) -> MemoryRecord:
        return await super().update(attrs.evolve(request, superseded_by=None), ctx)


class PurgeStoppingProvider(ExampleProvider):
    """``purge_expired`` returns a cursor only when a page deleted something, so a caller
    stops at the first page of live records."""

    name = "broken-purge-cursor"

    async def purge_expired(self, request: PurgeExpiredRequest,
                            ctx: OperationContext) -> CleanupPage:
        page = await super().purge_expired(request, ctx)
        return page if page.deleted else CleanupPage(deleted=0, next_cursor=None)


class ExpiredSoftDeletingProvider(ExampleProvider):
    """A soft delete of an expired record succeeds and writes a tombstone version, where
    the contract treats an expired record as gone."""

    name = "broken-expired-soft-delete"

    async def delete(self, request: DeleteRequest, ctx: OperationContext) -> DeleteResult:
        row = self._find(request.scope, request.record_id)
        if (not request.hard and row is not None and row.record.is_expired(ctx.now)
                and row.record.status is not RecordStatus.DELETED):
            request.validate()
            self._check_revision(row.record, request.expected_revision)
            tombstone = attrs.evolve(row.record, status=RecordStatus.DELETED,
                                     version=row.record.version + 1, revision=new_revision(),
                                     updated_at=ctx.now)
            self._commit(tombstone, VersionOperation.DELETE, ctx)
            return DeleteResult(tombstone.id, tombstone.scope_hash, hard=False,
                                version=tombstone.version, revision=tombstone.revision)
        return await super().delete(request, ctx)


class ReviewIgnoringIdempotencyProvider(ReviewingExampleProvider):
    """``approve`` and ``reject`` ignore their idempotency keys: a retried approve is
    refused as "not pending", a retried reject as "not found"."""

    name = "broken-review-idempotency"

    def _replay(self, request: Any, ctx: OperationContext) -> Any:
        if isinstance(request, ApproveRequest | RejectRequest):
            return None
        return super()._replay(request, ctx)


class PendingLeakingProvider(ExampleProvider):
    """Reads show records held for review."""

    name = "broken-pending-visible"

    def _readable(self, record: MemoryRecord, now: float) -> bool:
        return record.status is not RecordStatus.DELETED and not record.is_expired(now)


class ActiveApprovingProvider(ReviewingExampleProvider):
    """Review decisions do not check that the record is pending: an active record can
    be "approved" again (a new version) or "rejected" (erased)."""

    name = "broken-review-any-record"

    def _pending(self, request: ApproveRequest | RejectRequest,
                 ctx: OperationContext) -> MemoryRecord:
        row = self._find(request.scope, request.record_id)
        if row is None or row.record.is_expired(ctx.now):
            raise MemoryNotFoundError("no record with that id in this scope")
        self._check_revision(row.record, request.expected_revision)
        return row.record


class PendingKeyFreeProvider(ReviewingExampleProvider):
    """A record held for review does not hold its key: a second record takes it, and
    approving the first makes two live records share one key."""

    name = "broken-pending-key"

    async def add(self, request: AddRequest, ctx: OperationContext) -> MemoryRecord:
        held = [row for row in self._rows.values()
                if row.record.scope_hash == request.scope.scope_hash
                and row.record.key == request.key
                and row.record.status is RecordStatus.PENDING_REVIEW]
        for row in held:
            row.record = attrs.evolve(row.record, key=None)
        try:
            return await super().add(request, ctx)
        finally:
            for row in held:
                row.record = attrs.evolve(row.record, key=request.key)


class AmnesiacProvider(ExampleProvider):
    """Declares ``durable`` but keeps everything in the instance: reopening the same
    storage finds nothing."""

    name = "broken-durability"

    def capabilities(self) -> Capabilities:
        return attrs.evolve(super().capabilities(), durable=True)


class SharedStorageProvider(ExampleProvider):
    """The example provider over storage that outlives an instance (a dict the test
    class keeps, written back on ``close``), so it may honestly declare ``durable``: the
    healthy baseline of the durability meta-test."""

    name = "example-durable"

    def __init__(self, clock: Clock, storage: dict[str, Any] | None = None) -> None:
        super().__init__(clock)
        self._storage = storage if storage is not None else {}
        self._rows = self._storage.get("rows", self._rows)
        self._replies = self._storage.get("replies", self._replies)

    async def close(self) -> None:
        self._storage.update(rows=self._rows, replies=self._replies)

    def capabilities(self) -> Capabilities:
        return attrs.evolve(super().capabilities(), durable=True)


# -- the bugs a provider written from the guide passed the suite with (issue 28) -------------
# One realistic bug each; the suite now fails every one deterministically (test_meta.py).


class TombstoneKeyProvider(ExampleProvider):
    """A soft-deleted record keeps its key: the key check counts tombstones."""

    name = "broken-tombstone-key"

    async def add(self, request: AddRequest, ctx: OperationContext) -> MemoryRecord:
        if request.key is not None and self._replay(request, ctx) is None and any(
                row.record.scope_hash == request.scope.scope_hash
                and row.record.key == request.key
                and row.record.status is RecordStatus.DELETED for row in self._rows.values()):
            raise MemoryConflictError("the key is already used in this scope")
        return await super().add(request, ctx)


class ErasedKeyProvider(ExampleProvider):
    """A key index kept beside the records is not cleaned when a record is erased (a
    hard delete, a purge, an erasure): the key stays taken by a record that is gone."""

    name = "broken-erased-key"

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock)
        self._taken: dict[tuple[str, str], str] = {}

    async def add(self, request: AddRequest, ctx: OperationContext) -> MemoryRecord:
        if request.key is not None:
            holder = self._taken.get((request.scope.scope_hash, request.key))
            if holder is not None and holder not in self._rows:
                raise MemoryConflictError("the key is already used in this scope")
        record = await super().add(request, ctx)
        if record.key is not None:
            self._taken[(record.scope_hash, record.key)] = record.id
        return record


class RevivingProvider(ExampleProvider):
    """Adding a key again after its record was deleted revives the old record: same
    id, version 1 again, as an "upsert by key" would."""

    name = "broken-reviving-key"

    async def add(self, request: AddRequest, ctx: OperationContext) -> MemoryRecord:
        dead = next((row for row in self._rows.values()
                     if request.key is not None and row.record.key == request.key
                     and row.record.scope_hash == request.scope.scope_hash
                     and row.record.status is RecordStatus.DELETED), None)
        record = await super().add(request, ctx)
        if dead is None:
            return record
        revived = attrs.evolve(record, id=dead.record.id)
        row = self._rows.pop(record.id)
        self._rows[revived.id] = Stored(revived, [*dead.versions, *(
            attrs.evolve(v, record=revived) for v in row.versions)])
        return detached(revived)


class EpochForgettingProvider(ExampleProvider):
    """``occurred_at=0.0`` (the epoch) is taken for "not given": ``request.occurred_at
    or None`` on add, ``if request.occurred_at:`` on update."""

    name = "broken-epoch"

    async def add(self, request: AddRequest, ctx: OperationContext) -> MemoryRecord:
        return await super().add(attrs.evolve(request, occurred_at=request.occurred_at or None),
                                 ctx)

    async def update(self, request: UpdateRequest, ctx: OperationContext) -> MemoryRecord:
        if request.occurred_at == 0 and request.changes_something():
            request = attrs.evolve(request, occurred_at=None)
            if not request.changes_something():
                request = attrs.evolve(request, content=self._rows[request.record_id]
                                       .record.content)
        return await super().update(request, ctx)


class FalsyUpdateProvider(ExampleProvider):
    """``update`` applies the fields that are truthy: importance 0.0, ``metadata={}``
    and ``entity_ids=()`` leave the old values."""

    name = "broken-falsy-update"

    async def update(self, request: UpdateRequest, ctx: OperationContext) -> MemoryRecord:
        row = self._rows.get(request.record_id)
        if row is None:
            return await super().update(request, ctx)
        kept = {name: getattr(row.record, name) for name in ("importance", "metadata",
                                                              "entity_ids")
                if getattr(request, name) is not None and not getattr(request, name)}
        return await super().update(attrs.evolve(request, **kept), ctx)


class FalsyWindowProvider(ExampleProvider):
    """A search bound of 0.0 (``as_of``, ``occurred_since``, ``occurred_before``) is
    taken for "no bound"."""

    name = "broken-falsy-window"

    async def search(self, request: SearchRequest, ctx: OperationContext) -> SearchResult:
        return await super().search(attrs.evolve(
            request, as_of=request.as_of or None,
            occurred_since=request.occurred_since or None,
            occurred_before=request.occurred_before or None), ctx)


class UnlockedAddProvider(ExampleProvider):
    """``add`` checks the key and the idempotency key, awaits its storage, and only
    then writes: concurrent adds all pass the checks (the check is outside the write's
    atomic step)."""

    name = "broken-unlocked-add"

    async def add(self, request: AddRequest, ctx: OperationContext) -> MemoryRecord:
        request.validate()
        replay = self._replay(request, ctx)
        if replay is not None:
            return detached(replay)
        if request.key is not None and any(
                row.record.scope_hash == request.scope.scope_hash
                and row.record.key == request.key and row.record.is_visible(ctx.now)
                for row in self._rows.values()):
            raise MemoryConflictError("the key is held by a live record of this scope")
        if request.supersedes is not None and self._find(request.scope,
                                                         request.supersedes) is None:
            raise MemoryValidationError("supersedes names no record in this scope",
                                        field="supersedes")
        await asyncio.sleep(0)  # a round trip to storage between the check and the write
        record = MemoryRecord(
            id=new_id(), scope=request.scope, scope_hash=request.scope.scope_hash,
            content=request.content, memory_type=request.memory_type, version=1,
            revision=new_revision(), content_hash=content_hash(request.content),
            status=request.status, created_at=ctx.now, updated_at=ctx.now, key=request.key,
            metadata=json_copy(request.metadata), provenance=request.provenance,
            visibility=request.visibility, importance=request.importance,
            entity_ids=request.entity_ids, valid_from=request.valid_from,
            invalid_at=request.invalid_at, supersedes=request.supersedes,
            expires_at=request.expires_at, occurred_at=request.occurred_at)
        self._commit(record, VersionOperation.ADD, ctx)
        self._remember(request, ctx, record)
        return detached(record)


class UnlockedUpdateProvider(ExampleProvider):
    """``update`` looks for an idempotent replay, awaits, then writes: concurrent
    retries of one update each write a version."""

    name = "broken-unlocked-update"

    async def update(self, request: UpdateRequest, ctx: OperationContext) -> MemoryRecord:
        request.validate()
        replay = self._replay(request, ctx)
        if replay is not None:
            return detached(replay)
        await asyncio.sleep(0)  # a round trip to storage between the check and the write
        record = await super().update(attrs.evolve(request, idempotency_key=None), ctx)
        self._remember(request, ctx, record)
        return record


class UnlockedApproveProvider(ReviewingExampleProvider):
    """``approve`` checks that the record is pending, awaits, then writes: concurrent
    approvals all pass the check and each writes a version."""

    name = "broken-unlocked-approve"

    async def approve(self, request: ApproveRequest, ctx: OperationContext) -> MemoryRecord:
        request.validate()
        replay = self._replay(request, ctx)
        if replay is not None:
            return detached(replay)
        current = self._pending(request, ctx)
        await asyncio.sleep(0)  # a round trip to storage between the check and the write
        record = attrs.evolve(self._rows[current.id].record, status=RecordStatus.ACTIVE,
                              version=self._rows[current.id].record.version + 1,
                              revision=new_revision(), updated_at=ctx.now)
        self._commit(record, VersionOperation.APPROVE, ctx)
        self._remember(request, ctx, record)
        return detached(record)


class OffsetCursorProvider(ExampleProvider):
    """``list`` cursors are offsets into the live records: a record removed before the
    cursor shifts the next page (a record skipped), one added before it repeats one."""

    name = "broken-offset-cursor"

    async def list(self, request: ListRequest, ctx: OperationContext) -> Page[MemoryRecord]:
        request.validate()
        scope_hash = request.scope.scope_hash
        offset = int(decode_cursor(request.cursor, "list", scope_hash)) if request.cursor else 0
        live = [record for record in self._visible((request.scope,), ctx.now)
                if not request.memory_types or record.memory_type in request.memory_types]
        page = live[offset: offset + request.limit]
        cursor = (encode_cursor("list", scope_hash, f"{offset + len(page):08d}")
                  if len(page) == request.limit else None)
        return Page(tuple(detached(record) for record in page), cursor)


class PointerCursorProvider(ExampleProvider):
    """``list`` resumes after the cursor's record by finding it among the stored records
    (tombstones included): fine across soft deletes, but once that record is erased (a
    hard delete, a purge) the walk starts over."""

    name = "broken-pointer-cursor"

    async def list(self, request: ListRequest, ctx: OperationContext) -> Page[MemoryRecord]:
        request.validate()
        scope_hash = request.scope.scope_hash
        after = decode_cursor(request.cursor, "list", scope_hash) if request.cursor else None
        stored = sorted(rid for rid, row in self._rows.items()
                        if row.record.scope_hash == scope_hash)
        start = stored.index(after) + 1 if after in stored else 0
        following = set(stored[start:])
        page = [record for record in self._visible((request.scope,), ctx.now)
                if record.id in following and (not request.memory_types
                                               or record.memory_type in request.memory_types)
                ][: request.limit]
        cursor = (encode_cursor("list", scope_hash, page[-1].id)
                  if len(page) == request.limit else None)
        return Page(tuple(detached(record) for record in page), cursor)


class _FilteringProvider(ExampleProvider):
    """The example provider with its metadata comparison replaced by ``_filter``."""

    def _filter(self, metadata: Any, name: str, value: object) -> bool:
        raise NotImplementedError

    async def search(self, request: SearchRequest, ctx: OperationContext) -> SearchResult:
        request.validate()
        wanted = dict(request.metadata_filter)
        result = await super().search(attrs.evolve(request, metadata_filter={}, limit=100), ctx)
        hits = [hit for hit in result.hits
                if all(self._filter(hit.record.metadata, name, value)
                       for name, value in wanted.items())][: request.limit]
        return SearchResult(tuple(attrs.evolve(hit, rank=rank)
                                  for rank, hit in enumerate(hits, start=1)), len(hits))


class NullMatchesMissingProvider(_FilteringProvider):
    """A ``None`` in ``metadata_filter`` also matches records without the key
    (``metadata.get(name) == value``)."""

    name = "broken-null-filter"

    def _filter(self, metadata: Any, name: str, value: object) -> bool:
        actual = metadata.get(name)
        return actual is None if value is None else (
            name in metadata and _same_json(actual, value))


class StrictNumberProvider(_FilteringProvider):
    """Numbers in ``metadata_filter`` compare by Python type: ``1`` never matches
    ``1.0``."""

    name = "broken-number-filter"

    def _filter(self, metadata: Any, name: str, value: object) -> bool:
        return name in metadata and type(metadata[name]) is type(value) and (
            metadata[name] == value)


class NormalizingScopeProvider(ExampleProvider):
    """Scope values are compared after NFKC normalisation and case folding, so "Alice",
    "ALICE", fullwidth alice and alice are one user, and NFC and NFD spellings of
    one name too."""

    name = "broken-normalizing-scope"

    def _owned(self, record: MemoryRecord, scope: Scope) -> bool:
        def folded(value: Scope) -> dict[str, str]:
            return {name: unicodedata.normalize("NFKC", text).casefold()
                    for name, text in value.dimensions().items()}

        return folded(record.scope) == folded(scope)


class SharedIdempotencyProvider(ExampleProvider):
    """Idempotency keys are kept per scope only, not per operation: an update (or a
    delete) with the key an add used is answered with the add's result."""

    name = "broken-shared-idempotency"

    def _replay(self, request: Any, ctx: OperationContext) -> Any:
        if request.idempotency_key is None:
            return None
        for (scope_hash, operation, key), (fingerprint, result) in self._replies.items():
            if (scope_hash, key) == (request.scope.scope_hash, request.idempotency_key):
                if operation == request.operation.value and fingerprint != ctx.fingerprint_of(
                        request):
                    raise MemoryConflictError("idempotency key reused for a different request")
                return result
        return None


class LiveReplayProvider(ExampleProvider):
    """An idempotent retry answers with the record as it is now, not with the first
    attempt's result (it stores the record id and reads the record again)."""

    name = "broken-live-replay"

    def _replay(self, request: Any, ctx: OperationContext) -> Any:
        first = super()._replay(request, ctx)
        if isinstance(first, MemoryRecord) and first.id in self._rows:
            return self._rows[first.id].record
        return first


# -- dedup (capability ``dedup``): the reviewing example provider implements it ----------------


class KeyBlindDedupProvider(ReviewingExampleProvider):
    """Dedup compares content and scope but not the key."""

    name = "broken-dedup-key"

    def _duplicate_of(self, request: AddRequest, now: float) -> MemoryRecord | None:
        return super()._duplicate_of(attrs.evolve(request, key=None), now) or next(
            (row.record for row in sorted(self._rows.values(), key=lambda r: r.record.id)
             if row.record.scope_hash == request.scope.scope_hash
             and row.record.content == request.content and self._live(row.record, now)), None)


class ExpiredDedupProvider(ReviewingExampleProvider):
    """Dedup finds the duplicate among every stored record that is not deleted: an
    expired (or no longer valid) record is returned as the duplicate."""

    name = "broken-dedup-expired"

    def _live(self, record: MemoryRecord, now: float) -> bool:
        return record.status is not RecordStatus.DELETED


class StaleHashDedupProvider(ReviewingExampleProvider):
    """Dedup matches against a content-hash index written on add and never moved by an
    update: the old content still finds the record, the new content does not."""

    name = "broken-dedup-stale-hash"

    def _duplicate_of(self, request: AddRequest, now: float) -> MemoryRecord | None:
        wanted = content_hash(request.content)
        return min((row.record for row in self._rows.values()
                    if row.record.scope_hash == request.scope.scope_hash
                    and row.record.key == request.key
                    and row.versions[0].record.content_hash == wanted
                    and self._live(row.record, now)),
                   key=lambda record: record.id, default=None)


class DedupForgettingKeyProvider(ReviewingExampleProvider):
    """A dedup hit does not record the add's idempotency key: a retry deduplicates
    again and answers with the record as it is now, not the first result."""

    name = "broken-dedup-idempotency"

    def _remember(self, request: Any, ctx: OperationContext, result: Any) -> None:
        if isinstance(request, AddRequest) and request.dedup is not DedupMode.OFF and any(
                "deduplicated" in line for line in ctx.notes.lines):
            return
        super()._remember(request, ctx, result)


class NewestDedupProvider(ReviewingExampleProvider):
    """Of several identical live records, dedup returns the newest."""

    name = "broken-dedup-newest"

    def _duplicate_of(self, request: AddRequest, now: float) -> MemoryRecord | None:
        wanted = content_hash(request.content)
        return max((row.record for row in self._rows.values()
                    if row.record.scope_hash == request.scope.scope_hash
                    and row.record.key == request.key and row.record.content_hash == wanted
                    and self._live(row.record, now)),
                   key=lambda record: record.id, default=None)


class DeleteForgettingRevisionProvider(ReviewingExampleProvider):
    """Advances a scope's revision on adds and updates but not when a record is erased:
    a cached page still quotes a record a hard delete, purge or erasure removed."""

    name = "broken-delete-forgetting-revision"

    def _erase(self, record_ids: set[str]) -> None:
        ExampleProvider._erase(self, record_ids)


class EpochlessErasureProvider(ReviewingExampleProvider):
    """``delete_user`` leaves the tenant epoch alone and forgets the user's revisions:
    the erased scope reads 0 again, a value an old cached page was stored under."""

    name = "broken-epochless-erasure"

    async def delete_user(self, request: Any, ctx: OperationContext) -> Any:
        receipt = await ExampleProvider.delete_user(self, request, ctx)
        for scope_hash in receipt.scope_hashes:
            self._scope_revisions.pop(scope_hash, None)
        return receipt
