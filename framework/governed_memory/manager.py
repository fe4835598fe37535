"""``GovernedMemoryManager``: the canonical async API for application code.

Each method builds a typed request and hands it to the activity port, so governance
is not something a call site can forget. The principal is an argument on every call
because it comes from the host's authentication, per request, never from the scope.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import TracerProvider

from governed_memory.batch import MAX_BATCH_ITEMS, AddItem, BatchAddResult, ItemOutcome
from governed_memory.binding import bind_principal, bind_scope
from governed_memory.capabilities import Capabilities, HealthStatus
from governed_memory.clock import Clock, SystemClock
from governed_memory.composition import compose_profile, provider_from_plugins, resolve_pack
from governed_memory.dedup import DedupMode
from governed_memory.errors import (
    GovernedMemoryError,
    MemoryCapabilityUnsupportedError,
    MemoryUnavailableError,
    MemoryValidationError,
)
from governed_memory.events import EventBus, EventSink
from governed_memory.indexing import ReindexPage, WorkerReport, WorkerSteps
from governed_memory.lookup import LookupRequest
from governed_memory.maintenance import (
    OutboxReport,
    OutboxStatusRequest,
    ProcessIndexJobsRequest,
    PurgeSnapshotsRequest,
    ReindexRequest,
    RetryDeadJobsRequest,
)
from governed_memory.operation_context import ProfileRef
from governed_memory.operations import Operation
from governed_memory.pipeline import ActivityPort
from governed_memory.plugins import PluginManager
from governed_memory.policy import MemoryPolicy, PolicyEngine
from governed_memory.principal import Permission, Principal, PrincipalKind
from governed_memory.profiles.packs import ResolvedPack
from governed_memory.profiles.spec import (
    EventDetail,
    MemoryProfileSpec,
    RequestRankingSection,
)
from governed_memory.provider import MemoryProvider
from governed_memory.ranking_options import MODES, RankingOptions
from governed_memory.rates import RateWindows
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
from governed_memory.replay import ReplayResult, replay_through
from governed_memory.request import Request
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
from governed_memory.telemetry import get_tracer

T = TypeVar("T")
Q = TypeVar("Q")

log = logging.getLogger(__name__)


E = TypeVar("E", bound=enum.Enum)


def _enum(kind: type[E], value: object, field: str) -> E:
    """An enum member from a member or its value; a bad value names its field."""
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(str(m.value) for m in kind)
        raise MemoryValidationError(f"{field} must be one of {allowed}, got {value!r}",
                                    field=field) from None


def _optional_enum(kind: type[E], value: object, field: str) -> E | None:
    return None if value is None else _enum(kind, value, field)


def _types(values: Iterable[MemoryType | str] | None) -> tuple[MemoryType, ...]:
    if isinstance(values, str):
        raise MemoryValidationError("memory_types must be a list of types, not a string",
                                    field="memory_types")
    return tuple(_enum(MemoryType, v, "memory_types") for v in values or ())


def _strings(values: Iterable[str], field: str) -> tuple[str, ...]:
    if isinstance(values, str):
        raise MemoryValidationError(f"{field} must be a list of strings, not a string",
                                    field=field)
    return tuple(values)


MAINTENANCE_BATCH = 1000
"""Snapshots a maintenance round removes at most."""

MAINTENANCE_PRINCIPAL = Principal(
    "governed-memory:maintenance", PrincipalKind.SERVICE, "operator",
    permissions=frozenset({Permission.ADMIN}))
"""Who the in-process maintenance round (``maintenance_interval_s``) acts as: an
operator of no tenant's data, as its events say."""


class GovernedMemoryManager:
    """Scoped, authorized, decided, traced and audited memory over one provider."""

    def __init__(
        self,
        provider: MemoryProvider,
        *,
        policies: Sequence[MemoryPolicy] = (),
        sinks: Sequence[EventSink] = (),
        clock: Clock | None = None,
        tracer_provider: TracerProvider | None = None,
        profile: ProfileRef | None = None,
        timeout_s: float | None = 30.0,
        provider_revision: str | None = None,
        profile_spec: MemoryProfileSpec | None = None,
        policy_configuration: Mapping[str, Mapping[str, Any]] | None = None,
        meter_provider: MeterProvider | None = None,
        fail_closed: bool | None = None,
        outbox_interval_s: float | None = None,
        maintenance_interval_s: float | None = None,
        rate_windows: RateWindows | None = None,
    ) -> None:
        """``fail_closed`` (default: the profile's ``[audit] fail_closed``) refuses any
        operation whose ``requested`` event the sinks cannot all record.
        ``outbox_interval_s`` drains a transactional provider's event outbox in the
        background at that period (it is always drained on ``start`` and after each
        write). ``maintenance_interval_s`` runs the maintenance round
        (:meth:`purge_snapshots`, as :data:`MAINTENANCE_PRINCIPAL`) in the background
        at that period; without it, run ``governed-memory worker`` or ``maintain``.
        ``rate_windows`` is where write-rate limits are counted (``governed_memory.rates``;
        default: the provider's own windows, else this process's); windows other than
        the provider's own are closed with the manager."""
        if maintenance_interval_s is not None and not maintenance_interval_s > 0:
            raise MemoryValidationError("maintenance_interval_s must be positive",
                                        field="maintenance_interval_s")
        self._provider = provider
        """Private: every operation reaches it through the activity port."""
        self.clock = clock or SystemClock()
        if fail_closed is None:
            fail_closed = profile_spec is not None and profile_spec.audit.fail_closed
        self.events = EventBus(sinks, strict=fail_closed)
        self.policy_engine = PolicyEngine(policies, policy_configuration)
        self.profile_spec = profile_spec
        """The profile this manager was built from (``from_profile``), if any."""
        self.domain_pack: ResolvedPack | None = None
        """The domain pack and use that selected the profile (``from_pack``), if any."""
        if profile is None and profile_spec is not None:
            profile = profile_spec.ref
        minimal = (profile_spec is not None
                   and profile_spec.privacy.event_detail is EventDetail.MINIMAL)
        self.activity = ActivityPort(
            provider,
            policies=self.policy_engine,
            events=self.events,
            clock=self.clock,
            tracer=get_tracer(tracer_provider),
            profile=profile or ProfileRef(),
            timeout_s=timeout_s,
            provider_revision=provider_revision
            or str(getattr(provider, "revision", "unknown")),
            content_hashes_in_events=not minimal,
            meter_provider=meter_provider,
            capture_content=(profile_spec is not None
                             and profile_spec.privacy.capture_content_in_traces),
            dedup=profile_spec.write.dedup if profile_spec is not None else DedupMode.OFF,
            dedup_threshold=(profile_spec.write.similarity_threshold
                             if profile_spec is not None else 0.95),
            rate_windows=rate_windows,
        )
        self._own_rate_windows = (rate_windows is not None
                                  and rate_windows is not provider.rate_windows)
        """A store given for this manager (a profile's ``[quotas] rate_store``), which it
        closes; the provider closes its own windows."""
        self.outbox_interval_s = outbox_interval_s
        self.maintenance_interval_s = maintenance_interval_s
        self._maintenance: asyncio.Task[None] | None = None
        self._started = False
        self._closed = False
        self._starting = asyncio.Lock()
        """Held while starting, so concurrent first operations start the provider once."""

    @classmethod
    def from_plugins(
        cls,
        provider: str,
        config: Mapping[str, Any] | None = None,
        *,
        plugins: PluginManager | None = None,
        clock: Clock | None = None,
        **kwargs: Any,
    ) -> GovernedMemoryManager:
        """Build over a provider registered by a plugin (``native``, …) by name."""
        clock = clock or SystemClock()
        return cls(provider_from_plugins(provider, config, plugins, clock), clock=clock,
                   **kwargs)

    @classmethod
    def from_profile(
        cls,
        profile: str | os.PathLike[str] | MemoryProfileSpec,
        *,
        plugins: PluginManager | None = None,
        clock: Clock | None = None,
        sinks: Sequence[EventSink] | None = None,
        tracer_provider: TracerProvider | None = None,
        provider_config_overrides: Mapping[str, Any] | None = None,
        meter_provider: MeterProvider | None = None,
        outbox_interval_s: float | None = None,
        maintenance_interval_s: float | None = None,
        sinks_base_dir: str | os.PathLike[str] | None = None,
    ) -> GovernedMemoryManager:
        """Build from a profile: a registered reference (``"chat-assistant@1.0.0"``,
        or ``"chat-assistant"`` for its newest version), a TOML file (a ``str`` naming an
        existing file, or any ``os.PathLike``), or a ``MemoryProfileSpec``
        (:func:`governed_memory.profiles.resolve_profile` decides which).

        The profile names the provider and its config, the policies in order, the
        deadline and its event sinks; its id, version and revision go into every event
        and span. ``sinks=None`` (the default) builds the sinks the profile's
        ``[audit]`` names (``governed_memory.sinks.build_sinks``), relative paths under
        ``sinks_base_dir``, which defaults to the directory of the provider's database
        file, else ``$GOVERNED_MEMORY_HOME``, else ``./.governed-memory``
        (``governed_memory.sinks.default_base_dir``); pass sinks to choose them
        yourself. A profile with ``[audit] fail_closed = true`` and ``sinks=()`` is
        refused here (``MemoryConfigurationError``): every operation would be.
        ``provider_config_overrides`` replace provider config keys for this process
        (say, a database ``path``) without changing the profile's revision.
        (:mod:`governed_memory.composition` does the building.)

        The manager starts on its first operation; ``async with`` (or ``start()`` and
        ``close()``) also closes it.
        """
        clock = clock or SystemClock()
        parts = compose_profile(profile, plugins=plugins or PluginManager.load(),
                                clock=clock, sinks=sinks,
                                provider_config_overrides=provider_config_overrides,
                                meter_provider=meter_provider, sinks_base_dir=sinks_base_dir)
        spec = parts.spec
        manager = cls(parts.provider, policies=parts.policies, sinks=parts.sinks,
                      clock=clock, tracer_provider=tracer_provider, timeout_s=spec.timeout_s,
                      profile_spec=spec, policy_configuration=parts.policy_configuration,
                      meter_provider=meter_provider, outbox_interval_s=outbox_interval_s,
                      maintenance_interval_s=maintenance_interval_s,
                      rate_windows=parts.rate_windows)
        parts.attach(manager.events)
        return manager

    @classmethod
    def from_pack(
        cls,
        pack: str,
        use: str,
        *,
        plugins: PluginManager | None = None,
        clock: Clock | None = None,
        sinks: Sequence[EventSink] | None = None,
        tracer_provider: TracerProvider | None = None,
        provider_config_overrides: Mapping[str, Any] | None = None,
        meter_provider: MeterProvider | None = None,
        outbox_interval_s: float | None = None,
        maintenance_interval_s: float | None = None,
        sinks_base_dir: str | os.PathLike[str] | None = None,
    ) -> GovernedMemoryManager:
        """Build from the profile a domain pack (``"support-desk@1.0.0"``) selects for
        one use (``"chat"``); every other argument is :meth:`from_profile`'s (``clock``
        replaces the system clock, for tests and simulations)."""
        plugins = plugins or PluginManager.load()
        spec, resolved = resolve_pack(pack, use, plugins)
        manager = cls.from_profile(spec, plugins=plugins, clock=clock, sinks=sinks,
                                   tracer_provider=tracer_provider,
                                   provider_config_overrides=provider_config_overrides,
                                   meter_provider=meter_provider,
                                   outbox_interval_s=outbox_interval_s,
                                   maintenance_interval_s=maintenance_interval_s,
                                   sinks_base_dir=sinks_base_dir)
        manager.domain_pack = resolved
        return manager

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Start the provider (and the outbox and maintenance loops the manager was
        given). Optional: the first operation starts a manager that was not started,
        once, however many operations arrive together (``async with`` also closes it).
        Idempotent; after :meth:`close`, it starts the manager again."""
        if self._started:
            return
        async with self._starting:
            if not self._started:
                await self._start()
                self._started, self._closed = True, False

    async def _ensure_started(self) -> None:
        """Start on first use; a closed manager says what to do instead of reaching a
        closed provider."""
        if self._started:
            return
        if self._closed:
            raise MemoryUnavailableError(
                "this GovernedMemoryManager is closed (close() or the end of its `async "
                "with` block); build a new one, or call `await manager.start()` to reopen it")
        await self.start()

    async def _start(self) -> None:
        await self._provider.start()
        try:
            outbox = self.activity.outbox
            if outbox is not None:
                # Events a crash left between the provider's commit and the sinks.
                await outbox.drain()
                if self.outbox_interval_s is not None:
                    outbox.start(self.outbox_interval_s)
            if self.maintenance_interval_s is not None:
                self._maintenance = asyncio.create_task(
                    self._maintain_every(self.maintenance_interval_s),
                    name="governed-memory-maintenance")
        except BaseException:
            # A start that fails leaves nothing open behind it (connections, threads).
            try:
                await self._provider.close()
            except Exception as exc:
                log.error("closing the provider after a failed start failed: %s",
                          type(exc).__name__)
            raise

    def capabilities(self) -> Capabilities:
        """What the provider behind this manager declares it can do."""
        return self._provider.capabilities()

    async def health(self) -> HealthStatus:
        """The provider's health probe (a real round trip to its storage): an operator's
        check, reading no memory, so it is not an operation with events."""
        await self._ensure_started()
        return await self._provider.health()

    async def deliver_events(self) -> int:
        """Drain the provider's event outbox now; returns how many events went out
        (0 for a provider without one)."""
        await self._ensure_started()
        outbox = self.activity.outbox
        return 0 if outbox is None else len((await outbox.drain()).delivered)

    async def _maintain_every(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                while await self.purge_snapshots(MAINTENANCE_PRINCIPAL) == MAINTENANCE_BATCH:
                    pass  # a full page: more may be due
            except MemoryCapabilityUnsupportedError:
                return  # nothing to maintain here
            except Exception as exc:  # the loop outlives one failure; the trail has it
                log.warning("maintenance round failed: %s", type(exc).__name__)

    async def close(self) -> None:
        """Stop the background loops, deliver what the outbox holds, close the provider
        and the sinks (idempotent). Operations after it raise ``MemoryUnavailableError``
        until :meth:`start` reopens the manager."""
        self._closed = True
        task, self._maintenance = self._maintenance, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._started:
            self._started = False
            outbox = self.activity.outbox
            if outbox is not None:
                await outbox.stop()
                try:
                    await outbox.drain()
                except Exception as exc:  # stored events wait for the next start
                    log.error("event outbox: final drain failed: %s", type(exc).__name__)
            await self._provider.close()
        if self._own_rate_windows:
            try:
                await self.activity.rate_windows.close()
            except Exception as exc:  # the provider and the sinks still close
                log.error("closing the rate windows failed: %s", type(exc).__name__)
        await self.events.close()

    async def __aenter__(self) -> GovernedMemoryManager:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    def bind(self, principal: Principal, scope: Scope) -> BoundMemory:
        """One principal's memory in one exact scope: ``handle.add("...")``,
        ``handle.search("...")`` and every other scoped operation without repeating
        either (``handle.with_scope(...)`` for another scope of the same principal)."""
        return BoundMemory(self, principal, scope)

    # -- helpers ------------------------------------------------------------------------

    async def _execute(self, operation: Operation, principal: Principal,
                       build: Callable[[], Request[T]]) -> T:
        await self._ensure_started()
        request = await build_request(self.activity, operation, principal, build)
        return await self.activity.execute(request, principal)

    # -- operations ---------------------------------------------------------------------

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
            memory_type=_enum(MemoryType, memory_type, "memory_type"), key=key,
            metadata=metadata or {}, provenance=provenance,
            visibility=_enum(Visibility, visibility, "visibility"), importance=importance,
            entity_ids=_strings(entity_ids, "entity_ids"), valid_from=valid_from,
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

    async def list(self, principal: Principal, scope: Scope, *, limit: int = 20,
                   cursor: str | None = None,
                   memory_types: Iterable[MemoryType | str] | None = None
                   ) -> Page[MemoryRecord]:
        return await self._execute(
            Operation.LIST, principal,
            lambda: ListRequest(scope=scope, limit=limit, cursor=cursor,
                                memory_types=_types(memory_types)))

    async def search(self, principal: Principal, scopes: Scope | Sequence[Scope], query: str,
                     *, limit: int | None = None,
                     memory_types: Iterable[MemoryType | str] | None = None,
                     metadata_filter: Mapping[str, Any] | None = None,
                     entity_ids: Iterable[str] = (),
                     ranking: RankingOptions | None = None,
                     occurred_since: float | None = None,
                     occurred_before: float | None = None,
                     as_of: float | None = None) -> SearchResult:
        """Search one or more exact scopes. ``limit`` defaults to the profile's
        ``retrieval.top_k`` (10 without a profile). ``ranking`` re-weighs this search
        within the profile's bounds (``[retrieval.request_ranking]``; see
        ``governed_memory.ranking_options``). ``occurred_since``/``occurred_before`` keep
        records whose ``event_time`` lies in ``[since, before)``; ``as_of`` searches
        memory as it stood then (what had happened and was valid at that time, recency
        measured from it)."""
        scope_tuple = ((scopes,) if isinstance(scopes, Scope)
                       else tuple(scopes) if isinstance(scopes, list | tuple) else (scopes,))
        if limit is None:
            limit = self.profile_spec.retrieval.top_k if self.profile_spec else 10
        hits = limit

        def build() -> SearchRequest:
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
                                 memory_types=_types(memory_types),
                                 metadata_filter=metadata_filter or {},
                                 entity_ids=_strings(entity_ids, "entity_ids"),
                                 ranking=ranking, occurred_since=occurred_since,
                                 occurred_before=occurred_before, as_of=as_of)

        return await self._execute(Operation.SEARCH, principal, build)

    async def replay(self, principal: Principal, snapshot_id: str) -> ReplayResult:
        """The exact record versions a past search returned (its ``snapshot_id``), with
        their scores and the ranking, profile and policy revisions used; governed like a
        search of the snapshot's scopes. Erased versions are listed, not returned; a
        snapshot of an erased user raises ``SnapshotErasedError``."""
        await self._ensure_started()
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
                memory_type=_optional_enum(MemoryType, memory_type, "memory_type"),
                metadata=metadata, importance=importance,
                visibility=_optional_enum(Visibility, visibility, "visibility"),
                entity_ids=None if entity_ids is None else _strings(entity_ids, "entity_ids"),
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

    # -- store-wide indexing work: an operator's (governed_memory.maintenance) ----------

    async def outbox_status(self, principal: Principal, *,
                            dead_limit: int = 20) -> OutboxReport:
        """The indexing outbox: jobs by state, vectors by embedder, the oldest dead
        letters. ``principal`` is an operator: a service principal with
        ``memory:admin`` bound to no user."""
        return await self._execute(
            Operation.INDEX_STATUS, principal,
            lambda: OutboxStatusRequest(dead_limit=dead_limit))

    async def process_index_jobs(self, principal: Principal, *, worker_id: str,
                                 limit: int = 32, lease_s: float = 60.0) -> WorkerReport:
        """One worker round: lease up to ``limit`` due jobs, embed, settle each."""
        result = await self._execute(
            Operation.PROCESS_INDEX_JOBS, principal,
            lambda: ProcessIndexJobsRequest(worker_id=worker_id, limit=limit,
                                            lease_s=lease_s))
        return result.report

    async def retry_dead_jobs(self, principal: Principal,
                              job_ids: Sequence[str] | None = None) -> int:
        """Requeue dead letters (all of them when ``job_ids`` is ``None``)."""
        result = await self._execute(
            Operation.RETRY_INDEX_JOBS, principal,
            lambda: RetryDeadJobsRequest(job_ids=job_ids))
        return result.count

    async def reindex(self, principal: Principal, *, cursor: str | None = None,
                      limit: int = 500) -> ReindexPage:
        """One page of a reindex; continue with the page's ``cursor`` until ``None``."""
        result = await self._execute(
            Operation.REINDEX, principal, lambda: ReindexRequest(cursor=cursor, limit=limit))
        return result.page

    async def purge_snapshots(self, principal: Principal, *,
                              limit: int = MAINTENANCE_BATCH) -> int:
        """The maintenance round: remove up to ``limit`` retrieval snapshots past the
        provider's retention; returns how many (``memory.maintenance.*`` events)."""
        result = await self._execute(
            Operation.PURGE_SNAPSHOTS, principal, lambda: PurgeSnapshotsRequest(limit=limit))
        return result.count

    def worker_steps(self, principal: Principal) -> WorkerSteps:
        """The governed worker round bound to ``principal``, for
        :func:`governed_memory.indexing.run_worker`: every round is an operation with
        its decision, span and ``memory.index.*`` events."""
        manager = self

        class _Steps:
            async def process_index_jobs(self, *, worker_id: str, limit: int = 32,
                                         lease_s: float = 60.0) -> WorkerReport:
                return await manager.process_index_jobs(principal, worker_id=worker_id,
                                                        limit=limit, lease_s=lease_s)

        return _Steps()

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


class BoundMemory:
    """The manager's scoped operations with the principal and the scope fixed.

    Nothing is decided here: each method is the manager's own (the same arguments after
    the scope, the same checks, events and errors), so a handle can never reach a scope
    or a principal the manager would not. A handle is cheap; make one per request or
    per turn.
    """

    __slots__ = ("_manager", "_principal", "_scope")

    def __init__(self, manager: GovernedMemoryManager, principal: Principal,
                 scope: Scope) -> None:
        if not isinstance(principal, Principal):
            raise MemoryValidationError("bind needs the authenticated Principal",
                                        field="principal")
        if not isinstance(scope, Scope):
            raise MemoryValidationError("bind needs one exact Scope", field="scope")
        self._manager, self._principal, self._scope = manager, principal, scope

    @property
    def manager(self) -> GovernedMemoryManager:
        return self._manager

    @property
    def principal(self) -> Principal:
        return self._principal

    @property
    def scope(self) -> Scope:
        return self._scope

    def with_scope(self, scope: Scope) -> BoundMemory:
        """The same principal in another exact scope."""
        return BoundMemory(self._manager, self._principal, scope)

    def __repr__(self) -> str:
        return f"BoundMemory(principal={self._principal.principal_id!r}, scope={self._scope!r})"

    add = bind_scope(GovernedMemoryManager.add)
    add_many = bind_scope(GovernedMemoryManager.add_many)
    get = bind_scope(GovernedMemoryManager.get)
    lookup = bind_scope(GovernedMemoryManager.lookup)
    list = bind_scope(GovernedMemoryManager.list)
    search = bind_scope(GovernedMemoryManager.search)
    update = bind_scope(GovernedMemoryManager.update)
    delete = bind_scope(GovernedMemoryManager.delete)
    history = bind_scope(GovernedMemoryManager.history)
    delete_all = bind_scope(GovernedMemoryManager.delete_all)
    purge_expired = bind_scope(GovernedMemoryManager.purge_expired)
    list_pending = bind_scope(GovernedMemoryManager.list_pending)
    approve = bind_scope(GovernedMemoryManager.approve)
    reject = bind_scope(GovernedMemoryManager.reject)
    replay = bind_principal(GovernedMemoryManager.replay)


async def build_request(port: ActivityPort, operation: Operation, principal: Principal,
                        build: Callable[[], Q]) -> Q:
    """Build the request for one call, so a bad argument is still an audited operation.

    A request that cannot be built (a wrong type, an out-of-range value) is recorded by
    ``port`` as a rejected ``operation`` of ``principal`` before the typed validation error
    is raised; a caller that is not a ``Principal`` cannot be audited and is refused
    outright. The manager and the tiers facade both enter the port this way.
    """
    if not isinstance(principal, Principal):
        raise MemoryValidationError("principal must be a Principal from authenticated "
                                    "context", field="principal")
    try:
        return build()
    except MemoryValidationError as exc:
        await port.reject_invalid(operation, principal, exc)
        raise
    except (TypeError, ValueError) as exc:
        error = MemoryValidationError(f"invalid {operation.value} request: {exc}",
                                      field=operation.value)
        await port.reject_invalid(operation, principal, error)
        raise error from None
