"""The manager's memory operations: what application code does with memory.

Each method builds its typed request from the caller's arguments (an enum by value, a
list where a request holds a tuple: ``governed_memory.arguments``) and hands it to the
activity port, so governance is not something a call site can forget. These are the
operations on long-term memory, the review queue and erasure; a bound handle
(``BoundMemory``) offers the scoped ones with the principal and the scope fixed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from governed_memory.arguments import member, memory_type_tuple, optional_member, string_tuple
from governed_memory.batch import MAX_BATCH_ITEMS, AddItem, BatchAddResult, ItemOutcome
from governed_memory.clock import Clock
from governed_memory.errors import GovernedMemoryError, MemoryValidationError
from governed_memory.governed_calls import GovernedCalls
from governed_memory.keyed_writes import put_by_key
from governed_memory.language_models import LanguageModel
from governed_memory.lookup import LookupRequest
from governed_memory.operations import Operation
from governed_memory.principal import Principal
from governed_memory.profiles.spec import MemoryProfileSpec, RequestRankingSection
from governed_memory.ranking_options import MODES, RankingOptions
from governed_memory.records import (
    CleanupPage,
    DeleteResult,
    ErasureReceipt,
    MemoryRecord,
    MemoryType,
    MemoryVersion,
    Page,
    Provenance,
    SearchResult,
    Visibility,
)
from governed_memory.remembering import (
    DEFAULT_CONFIDENCE_FLOOR,
    DEFAULT_WINDOW,
    Message,
    RememberResult,
    remember_messages,
)
from governed_memory.replay import ReplayResult, replay_through
from governed_memory.requests import (
    AddRequest,
    ApproveRequest,
    DeleteAllRequest,
    DeleteRequest,
    DeleteUserRequest,
    GetRequest,
    HistoryRequest,
    ListPendingRequest,
    ListRequest,
    PurgeExpiredRequest,
    RejectRequest,
    SearchRequest,
    UpdateRequest,
)
from governed_memory.scope import Scope
from governed_memory.search_pages import next_page_cursor, page_offset


class MemoryOperations(GovernedCalls):
    """Long-term memory, its review queue and erasure, one governed operation each."""

    profile_spec: MemoryProfileSpec | None
    """The profile searches take their defaults and bounds from, if any."""
    language_model: LanguageModel | None
    """The model ``remember`` reads conversations with (the profile's
    ``[stores.language_model]``, or the manager's ``language_model=``), if any."""
    clock: Clock

    async def add(
        self,
        principal: Principal,
        scope: Scope,
        content: str,
        *,
        memory_type: MemoryType | str = MemoryType.NOTE,
        key: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        provenance: Provenance | Mapping[str, str] | None = None,
        visibility: Visibility | str = Visibility.PRIVATE,
        importance: float = 0.5,
        entity_ids: Iterable[str] = (),
        valid_from: float | None = None,
        invalid_at: float | None = None,
        supersedes: str | None = None,
        expires_at: float | None = None,
        idempotency_key: str | None = None,
        occurred_at: float | None = None,
    ) -> MemoryRecord:
        """Add one memory. ``occurred_at`` is when what it tells happened (epoch seconds;
        without it, the write time is the record's ``event_time``)."""
        return await self._execute(Operation.ADD, principal, lambda: AddRequest(
            scope=scope, content=content,
            memory_type=member(MemoryType, memory_type, "memory_type"), key=key,
            metadata=metadata or {}, provenance=provenance,
            visibility=member(Visibility, visibility, "visibility"), importance=importance,
            entity_ids=string_tuple(entity_ids, "entity_ids"), valid_from=valid_from,
            invalid_at=invalid_at,
            supersedes=supersedes, expires_at=expires_at, idempotency_key=idempotency_key,
            occurred_at=occurred_at,
        ))

    async def add_many(self, principal: Principal, scope: Scope,
                       items: Iterable[AddItem | str], *,
                       concurrency: int = 32) -> BatchAddResult:
        """Add many memories to one scope; each item is its own governed add.

        Each is validated, decided by the policies, evented and idempotent on its own
        ``idempotency_key``, exactly as :meth:`add`; an item that is refused (invalid,
        denied, over a quota, a conflict) is reported in the result by its index, with
        the library's error code, and does not stop the others. Up to ``concurrency``
        adds are in flight at once, so their embeddings share model calls (the
        profile's embedder batches concurrent requests). An error that is no library
        error (a bug) cancels the adds not yet done and is raised.
        """
        if isinstance(items, str | bytes):
            # A lone string would otherwise be stored one character at a time.
            raise MemoryValidationError("add_many takes a sequence of items, not one "
                                        "string", field="items")
        batch = [item if isinstance(item, AddItem) else AddItem(content=item)
                 for item in items]
        if len(batch) > MAX_BATCH_ITEMS:
            raise MemoryValidationError(f"add_many takes at most {MAX_BATCH_ITEMS} items",
                                        field="items")
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or not (
                1 <= concurrency <= 256):
            raise MemoryValidationError("concurrency must be an integer from 1 to 256",
                                        field="concurrency")
        gate = asyncio.Semaphore(concurrency)

        async def one(index: int, item: AddItem) -> ItemOutcome:
            async with gate:
                try:
                    record = await self.add(principal, scope, item.content,
                                            **item.arguments())
                except GovernedMemoryError as exc:
                    return ItemOutcome(index=index, error_code=exc.code, error=str(exc))
            return ItemOutcome(index=index, record=record)

        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(one(index, item))
                         for index, item in enumerate(batch)]
        except ExceptionGroup as failed:
            raise failed.exceptions[0] from None
        return BatchAddResult(outcomes=tuple(task.result() for task in tasks))

    async def remember(self, principal: Principal, scope: Scope,
                       messages: Iterable[Message | Mapping[str, Any]], *,
                       window: int = DEFAULT_WINDOW,
                       confidence_floor: float = DEFAULT_CONFIDENCE_FLOOR) -> RememberResult:
        """Memories from a conversation (``role``/``content`` messages, each with an
        optional ``turn_id``), each fact decided against what ``scope`` holds: added,
        updated, superseded, unchanged, held for review or refused, every write a
        governed ``add`` or ``update`` idempotent on its source turns
        (``governed_memory.remembering``). Needs the manager's language model
        (``MemoryConfigurationError`` without one); one model call per ``window``
        messages, and one more when a fact has stored memories close to it. A fact the
        model is less sure of than ``confidence_floor`` has the source type
        ``inferred``, which a profile may hold for review."""
        await self._ready()
        return await remember_messages(self, principal, scope, messages,
                                       model=self.language_model, window=window,
                                       confidence_floor=confidence_floor)

    async def get(self, principal: Principal, scope: Scope, record_id: str | None = None, *,
                  key: str | None = None) -> MemoryRecord:
        return await self._execute(
            Operation.GET, principal, lambda: GetRequest(scope=scope, record_id=record_id, key=key))

    async def lookup(self, principal: Principal, scope: Scope, record_id: str | None = None,
                     *, key: str | None = None) -> MemoryRecord | None:
        """Like :meth:`get`, but a miss is ``None`` (a completed read in the trail), for
        callers that expect one, such as a component reading what it may not have
        written yet (``governed_memory.lookup``)."""
        found = await self._execute(
            Operation.LOOKUP, principal, lambda: LookupRequest(scope=scope, record_id=record_id,
                                                               key=key))
        return found.record

    async def put(
        self,
        principal: Principal,
        scope: Scope,
        key: str,
        content: str,
        *,
        expected_revision: str | None = None,
        memory_type: MemoryType | str | None = None,
        metadata: Mapping[str, Any] | None = None,
        importance: float | None = None,
        visibility: Visibility | str | None = None,
        entity_ids: Iterable[str] | None = None,
        expires_at: float | None = None,
    ) -> MemoryRecord:
        """Write ``content`` under ``key``: an add when no live record holds the key,
        else an update of the holder; racing puts of a key leave one record (last
        writer wins), ``expected_revision`` makes it a compare-and-set
        (``governed_memory.keyed_writes``)."""
        return await put_by_key(
            self, principal, scope, key, content, expected_revision=expected_revision,
            memory_type=memory_type, metadata=metadata, importance=importance,
            visibility=visibility, entity_ids=entity_ids, expires_at=expires_at)

    async def list(self, principal: Principal, scope: Scope, *, limit: int = 20,
                   cursor: str | None = None,
                   memory_types: Iterable[MemoryType | str] | None = None
                   ) -> Page[MemoryRecord]:
        return await self._execute(
            Operation.LIST, principal,
            lambda: ListRequest(scope=scope, limit=limit, cursor=cursor,
                                memory_types=memory_type_tuple(memory_types)))

    async def search(self, principal: Principal, scopes: Scope | Sequence[Scope], query: str,
                     *, limit: int | None = None,
                     memory_types: Iterable[MemoryType | str] | None = None,
                     metadata_filter: Mapping[str, Any] | None = None,
                     entity_ids: Iterable[str] = (),
                     ranking: RankingOptions | None = None,
                     occurred_since: float | None = None,
                     occurred_before: float | None = None,
                     as_of: float | None = None,
                     visibility: Visibility | str | None = None,
                     source_types: Iterable[str] = (),
                     sensitivity: Iterable[str] = (),
                     exclude_sensitivity: Iterable[str] = (),
                     cursor: str | None = None) -> SearchResult:
        """Search one or more exact scopes. ``limit`` defaults to the profile's
        ``retrieval.top_k`` (10 without a profile). ``ranking`` re-weighs this search
        within the profile's bounds (``[retrieval.request_ranking]``; see
        ``governed_memory.ranking_options``). ``occurred_since``/``occurred_before`` keep
        records whose ``event_time`` lies in ``[since, before)``; ``as_of`` searches
        memory as it stood then (what had happened and was valid at that time, recency
        measured from it). ``visibility`` keeps ``private`` or ``shared`` records only,
        ``source_types`` records whose ``provenance.source_type`` is one of them,
        ``sensitivity`` records labelled (``metadata["sensitivity"]``) with one of them,
        and ``exclude_sensitivity`` leaves out records labelled with one of them; each is
        applied before the top ``limit`` is taken (``governed_memory.read_filters``).
        ``cursor`` (a result's ``next_cursor``) asks for the next ``limit`` results of the
        same search (``governed_memory.search_pages`` says what paging guarantees)."""
        scope_tuple = ((scopes,) if isinstance(scopes, Scope)
                       else tuple(scopes) if isinstance(scopes, list | tuple) else (scopes,))
        if limit is None:
            limit = self.profile_spec.retrieval.top_k if self.profile_spec else 10
        hits = limit
        offset = 0

        def build() -> SearchRequest:
            nonlocal offset
            request = page_request()
            offset = page_offset(cursor, request)
            return (request if offset == 0
                    else attrs.evolve(request, limit=offset + request.limit))

        def page_request() -> SearchRequest:
            if ranking is not None:
                if not isinstance(ranking, RankingOptions):
                    raise MemoryValidationError("ranking is RankingOptions", field="ranking")
                # Without a profile, the section's defaults bound it, and the provider
                # refuses a mode it is not configured for.
                spec = self.profile_spec
                bounds = (spec.retrieval.request_ranking if spec is not None
                          else RequestRankingSection())
                ranking.within(modes=(tuple(m.value for m in spec.retrieval.modes)
                                      if spec is not None else MODES),
                               max_weight=bounds.max_weight, allowed=bounds.allowed)
            return SearchRequest(scopes=scope_tuple, query=query, limit=hits,
                                 memory_types=memory_type_tuple(memory_types),
                                 metadata_filter=metadata_filter or {},
                                 entity_ids=string_tuple(entity_ids, "entity_ids"),
                                 ranking=ranking, occurred_since=occurred_since,
                                 occurred_before=occurred_before, as_of=as_of,
                                 visibility=optional_member(Visibility, visibility,
                                                            "visibility"),
                                 source_types=string_tuple(source_types, "source_types"),
                                 sensitivity=string_tuple(sensitivity, "sensitivity"),
                                 exclude_sensitivity=string_tuple(exclude_sensitivity,
                                                                  "exclude_sensitivity"))

        result: SearchResult = await self._execute(Operation.SEARCH, principal, build)
        return attrs.evolve(result, hits=result.hits[offset:offset + hits],
                            next_cursor=next_page_cursor(page_request(), offset,
                                                         len(result.hits)))

    async def replay(self, principal: Principal, snapshot_id: str) -> ReplayResult:
        """The exact record versions a past search returned (its ``snapshot_id``), with
        their scores and the ranking, profile and policy revisions used; governed like a
        search of the snapshot's scopes. Erased versions are listed, not returned; a
        snapshot of an erased user raises ``SnapshotErasedError``."""
        await self._ready()
        return await replay_through(self.activity, principal, snapshot_id)

    async def update(
        self,
        principal: Principal,
        scope: Scope,
        record_id: str,
        *,
        expected_revision: str | None = None,
        content: str | None = None,
        memory_type: MemoryType | str | None = None,
        metadata: Mapping[str, Any] | None = None,
        importance: float | None = None,
        visibility: Visibility | str | None = None,
        entity_ids: Iterable[str] | None = None,
        expires_at: float | None = None,
        clear_expires_at: bool = False,
        invalid_at: float | None = None,
        idempotency_key: str | None = None,
        superseded_by: str | None = None,
        occurred_at: float | None = None,
    ) -> MemoryRecord:
        return await self._execute(
            Operation.UPDATE, principal, lambda: UpdateRequest(
                scope=scope, record_id=record_id, expected_revision=expected_revision,
                content=content,
                memory_type=optional_member(MemoryType, memory_type, "memory_type"),
                metadata=metadata, importance=importance,
                visibility=optional_member(Visibility, visibility, "visibility"),
                entity_ids=None if entity_ids is None else string_tuple(entity_ids, "entity_ids"),
                expires_at=expires_at, clear_expires_at=clear_expires_at,
                invalid_at=invalid_at, idempotency_key=idempotency_key,
                superseded_by=superseded_by, occurred_at=occurred_at,
            ))

    async def delete(self, principal: Principal, scope: Scope, record_id: str, *,
                     expected_revision: str | None = None, hard: bool = False,
                     idempotency_key: str | None = None) -> DeleteResult:
        return await self._execute(
            Operation.DELETE, principal,
            lambda: DeleteRequest(scope=scope, record_id=record_id,
                                  expected_revision=expected_revision, hard=hard,
                                  idempotency_key=idempotency_key))

    async def history(self, principal: Principal, scope: Scope,
                      record_id: str) -> tuple[MemoryVersion, ...]:
        return await self._execute(
            Operation.HISTORY, principal, lambda: HistoryRequest(scope=scope, record_id=record_id))

    async def delete_all(self, principal: Principal, scope: Scope) -> int:
        return await self._execute(Operation.DELETE_ALL, principal,
                                          lambda: DeleteAllRequest(scope=scope))

    async def delete_user(self, principal: Principal, tenant_id: str,
                          user_id: str) -> ErasureReceipt:
        return await self._execute(
            Operation.DELETE_USER, principal, lambda: DeleteUserRequest(tenant_id=tenant_id,
                                                                        user_id=user_id))

    async def purge_expired(self, principal: Principal, scope: Scope, *, limit: int = 100,
                            after: str | None = None) -> CleanupPage:
        return await self._execute(
            Operation.PURGE_EXPIRED, principal, lambda: PurgeExpiredRequest(scope=scope,
                                                                            limit=limit,
                                                                            after=after))

    async def list_pending(self, principal: Principal, scope: Scope, *, limit: int = 20,
                           cursor: str | None = None) -> Page[MemoryRecord]:
        """The review queue of one exact scope, oldest first: records held as
        ``pending_review`` (needs ``memory:review``); decide each with ``approve`` or
        ``reject``."""
        return await self._execute(
            Operation.LIST_PENDING, principal, lambda: ListPendingRequest(scope=scope, limit=limit,
                                                                          cursor=cursor))

    async def approve(self, principal: Principal, scope: Scope, record_id: str, *,
                      expected_revision: str | None = None,
                      idempotency_key: str | None = None) -> MemoryRecord:
        """Accept a memory held for review: it becomes active (a new version) and
        visible to reads. Takes ``memory:review``."""
        return await self._execute(
            Operation.APPROVE, principal,
            lambda: ApproveRequest(scope=scope, record_id=record_id,
                                   expected_revision=expected_revision,
                                   idempotency_key=idempotency_key))

    async def reject(self, principal: Principal, scope: Scope, record_id: str, *,
                     expected_revision: str | None = None,
                     idempotency_key: str | None = None) -> DeleteResult:
        """Refuse a memory held for review: it is erased with its history (it was never
        accepted); the event trail keeps the rejection. Takes ``memory:review``."""
        return await self._execute(
            Operation.REJECT, principal,
            lambda: RejectRequest(scope=scope, record_id=record_id,
                                  expected_revision=expected_revision,
                                  idempotency_key=idempotency_key))
