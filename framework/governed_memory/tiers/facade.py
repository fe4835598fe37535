"""``MemoryTiers``: the one facade chat and agent code imports.

- conversation: the turns of a session (``append``, ``recent``, ``clear``);
- working: one run's scratch state, bounded by a TTL (``scratch``, ``update``,
  ``clear_working``);
- long-term: governed memories (``save``, ``get``, ``search``, ``delete``), each kept in
  one exact scope: the one given, or with ``level=`` the owner narrowed to that level
  (a preference at ``ScopeLevel.USER`` follows its user into every project);
- blocks: the named texts a profile declares and an agent edits (``tiers.blocks``:
  ``read``, ``replace``, ``append``, ``rethink``, ``history``), always in the prompt.

Each tier is optional; calling into one that was not configured raises
``MemoryConfigurationError``. Every call goes through an activity port (validation,
policy decision, span, scope check, events), so the conversation, working and block
tiers are governed exactly like memories.

The principal always comes from the host's authentication. When the scope has no
``user_id``, the principal's is used, so the same human always gets the same session
key whether or not the caller spelled it out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import attrs

from governed_memory.errors import (
    MemoryConfigurationError,
    MemoryNotFoundError,
    MemoryValidationError,
)
from governed_memory.manager import GovernedMemoryManager, build_request
from governed_memory.operations import Operation
from governed_memory.pipeline import ActivityPort
from governed_memory.plugins import PluginManager
from governed_memory.principal import Principal
from governed_memory.profiles.blocks import BlockSection
from governed_memory.records import (
    DeleteResult,
    ErasureReceipt,
    MemoryRecord,
    MemoryType,
    SearchResult,
)
from governed_memory.request import Request
from governed_memory.scope import Scope, ScopeLevel
from governed_memory.tiers.adapters import BlockTier, ContextLedger, TurnTier, WorkingTier
from governed_memory.tiers.block_ops import MemoryBlocks
from governed_memory.tiers.blocks import Block, BlockStore
from governed_memory.tiers.governance import Governance
from governed_memory.tiers.owners import (
    check_owner,
    level_scope,
    owner_scope,
    run_scope,
    session_scope,
)
from governed_memory.tiers.requests import (
    MAX_RECENT_TURNS,
    AppendTurnRequest,
    ClearTurnsRequest,
    ClearWorkingStateRequest,
    EraseUserTurnsRequest,
    ListTurnsRequest,
    ReadWorkingStateRequest,
    RecentTurnsRequest,
    RecordContextRequest,
    RecordExtractionRequest,
    UpdateWorkingStateRequest,
)
from governed_memory.tiers.results import (
    Cleared,
    ContextRecord,
    InjectedVersion,
    WorkingState,
)
from governed_memory.tiers.turns import Turn, TurnDraft, TurnPage, TurnStore
from governed_memory.tiers.working import WorkingStateStore
from governed_memory.turncontext.policy import ContextPolicy
from governed_memory.turncontext.recall import MemoryRecall
from governed_memory.turncontext.scoping import recall_scopes
from governed_memory.turncontext.summarizer import summary_key

R = TypeVar("R")
T = TypeVar("T")


@attrs.frozen(slots=True)
class UserErasure:
    """What erasing one user removed: conversation turns (a count) and long-term
    memories (the provider's erasure receipt). Working state is not indexed by user;
    it lasts at most its TTL (``MAX_WORKING_TTL_S``) after the run's last update."""

    turns_removed: int | None
    memories: ErasureReceipt | None
    block_versions_removed: int | None = None
    """Versions of the user's memory blocks erased (``None``: no block tier)."""


@attrs.frozen(slots=True)
class MemorySnapshot:
    """What the configured tiers hold for one owner at one moment."""

    turns: tuple[Turn, ...]
    working_state: Mapping[str, Any]
    memories: tuple[MemoryRecord, ...]
    blocks: tuple[Block, ...] = ()


class MemoryTiers:
    """The tiers behind one facade; pass only the ones you configured. Memory blocks
    (``blocks`` with the profile's ``block_specs``) are reached as ``tiers.blocks``."""

    def __init__(
        self,
        *,
        long_term: GovernedMemoryManager | None = None,
        turns: TurnStore | None = None,
        working: WorkingStateStore | None = None,
        blocks: BlockStore | None = None,
        block_specs: Mapping[str, BlockSection] | None = None,
        governance: Governance | None = None,
        recent_limit: int = 20,
        working_ttl_s: float = 3600.0,
    ) -> None:
        if governance is None:
            governance = (Governance.of(long_term) if long_term is not None
                          else Governance.standalone())
        if not 1 <= recent_limit <= MAX_RECENT_TURNS:
            raise MemoryConfigurationError(
                f"recent_limit must be between 1 and {MAX_RECENT_TURNS}")
        if not working_ttl_s > 0:
            raise MemoryConfigurationError("working_ttl_s must be positive")
        self.governance = governance
        self.recent_limit = recent_limit
        self.working_ttl_s = working_ttl_s
        self._long_term = long_term
        self.turn_store = turns
        self.working_store = working
        self._turns = governance.port(TurnTier(turns)) if turns is not None else None
        self._working = governance.port(WorkingTier(working)) if working is not None else None
        self._ledger = governance.port(ContextLedger())
        self.block_store = blocks
        """The block store these tiers start and close (``None`` when the manager keeps
        the blocks: it owns their store)."""
        if (blocks is None) != (not block_specs):
            raise MemoryConfigurationError(
                "memory blocks need both a block store and the blocks it keeps "
                "(block_specs, a profile's [blocks.<name>])")
        kept = long_term.block_ops if long_term is not None else None
        if blocks is not None and kept is not None:
            raise MemoryConfigurationError(
                "the long-term manager already keeps memory blocks; give no block store "
                "beside it")
        self._blocks = kept if kept is not None else (
            MemoryBlocks(governance.port(BlockTier(blocks, block_specs or {})),
                         block_specs or {}) if blocks is not None else None)

    @classmethod
    def from_manager(cls, manager: GovernedMemoryManager, *,
                     plugins: PluginManager | None = None,
                     working_ttl_s: float = 3600.0) -> MemoryTiers:
        """The tiers a manager's profile declares: ``[stores.turns]`` and
        ``[stores.working_state]`` name registered stores (``kind``) and their config;
        ``[context] max_turns`` is the default recent limit. A tier the profile does
        not declare stays unconfigured."""
        spec = manager.profile_spec
        stores = spec.stores if spec is not None else {}
        turns: TurnStore | None = None
        working: WorkingStateStore | None = None
        blocks: BlockStore | None = None
        # A manager built from the profile keeps its blocks already (and their store).
        own_blocks = "blocks" in stores and manager.block_ops is None
        if "turns" in stores or "working_state" in stores or own_blocks:
            plugins = plugins or PluginManager.load()
            if "turns" in stores:
                section = stores["turns"]
                turns = plugins.turn_stores.get(section.kind).factory(dict(section.config),
                                                                      manager.clock)
            if "working_state" in stores:
                section = stores["working_state"]
                working = plugins.working_state_stores.get(section.kind).factory(
                    dict(section.config), manager.clock)
            if own_blocks:
                section = stores["blocks"]
                blocks = plugins.block_stores.get(section.kind).factory(
                    dict(section.config), manager.clock)
        recent = min(spec.context.max_turns, MAX_RECENT_TURNS) if spec is not None else 20
        return cls(long_term=manager, turns=turns, working=working, blocks=blocks,
                   block_specs=spec.blocks if spec is not None and own_blocks else None,
                   recent_limit=recent, working_ttl_s=working_ttl_s)

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        if self._long_term is not None:
            await self._long_term.start()
        for store in (self.turn_store, self.working_store, self.block_store):
            if store is not None:
                await store.start()

    async def close(self) -> None:
        for store in (self.turn_store, self.working_store, self.block_store):
            if store is not None:
                await store.close()
        if self._long_term is not None:
            await self._long_term.close()
        else:
            await self.governance.events.close()

    async def __aenter__(self) -> MemoryTiers:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- configuration ------------------------------------------------------------------

    @property
    def has_turns(self) -> bool:
        return self._turns is not None

    @property
    def has_working(self) -> bool:
        return self._working is not None

    @property
    def has_blocks(self) -> bool:
        return self._blocks is not None

    @property
    def blocks(self) -> MemoryBlocks:
        """The memory blocks: ``read``, ``replace``, ``append``, ``rethink``,
        ``history`` (``governed_memory.tiers.block_ops``)."""
        if self._blocks is None:
            raise MemoryConfigurationError("the block tier is not configured (a profile's "
                                           "[stores.blocks] and [blocks.<name>])")
        return self._blocks

    @property
    def has_long_term(self) -> bool:
        return self._long_term is not None

    @property
    def long_term_or_none(self) -> GovernedMemoryManager | None:
        return self._long_term

    @property
    def long_term(self) -> GovernedMemoryManager:
        if self._long_term is None:
            raise MemoryConfigurationError("the long-term tier is not configured")
        return self._long_term

    def _port(self, port: ActivityPort | None, tier: str) -> ActivityPort:
        if port is None:
            raise MemoryConfigurationError(f"the {tier} tier is not configured")
        return port

    async def _run(self, port: ActivityPort, operation: Operation, principal: Principal,
                   build: Callable[[], Request[T]]) -> T:
        request = await build_request(port, operation, principal, build)
        return await port.execute(request, principal)

    # -- conversation tier --------------------------------------------------------------

    async def append(self, principal: Principal, scope: Scope, turn: TurnDraft) -> Turn:
        port = self._port(self._turns, "conversation")
        return await self._run(
            port, Operation.APPEND_TURN, principal,
            lambda: AppendTurnRequest(scope=session_scope(principal, scope), turn=turn))

    async def recent(self, principal: Principal, scope: Scope, *,
                     limit: int | None = None) -> tuple[Turn, ...]:
        """The newest turns of the session, oldest first."""
        port = self._port(self._turns, "conversation")
        count = self.recent_limit if limit is None else limit
        page: TurnPage = await self._run(
            port, Operation.RECENT_TURNS, principal,
            lambda: RecentTurnsRequest(scope=session_scope(principal, scope), limit=count))
        return page.turns

    async def turns_after(self, principal: Principal, scope: Scope, after_seq: int, *,
                          limit: int = 50) -> tuple[Turn, ...]:
        """Up to ``limit`` turns after sequence number ``after_seq``, oldest first."""
        port = self._port(self._turns, "conversation")
        page: TurnPage = await self._run(
            port, Operation.LIST_TURNS, principal,
            lambda: ListTurnsRequest(scope=session_scope(principal, scope), after_seq=after_seq,
                                     limit=limit))
        return page.turns

    async def clear(self, principal: Principal, scope: Scope, *,
                    include_summary: bool = True) -> int:
        """Remove every turn of the session; returns how many. With the long-term tier
        configured, the session's rolling summary (a memory under
        ``summary:<session_id>``) is erased too, so nothing of the cleared conversation
        comes back through the context."""
        port = self._port(self._turns, "conversation")
        session = session_scope(principal, scope)
        result = await self._run(port, Operation.CLEAR_TURNS, principal,
                                          lambda: ClearTurnsRequest(scope=session))
        if include_summary and self._long_term is not None:
            assert session.session_id is not None
            try:
                summary = await self._long_term.get(principal, session,
                                                    key=summary_key(session.session_id))
            except MemoryNotFoundError:
                return result.removed
            await self._long_term.delete(principal, session, summary.id, hard=True)
        return result.removed

    # -- working tier -------------------------------------------------------------------

    async def working_state(self, principal: Principal, scope: Scope) -> WorkingState | None:
        port = self._port(self._working, "working")
        result = await self._run(
            port, Operation.READ_WORKING_STATE, principal,
            lambda: ReadWorkingStateRequest(scope=run_scope(principal, scope)))
        return result.state

    async def scratch(self, principal: Principal, scope: Scope) -> dict[str, Any]:
        """The run's state as a plain dict (empty when there is none)."""
        state = await self.working_state(principal, scope)
        return {} if state is None else dict(state.state)

    async def update(self, principal: Principal, scope: Scope, state: Mapping[str, Any], *,
                     ttl_seconds: float | None = None, replace: bool = False) -> WorkingState:
        port = self._port(self._working, "working")
        ttl = self.working_ttl_s if ttl_seconds is None else ttl_seconds
        return await self._run(
            port, Operation.UPDATE_WORKING_STATE, principal,
            lambda: UpdateWorkingStateRequest(scope=run_scope(principal, scope), changes=state,
                                              ttl_s=ttl, replace=replace))

    async def clear_working(self, principal: Principal, scope: Scope) -> bool:
        port = self._port(self._working, "working")
        result = await self._run(
            port, Operation.CLEAR_WORKING_STATE, principal,
            lambda: ClearWorkingStateRequest(scope=run_scope(principal, scope)))
        return result.removed > 0

    # -- long-term tier -----------------------------------------------------------------

    async def save(self, principal: Principal, scope: Scope, content: str, *,
                   level: ScopeLevel | str | None = None, **fields: Any) -> MemoryRecord:
        """Store a memory in exactly ``scope`` or, with ``level``, in the owner narrowed
        to that level. Recall reads level scopes only, so a memory meant to come back in
        later turns is saved at a level: ``level=ScopeLevel.USER`` for a preference
        (every project of the user), ``PROJECT`` for a project fact, ``SESSION`` for
        this conversation."""
        return await self.long_term.add(principal, level_scope(principal, scope, level),
                                        content, **fields)

    async def get(self, principal: Principal, scope: Scope, record_id: str, *,
                  level: ScopeLevel | str | None = None) -> MemoryRecord:
        return await self.long_term.get(principal, level_scope(principal, scope, level),
                                        record_id)

    async def search(self, principal: Principal, scope: Scope, query: str, *,
                     levels: Iterable[ScopeLevel] = (ScopeLevel.SESSION, ScopeLevel.USER),
                     limit: int | None = None,
                     memory_types: Iterable[MemoryType | str] | None = None) -> SearchResult:
        """Search the owner's memories at each level, each an exactly narrowed scope."""
        scopes = recall_scopes(owner_scope(principal, scope), tuple(levels))
        if not scopes:
            raise MemoryValidationError("the scope addresses none of the levels",
                                        field="levels")
        return await self.long_term.search(principal, [s for _, s in scopes], query,
                                           limit=limit, memory_types=memory_types)

    async def delete(self, principal: Principal, scope: Scope, record_id: str, *,
                     hard: bool = False, level: ScopeLevel | str | None = None) -> DeleteResult:
        return await self.long_term.delete(principal, level_scope(principal, scope, level),
                                           record_id, hard=hard)

    # -- combined -----------------------------------------------------------------------

    async def snapshot(self, principal: Principal, scope: Scope, *, query: str | None = None,
                       recent_limit: int | None = None) -> MemorySnapshot:
        """Recent turns, working state, memory blocks and (with a query) recalled
        memories of the configured tiers. Refuses an owner that is not the
        authenticated principal's."""
        owner = check_owner(principal, scope)
        turns: tuple[Turn, ...] = ()
        if self._turns is not None and owner.session_id is not None:
            turns = await self.recent(principal, owner, limit=recent_limit)
        state: Mapping[str, Any] = {}
        if self._working is not None and owner.run_id is not None:
            state = await self.scratch(principal, owner)
        memories: tuple[MemoryRecord, ...] = ()
        if query is not None and self._long_term is not None:
            recall = MemoryRecall(ContextPolicy(), self._long_term)
            recalled = await recall.recall(principal, owner, query)
            memories = tuple(r.record for r in recalled.memories)
        blocks = await self._blocks.read(principal, owner) if self._blocks is not None else ()
        return MemorySnapshot(turns, state, memories, blocks)

    # -- erasure ------------------------------------------------------------------------

    async def delete_user(self, principal: Principal, tenant_id: str,
                          user_id: str) -> UserErasure:
        """Erase one user from every configured tier that indexes users: the turns of
        all their sessions, every version of their memory blocks, and their long-term
        memories (with the receipt). Each is a governed maintenance operation
        (``memory:admin``)."""
        turns: int | None = None
        if self._turns is not None:
            cleared: Cleared = await self._run(
                self._turns, Operation.ERASE_USER_TURNS, principal,
                lambda: EraseUserTurnsRequest(tenant_id=tenant_id, user_id=user_id))
            turns = cleared.removed
        versions: int | None = None
        if self._blocks is not None:
            versions = (await self._blocks.erase_user(principal, tenant_id, user_id)).removed
        receipt = None
        if self._long_term is not None:
            receipt = await self._long_term.delete_user(principal, tenant_id, user_id)
        return UserErasure(turns, receipt, versions)

    # -- the per-turn context record ----------------------------------------------------

    async def record_context(self, principal: Principal, scopes: tuple[Scope, ...],
                             injected: tuple[InjectedVersion, ...],
                             degraded: tuple[str, ...],
                             window_turn_ids: tuple[str, ...] = ()) -> ContextRecord:
        """Emit the event that says which memory versions a prompt received."""
        return await self._run(
            self._ledger, Operation.RECORD_CONTEXT, principal,
            lambda: RecordContextRequest(scopes=scopes, injected=injected, degraded=degraded,
                                         window_turn_ids=window_turn_ids))


async def record_extraction(port: ActivityPort, principal: Principal,
                            scopes: tuple[Scope, ...], stored: tuple[InjectedVersion, ...],
                            degraded: tuple[str, ...]) -> ContextRecord:
    """Emit the event that says which memory versions an extraction stored and what it
    had to do without (``port`` is a governance port over a ``ContextLedger``)."""
    request = RecordExtractionRequest(scopes=scopes, injected=stored, degraded=degraded)
    return await port.execute(request, principal)
