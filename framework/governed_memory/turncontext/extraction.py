"""``MemoryExtractor``: the durable facts a finished turn stated, stored add-only.

One model call proposes atomic facts (type, scope judgement, importance, entity
mentions, and a reference to a memory it contradicts). Each fact then passes, in order:

- the importance floor (``extraction_min_importance``) and a non-blank content;
- the scope rule (the reference's owner scoping): a personal preference or stable trait
  is a USER memory (tenant and user, no project: it is recalled in every project of
  that user), a decision or fact about the project a PROJECT memory (tenant and
  project), anything else a SESSION memory (tenant, user, session); never TENANT or
  GLOBAL. A level the owner cannot address (a project fact from an owner with no
  project), or one the principal may not write (a user and the shared project scope),
  degrades to the session, which only this user's conversation reads;
- the content-hash gate: the same normalized statement already valid in that scope is
  skipped, which makes a retried turn a no-op (and a preference restated in another
  project of the same user, being the same USER scope, stores nothing new);
- the similarity gate, when the provider searches by vector: a valid memory in the same
  scope at or above ``dedup_threshold`` is a restatement and is skipped;
- entity resolution (``EntityResolver``, confidence floor) or the mentions verbatim;
- the governed write itself, where every policy applies (the secret guard refuses or
  redacts a credential the model should not have proposed).

Nothing is overwritten or deleted. A fact that supersedes a memory (by the bracketed
content-hash reference the prompt showed next to it, resolved only against memories
the prompt listed, in the fact's own scope and still valid) is saved first with
``supersedes``; then the old row is amended with ``invalid_at`` and ``superseded_by``
(compare-and-set). It stays readable for "as of" questions.

Facts carry the time they were stated, not the time extraction ran: ``occurred_at`` and
``valid_from`` are the newest extracted turn's ``created_at``, and a superseded memory
becomes invalid at that moment. An extraction that runs later (a worker catching up)
still dates each fact by its conversation, so recency and as-of searches see when it
was said. If the amendment fails,
the new row's ``supersedes`` still hides the old one from recall.

Failure semantics: every model, search or repository failure is logged at WARNING and
``extract`` returns what was already saved; it never raises into the turn. A model call
that outlasts ``model_timeout_s`` is such a failure.

Surviving a crash. ``extract`` runs in the turn, so a crash or a failed model call loses
that turn's facts. ``enqueue`` queues the turns instead, as a durable job of the
provider's (``governed_memory.extraction_jobs``), idempotent per (owner, turns); a worker
(``governed_memory.turncontext.extraction_worker``) runs ``extract`` for it later, as
the same principal, and retries what a model or repository failure left undone
(``ExtractionResult.retryable``). Each fact's add carries an idempotency key derived
from its turns and its hash, so two runs of one job racing (a lease taken over from a
worker that was only slow) store a fact once.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from typing import Final

import attrs

from governed_memory.canonical import canonical_json
from governed_memory.errors import (
    REFUSALS,
    GovernedMemoryError,
    MemoryConfigurationError,
    MemoryScopeError,
    MemoryValidationError,
)
from governed_memory.extraction_jobs import MAX_JOB_TURNS, EnqueuedJob
from governed_memory.extraction_requests import enqueue_extraction
from governed_memory.language_models import LanguageModel
from governed_memory.limits import clip_query, is_real
from governed_memory.manager import GovernedMemoryManager
from governed_memory.policy import authorize_scope
from governed_memory.principal import Principal
from governed_memory.records import MemoryRecord, MemoryType, Provenance
from governed_memory.requests import AddRequest
from governed_memory.scope import Scope, ScopeLevel, narrow
from governed_memory.tiers.adapters import ContextLedger
from governed_memory.tiers.facade import record_extraction
from governed_memory.tiers.governance import Governance
from governed_memory.tiers.owners import owner_scope
from governed_memory.tiers.results import InjectedVersion
from governed_memory.tiers.turns import Role, Turn
from governed_memory.turncontext.degrade import Degradations, log
from governed_memory.turncontext.entities import EntityResolver, resolve
from governed_memory.turncontext.facts import ProposedFact, parse_facts
from governed_memory.turncontext.hashing import FACT_HASH_KEY, fact_hash, reference
from governed_memory.turncontext.policy import ContextPolicy
from governed_memory.turncontext.prompts import EXTRACT_SCHEMA, EXTRACT_SYSTEM, extract_user
from governed_memory.turncontext.ranking import RECALL_MEMORY_TYPES, is_valid_at
from governed_memory.turncontext.scoping import addressable, recall_scopes

EXTRACT_LEVELS = (ScopeLevel.SESSION, ScopeLevel.USER, ScopeLevel.PROJECT)
KNOWN_PER_LEVEL = 10
MIN_REFERENCE_CHARS = 6
MODEL_FAILED: Final = "extraction.model_failed"
REPOSITORY_FAILED: Final = "extraction.repository_failed"
RETRYABLE: Final = (MODEL_FAILED, REPOSITORY_FAILED)
"""Degradations a later attempt may mend: the model gave no usable answer, or a write
failed midway. A queued job with one of them is retried."""


@attrs.frozen(slots=True)
class Skipped:
    content_hash: str
    reason: str


@attrs.frozen(slots=True)
class ExtractionResult:
    stored: tuple[MemoryRecord, ...] = ()
    superseded: tuple[MemoryRecord, ...] = ()
    """Old rows amended with ``invalid_at`` / ``superseded_by`` (after the amendment)."""
    skipped: tuple[Skipped, ...] = ()
    degraded: tuple[str, ...] = ()

    @property
    def retryable(self) -> str | None:
        """The degradation that makes this run worth another attempt (the model failed
        or timed out, or a write failed midway), or ``None`` when it finished."""
        return next((d for d in self.degraded if d in RETRYABLE), None)


class MemoryExtractor:
    def __init__(self, memories: GovernedMemoryManager, model: LanguageModel | None, *,
                 policy: ContextPolicy | None = None,
                 entities: EntityResolver | None = None,
                 model_timeout_s: float | None = None) -> None:
        """``model_timeout_s`` bounds the extraction model call (``None``: the model's
        own timeout only); a call past it is ``extraction.model_failed``."""
        if model_timeout_s is not None and (not is_real(model_timeout_s)
                                            or not model_timeout_s > 0):
            raise MemoryConfigurationError("model_timeout_s must be a positive number")
        self.memories = memories
        self.model = model
        self.policy = policy or ContextPolicy()
        self.entities = entities
        self.model_timeout_s = model_timeout_s
        self._ledger = Governance.of(memories).port(ContextLedger())

    async def enqueue(self, principal: Principal, owner: Scope,
                      turns: Sequence[Turn]) -> EnqueuedJob:
        """Queue the extraction of ``turns`` (stored turns of the owner's session) as a
        durable job that a worker runs as ``principal``; the same turns queued again
        are the same job. A governed operation (``enqueue_extraction``,
        ``memory:write``); a provider without a queue refuses it with
        ``MemoryCapabilityUnsupportedError`` (call ``extract`` instead)."""
        owner = owner_scope(principal, owner)
        if owner.session_id is None:
            raise MemoryScopeError("extraction needs an owner with a session_id")
        session = narrow(owner, ScopeLevel.SESSION)
        if not turns or len(turns) > MAX_JOB_TURNS:
            raise MemoryValidationError(f"a job names 1 to {MAX_JOB_TURNS} turns",
                                        field="turns")
        if any(not isinstance(t, Turn) or t.scope_hash != session.scope_hash
               for t in turns):
            raise MemoryValidationError("every turn must be a stored turn of the owner's "
                                        "session", field="turns")
        ordered = sorted(turns, key=lambda t: t.seq)
        return await enqueue_extraction(self.memories, principal, owner,
                                        [t.turn_id for t in ordered], ordered[0].seq,
                                        ordered[-1].seq)

    async def extract(self, principal: Principal, owner: Scope,
                      turns: Sequence[Turn]) -> ExtractionResult:
        owner = owner_scope(principal, owner)
        if owner.session_id is None:
            raise MemoryScopeError("extraction needs an owner with a session_id")
        if not self.policy.enabled or self.model is None or not turns:
            return ExtractionResult()
        degraded = Degradations()
        now = self.memories.clock.now()
        known = await self._known(principal, owner, turns, now, degraded)
        try:
            async with asyncio.timeout(self.model_timeout_s):
                answer = await self.model.generate_structured(
                    system=EXTRACT_SYSTEM,
                    user=extract_user(turns, [(reference(r.content_hash), r.memory_type,
                                               r.content) for r in known]),
                    schema=EXTRACT_SCHEMA)
            facts = parse_facts(answer)
        except Exception as exc:
            degraded.add(MODEL_FAILED, exc)
            await self._record(principal, owner, (), (), degraded)
            return ExtractionResult(degraded=degraded.as_tuple())
        stored: list[MemoryRecord] = []
        superseded: list[MemoryRecord] = []
        skipped: list[Skipped] = []
        seen: set[str] = set()
        for fact in facts:
            try:
                outcome = await self._one(principal, owner, fact, turns, known, now, seen,
                                          degraded)
            except REFUSALS as exc:
                # A policy refused this fact (a secret, a disallowed type): skip it.
                log.warning("extraction: a fact was refused (%s)", type(exc).__name__)
                skipped.append(Skipped("", f"refused: {exc.code}"))
                continue
            except GovernedMemoryError as exc:
                degraded.add(REPOSITORY_FAILED, exc)
                break
            if isinstance(outcome, Skipped):
                skipped.append(outcome)
                continue
            record, old = outcome
            stored.append(record)
            if old is not None:
                amended = await self._supersede(principal, old, record, now, degraded)
                if amended is not None:
                    superseded.append(amended)
        await self._record(principal, owner, stored, superseded, degraded)
        return ExtractionResult(tuple(stored), tuple(superseded), tuple(skipped),
                                degraded.as_tuple())

    async def _record(self, principal: Principal, owner: Scope,
                      stored: Sequence[MemoryRecord], superseded: Sequence[MemoryRecord],
                      degraded: Degradations) -> None:
        """The extraction's event: the versions it wrote and each degradation."""
        session = narrow(owner, ScopeLevel.SESSION)
        scopes = {session.scope_hash: session}
        for record in (*stored, *superseded):
            scopes.setdefault(record.scope_hash, record.scope)
        versions = tuple(InjectedVersion(r.id, r.version, r.content_hash, r.scope_hash)
                         for r in (*stored, *superseded))
        try:
            await record_extraction(self._ledger, principal, tuple(scopes.values()),
                                    versions, degraded.as_tuple())
        except GovernedMemoryError as exc:
            degraded.add("extraction.record_failed", exc)

    async def _known(self, principal: Principal, owner: Scope, turns: Sequence[Turn],
                     now: float, degraded: Degradations) -> list[MemoryRecord]:
        """Memories the prompt lists (with references) so the model can supersede them."""
        text = " ".join(t.content for t in turns if t.role is Role.USER) or " ".join(
            t.content for t in turns)
        if not text.strip():
            return []
        query = clip_query(text)
        out: dict[str, MemoryRecord] = {}
        for level, scope in recall_scopes(owner, EXTRACT_LEVELS):
            try:
                result = await self.memories.search(principal, scope, query,
                                                    limit=KNOWN_PER_LEVEL,
                                                    memory_types=RECALL_MEMORY_TYPES)
            except GovernedMemoryError as exc:
                degraded.add(f"extraction.known_failed.{level.value}", exc)
                continue
            for record in result.records:
                if is_valid_at(record, now) and record.superseded_by is None:
                    out.setdefault(record.id, record)
        return list(out.values())

    async def _one(self, principal: Principal, owner: Scope, fact: ProposedFact,
                   turns: Sequence[Turn], known: list[MemoryRecord], now: float,
                   seen: set[str], degraded: Degradations
                   ) -> Skipped | tuple[MemoryRecord, MemoryRecord | None]:
        level = fact.level if addressable(owner, fact.level) else ScopeLevel.SESSION
        scope = narrow(owner, level)
        if level is not ScopeLevel.SESSION and authorize_scope(
                principal, AddRequest(scope=scope, content=fact.content)) is not None:
            # The caller may not write that level (a user and the shared project
            # scope): keep the fact where only this conversation reads it.
            level, scope = ScopeLevel.SESSION, narrow(owner, ScopeLevel.SESSION)
        digest = fact_hash(scope, fact.content)
        if fact.importance < self.policy.extraction_min_importance:
            return Skipped(digest, "below the importance floor")
        if digest in seen:
            return Skipped(digest, "duplicate in this turn")
        seen.add(digest)
        if await self._exists(principal, scope, fact.content, digest, now):
            return Skipped(digest, "already stored")
        if await self._restates(principal, scope, fact.content, now, degraded):
            return Skipped(digest, "restates a stored memory")
        old = _referenced(fact.replaces, scope, known)
        entity_ids = await resolve(self.entities, fact.mentions, tenant_id=owner.tenant_id,
                                   floor=self.policy.entity_confidence_floor,
                                   degraded=degraded)
        stated_at = stated_time(turns)
        turn_ids = [t.turn_id for t in turns]
        record = await self.memories.add(
            principal, scope, fact.content, memory_type=fact.memory_type,
            importance=fact.importance, entity_ids=entity_ids, valid_from=stated_at,
            occurred_at=stated_at,
            supersedes=old.id if old is not None else None,
            metadata={FACT_HASH_KEY: digest,
                      "source_turn_ids": turn_ids[-50:],
                      "source_session_id": owner.session_id},
            provenance=Provenance(source_type="conversation", source_id=turns[-1].turn_id,
                                  session_id=owner.session_id, run_id=owner.run_id,
                                  agent_id=owner.agent_id),
            idempotency_key=fact_write_key(turn_ids, digest))
        return record, old

    async def _exists(self, principal: Principal, scope: Scope, content: str, digest: str,
                      now: float) -> bool:
        result = await self.memories.search(principal, scope, clip_query(content), limit=5,
                                            metadata_filter={FACT_HASH_KEY: digest})
        return any(is_valid_at(r, now) for r in result.records)

    async def _restates(self, principal: Principal, scope: Scope, content: str, now: float,
                        degraded: Degradations) -> bool:
        """The index-similarity gate, on the provider's own vector score; skipped when
        the provider's hits carry no vector signal (lexical-only search)."""
        try:
            result = await self.memories.search(principal, scope, clip_query(content),
                                                limit=3, memory_types=RECALL_MEMORY_TYPES)
        except GovernedMemoryError as exc:
            if isinstance(exc, REFUSALS):
                raise
            degraded.add("extraction.similarity_failed", exc)
            return False
        for hit in result.hits:
            similarity = next((s.value for s in hit.explanation.signals
                               if s.name.startswith("vector")), None)
            if (similarity is not None and similarity >= self.policy.dedup_threshold
                    and is_valid_at(hit.record, now)):
                return True
        return False

    async def _supersede(self, principal: Principal, old: MemoryRecord, new: MemoryRecord,
                         now: float, degraded: Degradations) -> MemoryRecord | None:
        ends = new.event_time
        if old.valid_from is not None and old.valid_from >= ends:
            ends = now  # stated before the memory it replaces: it ends now, not earlier
        try:
            return await self.memories.update(principal, old.scope, old.id,
                                              expected_revision=old.revision,
                                              invalid_at=ends, superseded_by=new.id)
        except GovernedMemoryError as exc:
            degraded.add("extraction.supersede_failed", exc)
            return None


def fact_write_key(turn_ids: Sequence[str], digest: str) -> str:
    """The idempotency key of a fact's add: its turns and its hash (which names its
    scope), so two runs over the same turns storing the same fact store it once."""
    body = canonical_json({"turns": list(turn_ids), "fact": digest})
    return "xf1:" + hashlib.sha256(body.encode("utf-8")).hexdigest()


def stated_time(turns: Sequence[Turn]) -> float:
    """When the facts of ``turns`` were said: the newest turn's time."""
    return max(turn.created_at for turn in turns)


def _referenced(ref: str | None, scope: Scope,
                known: list[MemoryRecord]) -> MemoryRecord | None:
    """The listed memory a reference names, in the fact's scope; anything else (unknown,
    ambiguous, another scope, already superseded) is ignored."""
    if ref is None or len(ref) < MIN_REFERENCE_CHARS:
        return None
    matches = [r for r in known if reference(r.content_hash).startswith(ref)
               and r.scope_hash == scope.scope_hash and r.superseded_by is None
               and r.memory_type is not MemoryType.SUMMARY]
    return matches[0] if len(matches) == 1 else None
