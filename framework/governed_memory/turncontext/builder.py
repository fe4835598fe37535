"""``MemoryContextBuilder``: the per-turn context, in the reference's build order.

1. derive the session from the owner (tenant, user, session, not the project;
   ``user_id`` from the principal when the owner omits it);
2. load the last ``recent_max_messages`` turns, oldest first;
3. when disabled, return that window (token-trimmed) with the question unchanged;
4. load the session's rolling summary and its coverage frontier; turns it covers are
   not replayed;
5. refresh the summary when the window's tokens pass the trigger and both a model and
   the long-term tier are configured: unread history older than the window first, in
   at most ``summary_catchup_pages`` pages per turn, then the window's turns older
   than the last ``summary_keep_messages`` (walked back to a user turn);
6. token-trim the window, never opening on a tool result cut from its call;
7. condense summary, window and question into a standalone query, with the memory
   types it wants (one model call);
8. recall long-term memories for that query within the block budget;

and finally read the memory blocks the profile declares (every turn, whatever the
policy: they are the agent's own memory), divide the policy's total budget, if it
sets one, among blocks, window, summary and recalled memories in that order (``budget``:
what does not fit is cut from the end of that order, and each cut is recorded and
named in ``degraded`` as ``budget.cut.<part>``), and record which memory and block
versions the prompt received (an event through the activity port). The question
being answered must not be appended yet: the window is the history before this turn.

Nothing after step 1 fails the turn: a model, search or repository failure is logged
at WARNING, named in ``degraded`` and in the context event, and the turn continues
with what is left.
"""

from __future__ import annotations

from collections.abc import Iterable

from governed_memory.errors import (
    GovernedMemoryError,
    MemoryConfigurationError,
    MemoryScopeError,
)
from governed_memory.language_models import LanguageModel
from governed_memory.principal import Principal
from governed_memory.profiles.retrieval import context_budget_problems
from governed_memory.records import MemoryRecord, MemoryType, content_hash
from governed_memory.scope import Scope, ScopeLevel, narrow
from governed_memory.tiers.blocks import Block
from governed_memory.tiers.facade import MemoryTiers
from governed_memory.tiers.owners import owner_scope
from governed_memory.tiers.results import InjectedVersion
from governed_memory.tiers.turns import Turn
from governed_memory.turncontext.budget import divide
from governed_memory.turncontext.condenser import Condensed, condense
from governed_memory.turncontext.degrade import Degradations
from governed_memory.turncontext.policy import ContextPolicy
from governed_memory.turncontext.recall import MemoryRecall, RecallResult
from governed_memory.turncontext.result import MemoryContext
from governed_memory.turncontext.summarizer import fold, frontier, load_summary
from governed_memory.turncontext.tokens import (
    TokenCounter,
    approximate_tokens,
    window_tokens,
)
from governed_memory.turncontext.trimming import keep_boundary, trim


class MemoryContextBuilder:
    def __init__(self, tiers: MemoryTiers, *, policy: ContextPolicy | None = None,
                 model: LanguageModel | None = None,
                 token_counter: TokenCounter = approximate_tokens) -> None:
        self.tiers = tiers
        if policy is None:
            # The profile's [context] budgets, when the memories come from a profile.
            long_term = tiers.long_term_or_none
            spec = getattr(long_term, "profile_spec", None) if long_term is not None else None
            policy = (ContextPolicy.from_profile(spec.context) if spec is not None
                      else ContextPolicy())
        self.policy = policy
        self._check_blocks_fit(tiers, policy)
        self.model = model
        self.count_tokens = token_counter
        self.recall = MemoryRecall(self.policy, tiers.long_term_or_none,
                                   token_counter=token_counter,
                                   clock=tiers.governance.clock)

    async def build(self, principal: Principal, owner: Scope, question: str, *,
                    anchor_entity_ids: Iterable[str] = ()) -> MemoryContext:
        # Step 1: identity. The only failures that reach the caller are here.
        if not isinstance(principal, Principal):
            raise MemoryScopeError("build needs the authenticated principal")
        owner = owner_scope(principal, owner)
        if owner.session_id is None:
            raise MemoryScopeError("build needs an owner with a session_id")
        if owner.tenant_id != principal.tenant_id or (
                principal.user_id is not None and owner.user_id != principal.user_id):
            raise MemoryScopeError("the owner is not the authenticated principal's")
        session = narrow(owner, ScopeLevel.SESSION)
        anchors = tuple(dict.fromkeys(anchor_entity_ids))
        policy, degraded = self.policy, Degradations()

        # Step 2: the recent history.
        loaded = await self._recent(principal, session, degraded)

        # Step 3: disabled means a plain window and no model.
        if not policy.enabled:
            window, over = trim(loaded, policy.recent_max_tokens, self.count_tokens)
            if over:
                degraded.add("window.over_budget")
            return await self._finish(principal, owner, session, question, window, None,
                                      Condensed(question), RecallResult(), anchors, degraded)

        # Step 4: the rolling summary and what it covers.
        summary = await self._summary(principal, session, degraded)
        covered = frontier(summary)
        visible = tuple(t for t in loaded if t.seq > covered)

        # Step 5: refresh when the window is getting full.
        if (window_tokens(visible, self.count_tokens) > policy.summary_trigger_tokens
                and self.model is not None and self.tiers.has_long_term):
            summary = await self._refresh(principal, session, summary, loaded, degraded)
            covered = frontier(summary)
            visible = tuple(t for t in loaded if t.seq > covered)

        # Step 6: trim.
        window, over = trim(visible, policy.recent_max_tokens, self.count_tokens)
        if over:
            degraded.add("window.over_budget")

        # Step 7: the standalone query and the wanted types.
        condensed = Condensed(question)
        history = bool(window) or summary is not None
        if policy.query_rewrite and self.model is not None and history:
            condensed = await condense(self.model, summary.content if summary else None,
                                       window, question, degraded)

        # Step 8: recall.
        recalled = await self.recall.recall(principal, owner, condensed.query,
                                            anchor_entity_ids=anchors,
                                            wanted=condensed.wanted_types)
        degraded.extend(recalled.degraded)
        return await self._finish(principal, owner, session, question, window, summary,
                                  condensed, recalled, anchors, degraded)

    @staticmethod
    def _check_blocks_fit(tiers: MemoryTiers, policy: ContextPolicy) -> None:
        """A total the declared blocks cannot fit is refused at wiring time, as a
        profile with one is at load: the blocks would be cut on every turn."""
        if policy.total_budget_tokens is None or not tiers.has_blocks:
            return
        problems = context_budget_problems(
            policy.total_budget_tokens,
            {name: spec.limit for name, spec in tiers.blocks.specs.items()},
            path="total_budget_tokens")
        if problems:
            raise MemoryConfigurationError(str(problems[0]))

    async def _recent(self, principal: Principal, session: Scope,
                      degraded: Degradations) -> tuple[Turn, ...]:
        if not self.tiers.has_turns:
            return ()
        try:
            return await self.tiers.recent(principal, session,
                                           limit=self.policy.recent_max_messages)
        except GovernedMemoryError as exc:
            degraded.add("history.unavailable", exc)
            return ()

    async def _summary(self, principal: Principal, session: Scope,
                       degraded: Degradations) -> MemoryRecord | None:
        if not self.tiers.has_long_term:
            return None
        try:
            return await load_summary(self.tiers.long_term, principal, session,
                                      self.tiers.governance.clock.now())
        except GovernedMemoryError as exc:
            degraded.add("summary.load_failed", exc)
            return None

    async def _refresh(self, principal: Principal, session: Scope,
                       summary: MemoryRecord | None, loaded: tuple[Turn, ...],
                       degraded: Degradations) -> MemoryRecord | None:
        assert self.model is not None
        memories, policy = self.tiers.long_term, self.policy
        try:
            # Unread history older than the loaded window, a bounded number of pages.
            first_loaded = loaded[0].seq if loaded else 0
            cursor = frontier(summary)
            pending = cursor < first_loaded - 1
            pages = 0
            while pending and pages < policy.summary_catchup_pages:
                raw = await self.tiers.turns_after(principal, session, cursor,
                                                   limit=policy.summary_page_size)
                page = tuple(t for t in raw if t.seq < first_loaded)
                if not page:
                    pending = False  # nothing unread before the window (a cleared gap)
                    break
                if page[-1].seq <= cursor:
                    break  # a non-advancing cursor stops catch-up safely
                summary = await fold(memories, self.model, principal, session, summary, page)
                cursor = frontier(summary)
                pages += 1
                # Reached the window, or the end of what is stored before it.
                pending = not (len(page) < len(raw) or len(raw) < policy.summary_page_size
                               or cursor >= first_loaded - 1)
            if pending:
                degraded.add("summary.catching_up")
                return summary  # the backlog resumes from the saved frontier next turn
            visible = tuple(t for t in loaded if t.seq > cursor)
            older = visible[:keep_boundary(visible, policy.summary_keep_messages)]
            if older:
                summary = await fold(memories, self.model, principal, session, summary, older)
        except Exception as exc:
            degraded.add("summary.refresh_failed", exc)
            # What was folded and saved before the failure stands; re-read it.
            return await self._summary(principal, session, degraded)
        return summary

    async def _blocks(self, principal: Principal, owner: Scope,
                      degraded: Degradations) -> tuple[Block, ...]:
        if not self.tiers.has_blocks:
            return ()
        try:
            return await self.tiers.blocks.read(principal, owner)
        except GovernedMemoryError as exc:
            degraded.add("blocks.unavailable", exc)
            return ()

    async def _finish(self, principal: Principal, owner: Scope, session: Scope,
                      question: str,
                      window: tuple[Turn, ...], summary: MemoryRecord | None,
                      condensed: Condensed,
                      recalled: RecallResult, anchors: tuple[str, ...],
                      degraded: Degradations) -> MemoryContext:
        blocks = await self._blocks(principal, owner, degraded)
        total = self.policy.total_budget_tokens
        parts = divide(total, self.count_tokens, blocks=blocks, window=window,
                       summary=summary.content if summary else None, recalled=recalled)
        # Named like the failures, but not logged as one: a total that cuts is doing
        # what it was set for, and the context and its event say what it cut.
        degraded.extend(tuple(f"budget.cut.{cut.part}" for cut in parts.cuts))
        injected = tuple(InjectedVersion(m.record.id, m.record.version,
                                         m.record.content_hash, m.record.scope_hash)
                         for m in parts.recalled)
        scopes = {session.scope_hash: session}
        for block in blocks if parts.blocks_text else ():
            if block.version > 0:  # version 0 is the profile's text, stored nowhere
                scopes.setdefault(block.scope_hash,
                                  self.tiers.blocks.scope_of(principal, owner, block.name))
                injected += (InjectedVersion(f"block:{block.name}", block.version,
                                             content_hash(block.value), block.scope_hash),)
        for m in parts.recalled:
            scopes.setdefault(m.record.scope_hash, m.record.scope)
        if summary is not None and parts.summary:
            injected = (InjectedVersion(summary.id, summary.version, summary.content_hash,
                                        summary.scope_hash), *injected)
        snapshot = degraded.as_tuple()
        try:
            await self.tiers.record_context(principal, tuple(scopes.values()), injected,
                                            snapshot, tuple(t.turn_id for t in parts.window))
        except GovernedMemoryError as exc:
            degraded.add("context.record_failed", exc)
        wanted: tuple[MemoryType, ...] = condensed.wanted_types
        return MemoryContext(
            question=question, messages=parts.window, summary=parts.summary,
            standalone_query=condensed.query, rewritten=condensed.rewritten,
            wanted_types=wanted, recalled=parts.recalled,
            memory_block=parts.memory_block, anchor_entity_ids=anchors,
            degraded=degraded.as_tuple(),
            window_tokens=window_tokens(parts.window, self.count_tokens),
            block_tokens=parts.block_tokens,
            summary_version=summary.version if summary and parts.summary else None,
            blocks=blocks, blocks_text=parts.blocks_text,
            blocks_tokens=self.count_tokens(parts.blocks_text) if parts.blocks_text else 0,
            summary_tokens=parts.summary_tokens, total_tokens=parts.total_tokens,
            total_budget_tokens=total, cuts=parts.cuts)
