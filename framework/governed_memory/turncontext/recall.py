"""``MemoryRecall``: the long-term memories worth spending prompt budget on.

Candidates come from the governed search of each level in the policy's
``recall_scopes``, each queried as the owner narrowed exactly to that level, so recall
can never read a project, user or session the caller does not own (and every read is
decided, traced and recorded). Relevance is the search score relative to the best
candidate's. When a level's search fails, recall falls back to listing that level and
keeping memories that contain a query term, with a flat relevance (recency and
importance then decide); when listing fails too, that level has no candidates. Recall
never raises into the turn.

Only memories valid at the moment asked about count: an invalidated (superseded)
memory stays readable for "as of" questions (``as_of=``) and is skipped otherwise. An
"as of" recall is the search's own ``as_of``: memories that had happened by then
(``event_time <= as_of``) and were valid then, with recency measured from that moment;
the listing fallback keeps the same rule.

What must never reach a prompt is decided by the profile, not by the turn: the
labels of its ``[context] exclude_sensitivity`` (and any a host adds here) are left out
by every search recall makes, in the datastore before the search's top-k, so the
candidates stay as many as asked for; the listing fallback drops them too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import attrs

from governed_memory.clock import Clock
from governed_memory.errors import REFUSALS, GovernedMemoryError, MemoryValidationError
from governed_memory.limits import clip_query
from governed_memory.manager import GovernedMemoryManager
from governed_memory.principal import Principal
from governed_memory.profiles.spec import MemoryProfileSpec
from governed_memory.read_filters import check_values, sensitivity_label
from governed_memory.records import MemoryRecord, MemoryType
from governed_memory.scope import Scope, ScopeLevel
from governed_memory.turncontext.degrade import Degradations
from governed_memory.turncontext.hashing import content_key
from governed_memory.turncontext.policy import ContextPolicy
from governed_memory.turncontext.ranking import (
    RECALL_MEMORY_TYPES,
    Scored,
    is_valid_at,
    ranked,
    score,
)
from governed_memory.turncontext.render import entry, render_block
from governed_memory.turncontext.scoping import recall_scopes
from governed_memory.turncontext.tokens import TokenCounter, approximate_tokens

FALLBACK_PAGES = 3
_TERM = re.compile(r"\w{3,}", re.UNICODE)


@attrs.frozen(slots=True)
class RecalledMemory:
    record: MemoryRecord
    level: ScopeLevel
    score: float
    relevance: float
    recency: float
    entity: float
    type_boost: float


@attrs.frozen(slots=True)
class RecallResult:
    memories: tuple[RecalledMemory, ...] = ()
    block: str = ""
    block_tokens: int = 0
    degraded: tuple[str, ...] = ()
    candidates: int = 0


def wanted_types(values: Iterable[MemoryType | str]) -> frozenset[MemoryType]:
    out: set[MemoryType] = set()
    for value in values:
        try:
            kind = MemoryType(value)
        except ValueError:
            continue
        if kind in RECALL_MEMORY_TYPES:
            out.add(kind)
    return frozenset(out)


def excluded_labels(memories: GovernedMemoryManager | None,
                    extra: Iterable[str] = ()) -> tuple[str, ...]:
    """The sensitivity labels a context build keeps out of the prompt: the profile's
    ``[context] exclude_sensitivity`` and ``extra``, each once, in that order."""
    spec: MemoryProfileSpec | None = getattr(memories, "profile_spec", None)
    profile = spec.context.exclude_sensitivity if spec is not None else ()
    if isinstance(extra, str):
        raise MemoryValidationError("exclude_sensitivity must be a list of labels, not a "
                                    "string", field="exclude_sensitivity")
    labels = tuple(dict.fromkeys((*profile, *extra)))
    check_values(labels, "exclude_sensitivity")  # refused here, never on every turn
    return labels


class MemoryRecall:
    def __init__(self, policy: ContextPolicy, memories: GovernedMemoryManager | None, *,
                 token_counter: TokenCounter = approximate_tokens,
                 clock: Clock | None = None,
                 exclude_sensitivity: Iterable[str] = ()) -> None:
        """``exclude_sensitivity`` adds labels to the profile's ``[context]
        exclude_sensitivity``; nothing here can take one of the profile's away."""
        self.policy = policy
        self.memories = memories
        self.count_tokens = token_counter
        self.clock = clock or (memories.clock if memories is not None else None)
        self.exclude_sensitivity = excluded_labels(memories, exclude_sensitivity)

    async def recall(self, principal: Principal, owner: Scope, query: str, *,
                     anchor_entity_ids: Iterable[str] = (),
                     wanted: Iterable[MemoryType | str] = (),
                     as_of: float | None = None,
                     budget_tokens: int | None = None) -> RecallResult:
        policy, memories = self.policy, self.memories
        if memories is None or policy.recall_top_k == 0 or not policy.enabled:
            return RecallResult()
        degraded = Degradations()
        assert self.clock is not None
        now = self.clock.now()
        moment = now if as_of is None else as_of
        query = clip_query(query)
        anchors = frozenset(anchor_entity_ids)
        types = wanted_types(wanted)
        fetched: list[tuple[ScopeLevel, MemoryRecord, float | None]] = []
        for level, scope in recall_scopes(owner, policy.recall_scopes):
            # A past moment is the search's own as-of: what had happened and was
            # valid then, superseded rows included.
            found = await self._candidates(principal, level, scope, query, degraded,
                                           as_of=as_of)
            fetched.extend((level, record, relevance) for record, relevance in found)
        best = max((r for _, _, r in fetched if r is not None and r > 0), default=0.0)
        live = [(level, record, rel) for level, record, rel in fetched
                if record.memory_type in RECALL_MEMORY_TYPES
                and is_valid_at(record, moment)
                and (as_of is None or record.event_time <= as_of)
                and self._allowed(record)]
        if as_of is None:
            # A replacement that is valid hides what it supersedes even if amending the
            # old row never happened (a crash between the two writes).
            replaced = {record.supersedes for _, record, _ in live if record.supersedes}
            live = [item for item in live if item[1].id not in replaced]
        scored = [score(record, level,
                        1.0 if rel is None or best == 0 else max(rel, 0.0) / best,
                        now=moment, half_life_hours=policy.recency_half_life_hours,
                        anchors=anchors, entity_weight=policy.entity_overlap_weight,
                        wanted=types, type_weight=policy.type_affinity_weight)
                  for level, record, rel in live]
        chosen = _dedupe(ranked(scored))[:policy.recall_top_k]
        budget = policy.block_budget_tokens if budget_tokens is None else budget_tokens
        kept, block, tokens = self._fit(chosen, budget)
        return RecallResult(tuple(_recalled(s) for s in kept), block, tokens,
                            degraded.as_tuple(), len(fetched))

    async def _candidates(self, principal: Principal, level: ScopeLevel, scope: Scope,
                          query: str, degraded: Degradations, *, as_of: float | None
                          ) -> list[tuple[MemoryRecord, float | None]]:
        assert self.memories is not None
        limit = min(100, max(20, self.policy.recall_top_k * 4))
        try:
            result = await self.memories.search(
                principal, scope, query, limit=limit, memory_types=RECALL_MEMORY_TYPES,
                as_of=as_of, exclude_sensitivity=self.exclude_sensitivity)
            return [(hit.record, hit.score) for hit in result.hits]
        except REFUSALS as exc:
            degraded.add(f"recall.refused.{level.value}", exc)
            return []
        except GovernedMemoryError as exc:
            degraded.add(f"recall.search_failed.{level.value}", exc)
        return await self._substring(principal, level, scope, query, degraded)

    async def _substring(self, principal: Principal, level: ScopeLevel, scope: Scope,
                         query: str, degraded: Degradations
                         ) -> list[tuple[MemoryRecord, float | None]]:
        assert self.memories is not None
        terms = {t.casefold() for t in _TERM.findall(query)}
        found: list[tuple[MemoryRecord, float | None]] = []
        cursor: str | None = None
        try:
            for _ in range(FALLBACK_PAGES):
                page = await self.memories.list(principal, scope, limit=100, cursor=cursor,
                                                memory_types=RECALL_MEMORY_TYPES)
                for record in page.items:
                    text = record.content.casefold()
                    if self._allowed(record) and (not terms
                                                  or any(term in text for term in terms)):
                        found.append((record, None))
                cursor = page.next_cursor
                if cursor is None:
                    break
        except GovernedMemoryError as exc:
            degraded.add(f"recall.repository_failed.{level.value}", exc)
            return []
        return found

    def _allowed(self, record: MemoryRecord) -> bool:
        """Not labelled with an excluded sensitivity: what a listing (which has no
        such filter) must be checked for, and what a search already guaranteed."""
        label = sensitivity_label(record.metadata)
        return label is None or label not in self.exclude_sensitivity

    def _fit(self, chosen: list[Scored], budget: int) -> tuple[list[Scored], str, int]:
        """The longest prefix of the ranking whose rendered block fits the budget."""
        entries: list[str] = []
        kept: list[Scored] = []
        block, tokens = "", 0
        for item in chosen:
            trial = render_block([*entries, entry(item.record, item.level.value)])
            trial_tokens = self.count_tokens(trial)
            if trial_tokens > budget:
                break
            entries.append(entry(item.record, item.level.value))
            kept.append(item)
            block, tokens = trial, trial_tokens
        return kept, block, tokens


def _dedupe(items: list[Scored]) -> list[Scored]:
    """One instance per content (the best-scoring one: ``items`` is ranked)."""
    seen: set[str] = set()
    out: list[Scored] = []
    for item in items:
        key = content_key(item.record.content)
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def _recalled(item: Scored) -> RecalledMemory:
    return RecalledMemory(item.record, item.level, item.score, item.relevance, item.recency,
                          item.entity, item.type_boost)


def recalled_entity_ids(memories: Iterable[RecalledMemory]) -> tuple[str, ...]:
    """The union of the recalled memories' entity ids, in recall order (the seed set
    for a graph-anchored follow-up search)."""
    out: dict[str, None] = {}
    for memory in memories:
        for entity in memory.record.entity_ids:
            out.setdefault(entity)
    return tuple(out)
