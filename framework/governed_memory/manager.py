"""``GovernedMemoryManager``: the canonical async API for application code.

Each method builds a typed request and hands it to the activity port, so governance
is not something a call site can forget. The principal is an argument on every call
because it comes from the host's authentication, per request, never from the scope.

This module holds how a manager is built (from a provider, plugins, a profile or a
domain pack), started and closed, and the bound handle; the operations themselves are
grouped by caller: application code's in ``memory_operations``, an operator's
store-wide ones in ``store_operations``. ``build_request`` (``governed_calls``) and
``MAINTENANCE_BATCH`` (``store_operations``) are importable from here too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import TracerProvider

from governed_memory.binding import bind_principal, bind_scope
from governed_memory.block_operations import BlockOperations
from governed_memory.capabilities import Capabilities, HealthStatus
from governed_memory.clock import Clock, SystemClock
from governed_memory.composition import compose_profile, provider_from_plugins, resolve_pack
from governed_memory.errors import (
    MemoryCapabilityUnsupportedError,
    MemoryConfigurationError,
    MemoryValidationError,
)
from governed_memory.events import EventBus, EventSink
from governed_memory.governed_calls import build_request as build_request
from governed_memory.language_models import LanguageModel
from governed_memory.lifetime import ManagerLifetime
from governed_memory.memory_operations import MemoryOperations
from governed_memory.operation_context import ProfileRef
from governed_memory.pipeline import ActivityPort
from governed_memory.plugins import PluginManager
from governed_memory.policy import MemoryPolicy, PolicyEngine
from governed_memory.principal import Permission, Principal, PrincipalKind
from governed_memory.profiles.packs import ResolvedPack
from governed_memory.profiles.spec import MemoryProfileSpec
from governed_memory.provider import MemoryProvider
from governed_memory.rates import RateWindows
from governed_memory.scope import Scope
from governed_memory.settings import DEFAULT_TIMEOUT_S, GovernanceSettings
from governed_memory.store_operations import MAINTENANCE_BATCH as MAINTENANCE_BATCH
from governed_memory.store_operations import StoreOperations
from governed_memory.telemetry import get_tracer
from governed_memory.tiers.adapters import BlockTier
from governed_memory.tiers.block_ops import MemoryBlocks
from governed_memory.tiers.blocks import BlockStore

MAINTENANCE_PRINCIPAL = Principal(
    "governed-memory:maintenance", PrincipalKind.SERVICE, "operator",
    permissions=frozenset({Permission.ADMIN}))
"""Who the in-process maintenance round (``maintenance_interval_s``) acts as: an
operator of no tenant's data, as its events say."""


class GovernedMemoryManager(MemoryOperations, BlockOperations, StoreOperations):
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
        timeout_s: float | None = DEFAULT_TIMEOUT_S,
        provider_revision: str | None = None,
        profile_spec: MemoryProfileSpec | None = None,
        policy_configuration: Mapping[str, Mapping[str, Any]] | None = None,
        meter_provider: MeterProvider | None = None,
        fail_closed: bool | None = None,
        outbox_interval_s: float | None = None,
        maintenance_interval_s: float | None = None,
        rate_windows: RateWindows | None = None,
        settings: GovernanceSettings | None = None,
        language_model: LanguageModel | None = None,
        blocks: BlockStore | None = None,
    ) -> None:
        """``settings`` is how governance runs each operation (``from_profile`` passes
        ``GovernanceSettings.from_profile(spec)``); without it, it is built from
        ``profile_spec`` (the profile this manager stands for), ``profile``,
        ``timeout_s`` and ``fail_closed`` (default: the profile's ``[audit]
        fail_closed``, which refuses any operation whose ``requested`` event the sinks
        cannot all record). ``outbox_interval_s`` drains a transactional provider's
        event outbox in the background at that period (it is always drained on
        ``start`` and after each write). ``maintenance_interval_s`` runs the maintenance
        round (:meth:`maintain`: snapshots past retention, then expired records of every
        scope in bounded batches, as :data:`MAINTENANCE_PRINCIPAL`) in the background at
        that period; without it, run ``governed-memory worker`` or ``maintain``.
        ``rate_windows`` is where write-rate limits are counted (``governed_memory.rates``;
        default: the provider's own windows, else this process's); windows other than
        the provider's own are closed with the manager.
        ``language_model`` is the model :meth:`remember` reads conversations with
        (``from_profile``: the profile's ``[stores.language_model]``). ``blocks`` is the
        store of the memory blocks ``profile_spec`` declares (``from_profile``: its
        ``[stores.blocks]``), started and closed with the provider."""
        if maintenance_interval_s is not None and not maintenance_interval_s > 0:
            raise MemoryValidationError("maintenance_interval_s must be positive",
                                        field="maintenance_interval_s")
        if settings is not None and (profile is not None or fail_closed is not None
                                     or timeout_s != DEFAULT_TIMEOUT_S):
            # One of them would be silently ignored: the value carries all three.
            raise MemoryValidationError(
                "settings already carries the profile, the deadline and fail_closed: "
                "set them in it, not beside it", field="settings")
        if settings is None:
            settings = GovernanceSettings.of(profile_spec, profile=profile,
                                             timeout_s=timeout_s, fail_closed=fail_closed)
        self._provider = provider
        """Private: every operation reaches it through the activity port."""
        self.clock = clock or SystemClock()
        self.events = EventBus(sinks, strict=settings.fail_closed)
        self.policy_engine = PolicyEngine(policies, policy_configuration)
        self.profile_spec = profile_spec
        """The profile this manager was built from (``from_profile``), if any."""
        self.domain_pack: ResolvedPack | None = None
        """The domain pack and use that selected the profile (``from_pack``), if any."""
        self.language_model = language_model
        """The model :meth:`remember` uses, if any (assignable)."""
        self.activity = ActivityPort(
            provider, policies=self.policy_engine, events=self.events, clock=self.clock,
            tracer=get_tracer(tracer_provider), settings=settings,
            provider_revision=provider_revision or str(getattr(provider, "revision", "unknown")),
            meter_provider=meter_provider, rate_windows=rate_windows)
        specs = profile_spec.blocks if profile_spec is not None else {}
        if blocks is not None and not specs:
            raise MemoryConfigurationError(
                "blocks= needs the profile_spec that declares them ([blocks.<name>])")
        self.block_ops = (MemoryBlocks(self.activity.beside(BlockTier(blocks, specs)), specs)
                          if blocks is not None else None)
        owned = rate_windows is not None and rate_windows is not provider.rate_windows
        # A store given for this manager (a profile's ``[quotas] rate_store``) is closed
        # with it; the provider closes its own windows.
        self._lifetime = ManagerLifetime(
            provider, self.events, self.activity.outbox, self._maintenance_round,
            outbox_interval_s=outbox_interval_s, maintenance_interval_s=maintenance_interval_s,
            owned_windows=self.activity.rate_windows if owned else None,
            stores=(blocks,) if blocks is not None else ())

    @classmethod
    def from_plugins(
        cls,
        provider: str,
        config: Mapping[str, Any] | None = None,
        *,
        plugins: PluginManager | None = None,
        clock: Clock | None = None,
        policies: Sequence[MemoryPolicy] = (),
        sinks: Sequence[EventSink] = (),
        tracer_provider: TracerProvider | None = None,
        profile: ProfileRef | None = None,
        timeout_s: float | None = DEFAULT_TIMEOUT_S,
        provider_revision: str | None = None,
        profile_spec: MemoryProfileSpec | None = None,
        policy_configuration: Mapping[str, Mapping[str, Any]] | None = None,
        meter_provider: MeterProvider | None = None,
        fail_closed: bool | None = None,
        outbox_interval_s: float | None = None,
        maintenance_interval_s: float | None = None,
        rate_windows: RateWindows | None = None,
        settings: GovernanceSettings | None = None,
        language_model: LanguageModel | None = None,
        blocks: BlockStore | None = None,
    ) -> GovernedMemoryManager:
        """Build over a provider registered by a plugin (``native``, …) by name; every
        other argument is the constructor's."""
        clock = clock or SystemClock()
        return cls(provider_from_plugins(provider, config, plugins, clock), clock=clock,
                   policies=policies, sinks=sinks, tracer_provider=tracer_provider,
                   profile=profile, timeout_s=timeout_s, provider_revision=provider_revision,
                   profile_spec=profile_spec, policy_configuration=policy_configuration,
                   meter_provider=meter_provider, fail_closed=fail_closed,
                   outbox_interval_s=outbox_interval_s,
                   maintenance_interval_s=maintenance_interval_s, rate_windows=rate_windows,
                   settings=settings, language_model=language_model, blocks=blocks)

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
        manager = cls(parts.provider, policies=parts.policies, sinks=parts.sinks,
                      clock=clock, tracer_provider=tracer_provider, profile_spec=parts.spec,
                      settings=GovernanceSettings.from_profile(parts.spec),
                      policy_configuration=parts.policy_configuration,
                      meter_provider=meter_provider, outbox_interval_s=outbox_interval_s,
                      maintenance_interval_s=maintenance_interval_s,
                      rate_windows=parts.rate_windows, language_model=parts.language_model,
                      blocks=parts.block_store)
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
        await self._lifetime.start()

    @property
    def outbox_interval_s(self) -> float | None:
        return self._lifetime.outbox_interval_s

    @property
    def maintenance_interval_s(self) -> float | None:
        return self._lifetime.maintenance_interval_s

    def capabilities(self) -> Capabilities:
        """What the provider behind this manager declares it can do."""
        return self._provider.capabilities()

    async def health(self) -> HealthStatus:
        """The provider's health probe (a real round trip to its storage): an operator's
        check, reading no memory, so it is not an operation with events."""
        await self._ready()
        return await self._provider.health()

    async def deliver_events(self) -> int:
        """Drain the provider's event outbox now; returns how many events went out
        (0 for a provider without one)."""
        await self._ready()
        outbox = self.activity.outbox
        return 0 if outbox is None else len((await outbox.drain()).delivered)

    async def _maintenance_round(self) -> None:
        """:meth:`maintain` as :data:`MAINTENANCE_PRINCIPAL`: snapshots past retention,
        then expired records of every scope in bounded batches. A provider that can do
        neither ends the loop (``MemoryCapabilityUnsupportedError``); one that can do
        one of them has the other skipped, with the reason logged."""
        report = await self.maintain(MAINTENANCE_PRINCIPAL)
        if report.nothing_supported:
            raise MemoryCapabilityUnsupportedError(
                "nothing to maintain: " + "; ".join(reason for _, reason in report.skipped))

    async def close(self) -> None:
        """Stop the background loops, deliver what the outbox holds, close the provider
        and the sinks (idempotent). Operations after it raise ``MemoryUnavailableError``
        until :meth:`start` reopens the manager."""
        await self._lifetime.close()

    async def __aenter__(self) -> GovernedMemoryManager:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.close()

    async def _ready(self) -> None:
        """Start on first use; a closed manager refuses (``MemoryUnavailableError``)."""
        await self._lifetime.ensure_started()

    def bind(self, principal: Principal, scope: Scope) -> BoundMemory:
        """One principal's memory in one exact scope: ``handle.add("...")``,
        ``handle.search("...")`` and every other scoped operation without repeating
        either (``handle.with_scope(...)`` for another scope of the same principal)."""
        return BoundMemory(self, principal, scope)


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
    remember = bind_scope(GovernedMemoryManager.remember)
    get = bind_scope(GovernedMemoryManager.get)
    lookup = bind_scope(GovernedMemoryManager.lookup)
    put = bind_scope(GovernedMemoryManager.put)
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
    read_blocks = bind_scope(GovernedMemoryManager.read_blocks)
    append_block = bind_scope(GovernedMemoryManager.append_block)
    replace_block = bind_scope(GovernedMemoryManager.replace_block)
    rethink_block = bind_scope(GovernedMemoryManager.rethink_block)
    block_history = bind_scope(GovernedMemoryManager.block_history)


