"""``remember``: memories formed from a conversation, each decided against what the
scope already holds, the way mem0 does, and each write governed like any other.

``manager.remember(principal, scope, messages)`` reads a conversation (role and content
pairs, each with an optional turn id) a window of messages at a time. For each window:

1. one model call (``Task: remember``) proposes atomic facts, each with a type,
   importance, confidence and the messages it comes from;
2. each fact is looked up in the scope: the same normalized statement already stored
   there (its ``fact_hash``, or a close memory with the same words) is **unchanged**;
3. when some fact has stored memories close to it (the scope's own search), one more
   model call (``Task: reconcile``) says, per fact, whether it is new (**added**),
   refines one of them (**updated** in place: a new version, its history kept), or
   contradicts one (**superseded**: a new memory with ``supersedes``, the old one ended
   with ``invalid_at`` and ``superseded_by``, still readable as of before), or restates
   one (**unchanged**). The facts of one window are compared with what the scope held
   before it, and a memory one of them changed stands for what replaced it (a second
   contradiction of the same memory supersedes the first one's memory);
4. every write is its own governed operation through the manager's ``add`` and
   ``update``: the scope rule, every policy (a secret guard refusal is **refused**, a
   review policy's hold is **held for review**), a span and events.

Review. A fact's provenance ``source_type`` is the least trusted of its messages'
(``tool`` for a tool result, or what the message declares, such as ``web``), else
``inferred`` when the model's confidence is under the floor, else ``conversation``; a
profile listing that type in ``[write] review_source_types`` holds the new memory for a
reviewer. Only a fact of source type ``conversation`` changes a stored memory in place
(an update carries no provenance, so no policy could see another source): any other is
added, with ``supersedes`` naming the one it replaces, where review and every policy see
its source; held, it leaves the stored memory as it is. Before the model reads anything,
the scope is read once through the port, so a principal refused there sends nothing to
the model.

Idempotency. Every write's idempotency key is derived from the window's turn ids, the
fact's hash and what the write does, and a memory ``remember`` adds has a record ``key``
derived from the window's turn ids and the fact (``rm1:...``), and every memory it writes
carries a short mark of the (window, fact) pairs written into it or into the memories
it replaced (``metadata["remembered_from"]``, the newest 32), so a retried call (the
same messages) writes nothing twice: a fact the first call stored is found again by its
key, or by its mark on the memory that refined or superseded it since, and is
unchanged; a held one is replayed by its idempotency key; and a supersession the first
call left half done (the new memory written, the old one not yet ended) is finished.
Messages without a turn id get one from their position and text.

Provenance names the source turns (``source_id`` the last of them, every one in
``metadata["source_turn_ids"]``) and the model (``metadata["extracted_by"]``), never the
prompt. The model's answers are untrusted (:mod:`governed_memory.remember_prompts`).

A model failure raises (``LanguageModelError``, unavailable): what the windows before
it wrote stays written, and a retry writes it no second time. Without a model the call
is refused with ``MemoryConfigurationError`` naming the setting.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import attrs

from governed_memory.canonical import canonical_json
from governed_memory.clock import Clock
from governed_memory.errors import (
    REFUSALS,
    GovernedMemoryError,
    MemoryConfigurationError,
    MemoryValidationError,
)
from governed_memory.governed_calls import build_request
from governed_memory.language_models import JsonObject, LanguageModel, LanguageModelError
from governed_memory.limits import clip_query
from governed_memory.operations import Operation
from governed_memory.pipeline import ActivityPort
from governed_memory.principal import Principal
from governed_memory.profiles.spec import MemoryProfileSpec
from governed_memory.records import (
    MemoryRecord,
    MemoryType,
    Provenance,
    RecordStatus,
    SearchResult,
)
from governed_memory.remember_prompts import (
    RECONCILE_SCHEMA,
    RECONCILE_SYSTEM,
    REMEMBER_SCHEMA,
    REMEMBER_SYSTEM,
    Action,
    CandidateFact,
    Line,
    parse_actions,
    parse_candidates,
    reconcile_user,
    remember_user,
)
from governed_memory.remember_values import (
    CLOSE_PER_FACT,
    CONVERSATION,
    DEFAULT_CONFIDENCE_FLOOR,
    DEFAULT_WINDOW,
    INFERRED,
    MARKS_KEY,
    MAX_MARKS,
    MAX_MESSAGES,
    MAX_SOURCE_TURN_IDS,
    MAX_WINDOW,
    MODEL_SETTING,
    NO_MODEL,
    SCOPE_PROBE_KEY,
    Decision,
    MemoryDecision,
    Message,
    RememberResult,
    SourceTurn,
    model_identity,
    parse_messages,
)
from governed_memory.scope import Scope
from governed_memory.tiers.adapters import ContextLedger
from governed_memory.tiers.requests import RecordRememberRequest
from governed_memory.tiers.results import RememberedDecision
from governed_memory.turncontext.hashing import FACT_HASH_KEY, fact_hash, normalize
from governed_memory.turncontext.ranking import RECALL_MEMORY_TYPES

__all__ = [
    "CONVERSATION", "DEFAULT_CONFIDENCE_FLOOR", "DEFAULT_WINDOW", "INFERRED", "MAX_MESSAGES",
    "MAX_WINDOW", "MODEL_SETTING", "NO_MODEL", "Decision", "MemoryDecision", "Message",
    "RememberResult", "RememberingMemories", "SourceTurn", "model_identity", "parse_messages",
    "remember_messages",
]

class RememberingMemories(Protocol):
    """The manager operations ``remember`` uses (``MemoryOperations`` has them)."""

    activity: ActivityPort
    clock: Clock
    profile_spec: MemoryProfileSpec | None

    async def add(self, principal: Principal, scope: Scope, content: str, *,
                  memory_type: MemoryType | str = ..., key: str | None = ...,
                  metadata: Mapping[str, Any] | None = ...,
                  provenance: Provenance | Mapping[str, str] | None = ...,
                  importance: float = ..., supersedes: str | None = ...,
                  idempotency_key: str | None = ...) -> MemoryRecord: ...

    async def update(self, principal: Principal, scope: Scope, record_id: str, *,
                     expected_revision: str | None = ..., content: str | None = ...,
                     memory_type: MemoryType | str | None = ...,
                     metadata: Mapping[str, Any] | None = ...,
                     importance: float | None = ..., invalid_at: float | None = ...,
                     idempotency_key: str | None = ...,
                     superseded_by: str | None = ...) -> MemoryRecord: ...

    async def lookup(self, principal: Principal, scope: Scope, record_id: str | None = ...,
                     *, key: str | None = ...) -> MemoryRecord | None: ...

    async def search(self, principal: Principal, scopes: Scope | Sequence[Scope], query: str,
                     *, limit: int | None = ...,
                     memory_types: Iterable[MemoryType | str] | None = ...,
                     metadata_filter: Mapping[str, Any] | None = ...) -> SearchResult: ...


async def remember_messages(memories: RememberingMemories, principal: Principal, scope: Scope,
                            messages: Iterable[Message | Mapping[str, Any]], *,
                            model: LanguageModel | None, window: int = DEFAULT_WINDOW,
                            confidence_floor: float = DEFAULT_CONFIDENCE_FLOOR
                            ) -> RememberResult:
    """The work of ``manager.remember``. Without a model it is refused at once; input
    that does not hold (a message, the window, the floor) is an audited rejection of an
    ``add`` by ``principal``, before any model call."""
    if model is None:
        raise MemoryConfigurationError(NO_MODEL)
    turns = await build_request(memories.activity, Operation.ADD, principal,
                                lambda: _checked(scope, messages, window, confidence_floor))
    # The scope is read (governed: decided, evented) before any message goes to the
    # model, so a principal that may not touch it sends nothing to a third party.
    await memories.lookup(principal, scope, key=SCOPE_PROBE_KEY)
    run = _Run(memories, principal, scope, model, float(confidence_floor))
    for start in range(0, len(turns), window):
        await run.window(turns[start:start + window])
    # One event names every decision, those that wrote nothing included (each write
    # has its own events besides).
    ledger = memories.activity.beside(ContextLedger())
    await ledger.execute(RecordRememberRequest(scope=scope, decisions=tuple(
        RememberedDecision(d.decision.value, d.reason, d.record_id, d.version)
        for d in run.decisions)), principal)
    return RememberResult(decisions=tuple(run.decisions), model=run.identity,
                          model_calls=run.calls, windows=run.windows)


def _checked(scope: object, messages: Iterable[Message | Mapping[str, Any]], window: object,
             confidence_floor: object) -> tuple[SourceTurn, ...]:
    if not isinstance(scope, Scope):
        raise MemoryValidationError("scope must be a Scope", field="scope")
    if isinstance(window, bool) or not isinstance(window, int) or not 1 <= window <= MAX_WINDOW:
        raise MemoryValidationError(f"window must be an integer from 1 to {MAX_WINDOW}",
                                    field="window")
    if (isinstance(confidence_floor, bool) or not isinstance(confidence_floor, int | float)
            or not 0 <= confidence_floor <= 1):
        raise MemoryValidationError("confidence_floor must be a number from 0 to 1",
                                    field="confidence_floor")
    return parse_messages(messages)


@attrs.define(slots=True)
class _Pending:
    """A fact that is new to the scope as far as its exact statement goes."""

    fact: CandidateFact
    digest: str
    sources: tuple[SourceTurn, ...]
    close: tuple[MemoryRecord, ...]


class _Run:
    """One ``remember`` call: its windows, in order, and what each fact did."""

    def __init__(self, memories: RememberingMemories, principal: Principal, scope: Scope,
                 model: LanguageModel, confidence_floor: float) -> None:
        self.memories, self.principal, self.scope = memories, principal, scope
        self.model = model
        self.identity = model_identity(model)
        self.floor = confidence_floor
        self.decisions: list[MemoryDecision] = []
        self.seen: dict[str, str | None] = {}
        """Fact hashes decided in this call, with the record that holds each."""
        self.touched: dict[str, MemoryRecord] = {}
        """Records this call updated or ended, each with what now stands for it (its
        new version, or the memory that superseded it): a later fact the model relates
        to the stale copy is applied to that instead."""
        self.calls = 0
        self.windows = 0

    async def _ask(self, system: str, user: str, schema: Mapping[str, Any]) -> JsonObject:
        self.calls += 1
        try:
            return await self.model.generate_structured(system=system, user=user,
                                                        schema=schema)
        except GovernedMemoryError:
            raise
        except Exception as exc:
            # A model adapter's own failure: the type only, never the prompt or answer.
            raise LanguageModelError(f"the language model failed ({type(exc).__name__})"
                                     ) from None

    async def window(self, turns: Sequence[SourceTurn]) -> None:
        if not any(turn.content.strip() for turn in turns):
            return
        self.windows += 1
        answer = await self._ask(REMEMBER_SYSTEM,
                                 remember_user([Line(t.role.value, t.content) for t in turns]),
                                 REMEMBER_SCHEMA)
        window_ids = tuple(turn.turn_id for turn in turns)
        pending: list[_Pending] = []
        # In the facts' order: a decision, or the index of a pending fact.
        decided: list[MemoryDecision | int] = []
        for fact in parse_candidates(answer, len(turns)):
            sources = tuple(turns[i] for i in fact.turns) or tuple(turns)
            digest = fact_hash(self.scope, fact.content)
            found = await self._settled(fact, digest, sources, window_ids)
            if found is not None:
                decided.append(found)
            else:
                decided.append(len(pending))
                pending.append(_Pending(fact, digest, sources, await self._close(fact)))
        actions: dict[int, tuple[Action, int | None]] = {}
        listed: list[MemoryRecord] = []
        if any(p.close for p in pending):
            for item in pending:
                for record in item.close:
                    if all(r.id != record.id for r in listed):
                        listed.append(record)
            answer = await self._ask(
                RECONCILE_SYSTEM,
                reconcile_user([p.fact.content for p in pending],
                               [(r.memory_type, r.content) for r in listed]),
                RECONCILE_SCHEMA)
            actions = parse_actions(answer, len(pending), len(listed))
        applied: list[MemoryDecision] = []
        for index, item in enumerate(pending):
            action, ref = actions.get(index, (Action.ADD, None))
            target = listed[ref] if ref is not None else None
            if target is not None:
                target = self._current(target)
                if target is None:
                    action = Action.ADD  # what replaced it is held for review
            applied.append(await self._apply(item, action, target, window_ids))
        self.decisions.extend(d if isinstance(d, MemoryDecision) else applied[d]
                              for d in decided)

    # -- what the scope holds -----------------------------------------------------------

    async def _settled(self, fact: CandidateFact, digest: str, sources: tuple[SourceTurn, ...],
                       window_ids: tuple[str, ...]) -> MemoryDecision | None:
        """The decision for a fact (``digest``: its hash) the scope or this call already
        holds, else None."""
        if digest in self.seen:
            return self._decision(Decision.UNCHANGED, "stated again in this conversation",
                                  fact, sources, record_id=self.seen[digest])
        self.seen[digest] = None
        mine = await self.memories.lookup(self.principal, self.scope,
                                          key=_record_key(window_ids, digest))
        if mine is not None:
            # Written from these very messages before (a retry), whatever happened to
            # it since: superseded by a later message, say. Nothing to decide again.
            self.seen[digest] = mine.id
            return (await self._finish_supersession(mine, fact, sources, digest, window_ids)
                    or self._decision(Decision.UNCHANGED, "already remembered from these "
                                      "messages", fact, sources, record=mine))
        now = self.memories.clock.now()
        result = await self.memories.search(self.principal, self.scope,
                                            clip_query(fact.content), limit=CLOSE_PER_FACT,
                                            metadata_filter={FACT_HASH_KEY: digest})
        stored = next((r for r in result.records if r.is_valid_at(now)), None)
        if stored is None:
            return None
        self.seen[digest] = stored.id
        return (await self._finish_supersession(stored, fact, sources, digest, window_ids)
                or self._decision(Decision.UNCHANGED, "already stored", fact, sources,
                                  record=stored))

    async def _close(self, fact: CandidateFact) -> tuple[MemoryRecord, ...]:
        """Valid memories of the scope close to the fact (its own search), for the model
        to compare it with; one with the same words makes the fact unchanged."""
        now = self.memories.clock.now()
        result = await self.memories.search(self.principal, self.scope,
                                            clip_query(fact.content), limit=CLOSE_PER_FACT,
                                            memory_types=RECALL_MEMORY_TYPES)
        return tuple(r for r in result.records
                     if r.is_valid_at(now) and r.superseded_by is None)

    async def _finish_supersession(self, new: MemoryRecord, fact: CandidateFact,
                                   sources: tuple[SourceTurn, ...], digest: str,
                                   window_ids: tuple[str, ...]) -> MemoryDecision | None:
        """End the memory ``new`` supersedes when an earlier call stopped before it."""
        if new.supersedes is None:
            return None
        old = await self.memories.lookup(self.principal, self.scope, new.supersedes)
        if old is None or old.superseded_by is not None or old.id in self.touched:
            return None
        ended = await self._end(old, new, digest, window_ids)
        if isinstance(ended, GovernedMemoryError):
            return None
        return self._decision(Decision.SUPERSEDED, "finished superseding the memory an "
                              "earlier call replaced", fact, sources, record=new,
                              previous_id=old.id)

    # -- writing ------------------------------------------------------------------------

    async def _apply(self, item: _Pending, action: Action, target: MemoryRecord | None,
                     window_ids: tuple[str, ...]) -> MemoryDecision:
        fact, sources = item.fact, item.sources
        same = next((r for r in item.close
                     if normalize(r.content) == normalize(fact.content)), None)
        if same is not None:
            self.seen[item.digest] = same.id
            return self._decision(Decision.UNCHANGED, "a stored memory says the same", fact,
                                  sources, record=same)
        if action is Action.NONE and target is not None:
            return self._decision(Decision.UNCHANGED, "restates a stored memory", fact,
                                  sources, record=target)
        mark = _mark(window_ids, item.digest)
        earlier = next((r for r in item.close if mark in _marks(r)), None)
        if earlier is not None:
            # Written from these very messages before (a retry), into a memory that a
            # later message has refined or superseded since: the mark went with it.
            self.seen[item.digest] = earlier.id
            return self._decision(Decision.UNCHANGED, "already remembered from these "
                                  "messages, and changed since", fact, sources,
                                  record=earlier)
        source_type = self._source_type(fact, sources)
        metadata: dict[str, Any] = {
            FACT_HASH_KEY: item.digest,
            "source_turn_ids": [t.turn_id for t in sources][-MAX_SOURCE_TURN_IDS:],
            "extracted_by": self.identity, "confidence": fact.confidence}
        # An update carries no provenance, so no policy could see where the fact came
        # from: only what the conversation itself stated refines a memory in place; a
        # fact from a tool, the web or a guess supersedes it through an add, which the
        # profile's review (and any policy keyed on the source) does see.
        if action is Action.UPDATE and target is not None and source_type == CONVERSATION:
            metadata[MARKS_KEY] = [mark, *_marks(target)][:MAX_MARKS]
            return await self._update(item, target, metadata, window_ids)
        replaces = target if action in (Action.UPDATE, Action.SUPERSEDE) else None
        metadata[MARKS_KEY] = [mark, *(_marks(replaces) if replaces is not None else ())
                               ][:MAX_MARKS]
        try:
            record = await self.memories.add(
                self.principal, self.scope, fact.content, memory_type=fact.memory_type,
                key=_record_key(window_ids, item.digest), importance=fact.importance,
                metadata=metadata,
                supersedes=replaces.id if replaces is not None else None,
                provenance=Provenance(source_type=source_type, source_id=sources[-1].turn_id,
                                      session_id=self.scope.session_id,
                                      run_id=self.scope.run_id, agent_id=self.scope.agent_id),
                idempotency_key=_key(window_ids, item.digest, "add"))
        except REFUSALS as exc:
            return self._refused(exc, fact, sources)
        self.seen[item.digest] = record.id
        if record.status is RecordStatus.PENDING_REVIEW:
            why = (f"memories from source type {source_type} are reviewed before they are "
                   "visible")
            if replaces is not None:
                why += "; once approved it replaces a stored memory, which stays as it is"
            return self._decision(Decision.HELD, why, fact, sources, record=record,
                                  previous_id=replaces.id if replaces is not None else None)
        if replaces is None:
            return self._decision(Decision.ADDED, "new to this scope", fact, sources,
                                  record=record)
        ended = await self._end(replaces, record, item.digest, window_ids)
        why = "contradicts a stored memory, which ends now"
        if isinstance(ended, GovernedMemoryError):
            why = (f"contradicts a stored memory; ending it failed ({ended.code}), and the "
                   "new memory's supersedes link still names it")
        return self._decision(Decision.SUPERSEDED, why, fact, sources, record=record,
                              previous_id=replaces.id)

    async def _update(self, item: _Pending, target: MemoryRecord, metadata: dict[str, Any],
                      window_ids: tuple[str, ...]) -> MemoryDecision:
        fact, sources = item.fact, item.sources
        try:
            record = await self.memories.update(
                self.principal, self.scope, target.id, expected_revision=target.revision,
                content=fact.content, memory_type=fact.memory_type,
                importance=max(fact.importance, target.importance),
                metadata={**target.metadata, **metadata},
                idempotency_key=_key(window_ids, item.digest, "update", target.id))
        except REFUSALS as exc:
            return self._refused(exc, fact, sources)
        self.touched[target.id] = record
        self.seen[item.digest] = record.id
        return self._decision(Decision.UPDATED, "refines a stored memory (its earlier "
                              "versions are its history)", fact, sources, record=record,
                              previous_id=target.id)

    async def _end(self, old: MemoryRecord, new: MemoryRecord, digest: str,
                   window_ids: tuple[str, ...]) -> MemoryRecord | GovernedMemoryError:
        """Amend the superseded memory: invalid from now, pointing at its successor
        (compare-and-set). A refusal is returned: the new memory stands either way."""
        try:
            ended = await self.memories.update(
                self.principal, self.scope, old.id, expected_revision=old.revision,
                invalid_at=self.memories.clock.now(), superseded_by=new.id,
                idempotency_key=_key(window_ids, digest, "supersede", old.id))
        except REFUSALS as exc:
            return exc
        self.touched[old.id] = new
        return ended

    def _current(self, record: MemoryRecord) -> MemoryRecord | None:
        """What stands for ``record`` now, following this call's own changes (a fact of
        the same window superseded or updated it after the model saw it); ``None`` when
        that is a memory held for review."""
        seen: set[str] = set()
        while record.id in self.touched and record.id not in seen:
            seen.add(record.id)
            record = self.touched[record.id]
        return record if record.status is RecordStatus.ACTIVE else None

    # -- results --------------------------------------------------------------------------

    def _source_type(self, fact: CandidateFact, sources: Sequence[SourceTurn]) -> str:
        declared = next((t.source_type for t in sources if t.source_type != CONVERSATION),
                        None)
        if declared is not None:
            return declared
        return INFERRED if fact.confidence < self.floor else CONVERSATION

    def _refused(self, error: GovernedMemoryError, fact: CandidateFact,
                 sources: Sequence[SourceTurn]) -> MemoryDecision:
        return MemoryDecision(decision=Decision.REFUSED, reason=f"refused: {error.code}",
                              content=None, memory_type=fact.memory_type,
                              source_turn_ids=tuple(t.turn_id for t in sources),
                              error_code=error.code)

    def _decision(self, decision: Decision, reason: str, fact: CandidateFact,
                  sources: Sequence[SourceTurn], *, record: MemoryRecord | None = None,
                  record_id: str | None = None,
                  previous_id: str | None = None) -> MemoryDecision:
        return MemoryDecision(
            decision=decision, reason=reason, content=fact.content,
            memory_type=fact.memory_type, source_turn_ids=tuple(t.turn_id for t in sources),
            record_id=record.id if record is not None else record_id,
            version=record.version if record is not None else None, previous_id=previous_id)


def _record_key(window_ids: tuple[str, ...], digest: str) -> str:
    """The key of a memory ``remember`` adds: the fact and the window it came from, so
    a retry finds it by key even after a later message superseded it."""
    body = canonical_json({"turns": list(window_ids), "fact": digest})
    return "rm1:" + hashlib.sha256(body.encode("utf-8")).hexdigest()


def _mark(window_ids: tuple[str, ...], digest: str) -> str:
    """The short mark of a (messages, fact) pair a memory carries (``remembered_from``)."""
    return _record_key(window_ids, digest).removeprefix("rm1:")[:24]


def _marks(record: MemoryRecord) -> list[str]:
    found = record.metadata.get(MARKS_KEY)
    return [m for m in found if isinstance(m, str)] if isinstance(found, list | tuple) else []


def _key(window_ids: tuple[str, ...], digest: str, write: str, target: str = "") -> str:
    """A write's idempotency key: the window's turns, the fact, and what it writes."""
    body = canonical_json({"turns": list(window_ids), "fact": digest, "write": write,
                           "target": target})
    return "rmw1:" + hashlib.sha256(body.encode("utf-8")).hexdigest()


