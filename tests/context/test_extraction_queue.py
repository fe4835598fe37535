"""Extraction that survives a crash: a turn's extraction queued as a durable job,
leased, retried with backoff, dead-lettered and requeued, idempotent per turn, each
step governed (native memory backend, manual clock; the SQLite and PostgreSQL queue
across processes is tests/native/test_native_extraction_queue.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from context_support import ALICE, BOB, OWNER, USER_SCOPE
from governed_memory import GovernedMemoryManager, Principal, PrincipalKind, Scope
from governed_memory.clock import ManualClock
from governed_memory.errors import (
    MemoryConfigurationError,
    MemoryScopeError,
    MemoryValidationError,
)
from governed_memory.events import InMemoryEventSink
from governed_memory.extraction_jobs import ExtractionJobState, Settlement, SettleOutcome
from governed_memory.extraction_requests import (
    extraction_status,
    lease_extraction_jobs,
    retry_extraction_jobs,
    settle_extraction_jobs,
)
from governed_memory.language_models import JsonObject, LanguageModelError
from governed_memory.principal import Permission
from governed_memory.tiers import InMemoryTurnStore, MemoryTiers, Turn, TurnDraft
from governed_memory.turncontext import ContextPolicy, MemoryExtractor
from governed_memory.turncontext.extraction_worker import ExtractionWorker

OPERATOR = Principal("ops:worker", PrincipalKind.SERVICE, "operator",
                     permissions=[Permission.ADMIN])
TEA = {"facts": [{"content": "Alice prefers green tea", "type": "preference",
                  "scope": "user", "importance": 0.8}]}


class Planned:
    """A model that answers extraction from a plan, one step per call (the last step
    repeats): an answer, ``"hang"`` (never returns: a model that timed out), or
    ``"fail"`` (raises)."""

    name = "planned"

    def __init__(self, *plan: Any) -> None:
        self.plan = list(plan)
        self.calls = 0

    async def generate_text(self, *, system: str, user: str) -> str:
        raise LanguageModelError("text is not planned")

    async def generate_structured(self, *, system: str, user: str,
                                  schema: JsonObject) -> JsonObject:
        self.calls += 1
        step = self.plan.pop(0) if len(self.plan) > 1 else self.plan[0]
        if step == "hang":
            await asyncio.Event().wait()
        if step == "fail":
            raise LanguageModelError("the model is down")
        assert isinstance(step, dict)
        return step


async def said(tiers: MemoryTiers, *texts: str, who: Principal = ALICE,
               owner: Scope = OWNER) -> tuple[Turn, ...]:
    turns = []
    for i, text in enumerate(texts):
        draft = TurnDraft.user(text) if i % 2 == 0 else TurnDraft.assistant(text)
        turns.append(await tiers.append(who, owner, draft))
    return tuple(turns)


def worker(tiers: MemoryTiers, manager: GovernedMemoryManager, model: Any,
           **options: Any) -> ExtractionWorker:
    extractor = MemoryExtractor(manager, model, model_timeout_s=0.05)
    return ExtractionWorker(tiers, extractor, backoff_s=10.0, **options)


async def stored(manager: GovernedMemoryManager) -> list[str]:
    page = await manager.list(ALICE, USER_SCOPE)
    return [r.content for r in page.items]


async def test_a_queued_turn_is_extracted_by_a_worker_as_its_principal(
        tiers: MemoryTiers, manager: GovernedMemoryManager,
        sink: InMemoryEventSink) -> None:
    model = Planned(TEA)
    turns = await said(tiers, "I prefer green tea.", "Noted!")
    job = await MemoryExtractor(manager, model).enqueue(ALICE, OWNER, turns)
    assert job.created and job.state is ExtractionJobState.PENDING
    assert model.calls == 0 and await stored(manager) == []  # nothing ran in the turn

    report = await worker(tiers, manager, model).round(OPERATOR, worker_id="w1")
    assert (report.leased, report.done, report.facts_stored) == (1, 1, 1)
    assert await stored(manager) == ["Alice prefers green tea"]
    # The fact is Alice's own governed write; the queue's steps are the operator's.
    added = [e for e in sink.events if e.operation == "add"
             and e.type == "memory.write.committed"]
    assert [e.principal_id for e in added] == ["user:alice"]
    steps = [(e.type, e.operation, e.principal_id) for e in sink.events
             if e.type.startswith("memory.index.") and e.type.endswith(".completed")]
    assert steps == [("memory.index.completed", "enqueue_extraction", "user:alice"),
                     ("memory.index.completed", "lease_extraction_jobs", "ops:worker"),
                     ("memory.index.completed", "settle_extraction_jobs", "ops:worker")]
    assert all("green tea" not in e.to_json() for e in sink.events)
    status = (await extraction_status(manager, OPERATOR)).status
    assert (status.pending, status.leased, status.done, status.dead) == (0, 0, 1, 0)


async def test_the_same_turns_queued_twice_are_one_job_and_their_facts_are_stored_once(
        tiers: MemoryTiers, manager: GovernedMemoryManager) -> None:
    model = Planned(TEA)
    turns = await said(tiers, "I prefer green tea.", "Noted!")
    extractor = MemoryExtractor(manager, model)
    first = await extractor.enqueue(ALICE, OWNER, turns)
    again = await extractor.enqueue(ALICE, OWNER, tuple(reversed(turns)))
    assert again.job_id == first.job_id and not again.created
    run = worker(tiers, manager, model)
    assert (await run.round(OPERATOR, worker_id="w1")).done == 1
    late = await extractor.enqueue(ALICE, OWNER, turns)  # after it ran: still that job
    assert (late.job_id, late.created, late.state) == (first.job_id, False,
                                                       ExtractionJobState.DONE)
    assert (await run.round(OPERATOR, worker_id="w1")).leased == 0
    assert model.calls == 1 and await stored(manager) == ["Alice prefers green tea"]


async def test_a_worker_that_dies_holding_a_lease_is_taken_over_after_it_expires(
        tiers: MemoryTiers, manager: GovernedMemoryManager, clock: ManualClock) -> None:
    model = Planned(TEA)
    turns = await said(tiers, "I prefer green tea.", "Noted!")
    await MemoryExtractor(manager, model).enqueue(ALICE, OWNER, turns)
    # A worker leases the job and dies: it never runs it, never settles it.
    [doomed] = await lease_extraction_jobs(manager, OPERATOR, worker_id="doomed",
                                           lease_s=60)
    assert (doomed.lease_owner, doomed.attempts) == ("doomed", 1)
    rescuer = worker(tiers, manager, model)
    assert (await rescuer.round(OPERATOR, worker_id="rescuer")).leased == 0  # still held
    clock.advance(61)
    report = await rescuer.round(OPERATOR, worker_id="rescuer")
    assert (report.leased, report.done, report.lost_leases) == (1, 1, 0)
    assert await stored(manager) == ["Alice prefers green tea"]
    status = (await extraction_status(manager, OPERATOR)).status
    assert (status.leased, status.done) == (0, 1)


async def test_a_late_settlement_of_a_lost_lease_changes_nothing(
        tiers: MemoryTiers, manager: GovernedMemoryManager, clock: ManualClock) -> None:
    """A slow worker whose lease was taken over: both runs store the fact once, and only
    the current lease holder's settlement counts."""
    model = Planned(TEA)
    turns = await said(tiers, "I prefer green tea.", "Noted!")
    extractor = MemoryExtractor(manager, model)
    await extractor.enqueue(ALICE, OWNER, turns)
    [slow] = await lease_extraction_jobs(manager, OPERATOR, worker_id="slow", lease_s=10)
    clock.advance(11)
    assert (await worker(tiers, manager, model).round(OPERATOR, worker_id="fast")).done == 1
    # The slow worker finishes its run after all, and settles.
    again = await extractor.extract(slow.principal, slow.owner, turns)
    assert again.stored == () and [s.reason for s in again.skipped] == ["already stored"]
    settled = await settle_extraction_jobs(manager, OPERATOR, worker_id="slow", settlements=(
        Settlement(job_id=slow.job_id, lease_owner="slow", attempts=slow.attempts,
                   outcome=SettleOutcome.DONE),))
    assert (settled.done, settled.lost_leases) == (0, 1)
    assert await stored(manager) == ["Alice prefers green tea"]


async def test_a_model_timeout_is_retried_with_backoff_and_then_succeeds(
        tiers: MemoryTiers, manager: GovernedMemoryManager, clock: ManualClock,
        sink: InMemoryEventSink) -> None:
    model = Planned("hang", TEA)
    turns = await said(tiers, "I prefer green tea.", "Noted!")
    await MemoryExtractor(manager, model).enqueue(ALICE, OWNER, turns)
    run = worker(tiers, manager, model)
    first = await run.round(OPERATOR, worker_id="w1")
    assert (first.leased, first.retried, first.done) == (1, 1, 0)
    assert await stored(manager) == []
    report = await extraction_status(manager, OPERATOR)
    assert (report.status.pending, report.status.leased) == (1, 0)
    # Not due before its backoff (10 s for a first failure) has passed.
    clock.advance(9)
    assert (await run.round(OPERATOR, worker_id="w1")).leased == 0
    clock.advance(1)
    second = await run.round(OPERATOR, worker_id="w1")
    assert (second.leased, second.done, second.facts_stored) == (1, 1, 1)
    assert await stored(manager) == ["Alice prefers green tea"]
    settle = [e for e in sink.events if e.operation == "settle_extraction_jobs"
              and e.type == "memory.index.completed"]
    assert [e.reasons for e in settle] == [("retried 1",), ("done 1",)]


async def test_a_permanent_failure_is_a_dead_letter_until_an_operator_requeues_it(
        tiers: MemoryTiers, manager: GovernedMemoryManager, clock: ManualClock) -> None:
    model = Planned("fail")
    turns = await said(tiers, "I prefer green tea.", "Noted!")
    job = await MemoryExtractor(manager, model).enqueue(ALICE, OWNER, turns)
    run = worker(tiers, manager, model, max_attempts=3)
    outcomes = []
    for _ in range(3):
        outcomes.append(await run.round(OPERATOR, worker_id="w1"))
        clock.advance(3600)
    assert [(r.retried, r.dead) for r in outcomes] == [(1, 0), (1, 0), (0, 1)]
    report = await extraction_status(manager, OPERATOR)
    assert report.status.dead == 1
    [dead] = report.dead
    assert (dead.job_id, dead.attempts, dead.last_error_code) == (job.job_id, 3,
                                                                   "model_failed")
    assert dead.principal.principal_id == "user:alice"
    assert (await run.round(OPERATOR, worker_id="w1")).leased == 0  # dead stays dead

    model.plan = [TEA]  # the model is back
    assert await retry_extraction_jobs(manager, OPERATOR) == 1
    report_after = await run.round(OPERATOR, worker_id="w1")
    assert (report_after.done, report_after.facts_stored) == (1, 1)
    assert await stored(manager) == ["Alice prefers green tea"]


async def test_a_job_whose_workers_keep_dying_is_dead_without_running_again(
        tiers: MemoryTiers, manager: GovernedMemoryManager, clock: ManualClock) -> None:
    model = Planned(TEA)
    turns = await said(tiers, "I prefer green tea.", "Noted!")
    await MemoryExtractor(manager, model).enqueue(ALICE, OWNER, turns)
    for n in range(2):
        await lease_extraction_jobs(manager, OPERATOR, worker_id=f"doomed{n}", lease_s=1)
        clock.advance(2)
    report = await worker(tiers, manager, model, max_attempts=2).round(
        OPERATOR, worker_id="w")
    assert (report.leased, report.dead) == (1, 1) and model.calls == 0
    [dead] = (await extraction_status(manager, OPERATOR)).dead
    assert dead.last_error_code == "attempts_exhausted"


async def test_turns_erased_before_the_job_ran_leave_nothing_to_extract(
        tiers: MemoryTiers, manager: GovernedMemoryManager) -> None:
    model = Planned(TEA)
    turns = await said(tiers, "I prefer green tea.", "Noted!")
    await MemoryExtractor(manager, model).enqueue(ALICE, OWNER, turns)
    alice_deleting = Principal("user:alice", PrincipalKind.USER, "acme", "alice",
                               permissions=[Permission.READ, Permission.DELETE])
    await tiers.clear(alice_deleting, OWNER)
    report = await worker(tiers, manager, model).round(OPERATOR, worker_id="w1")
    assert (report.done, report.facts_stored) == (1, 0) and model.calls == 0


async def test_an_erasure_of_the_user_removes_their_queued_jobs(
        tiers: MemoryTiers, manager: GovernedMemoryManager) -> None:
    admin = Principal("svc:admin", PrincipalKind.SERVICE, "acme",
                      permissions=[Permission.ADMIN])
    extractor = MemoryExtractor(manager, Planned(TEA))
    await extractor.enqueue(ALICE, OWNER, await said(tiers, "I prefer tea.", "Ok"))
    bob_owner = OWNER.replace(user_id="bob")
    await extractor.enqueue(BOB, bob_owner, await said(tiers, "Hi", "Hello", who=BOB,
                                                       owner=bob_owner))
    await manager.delete_user(admin, "acme", "alice")
    [left] = await lease_extraction_jobs(manager, OPERATOR, worker_id="w")
    assert left.owner.user_id == "bob"


async def test_the_queue_is_governed(tiers: MemoryTiers, manager: GovernedMemoryManager,
                                     sink: InMemoryEventSink) -> None:
    turns = await said(tiers, "I prefer green tea.", "Noted!")
    extractor = MemoryExtractor(manager, Planned(TEA))
    # Only the owner's principal may queue its turns, with memory:write.
    with pytest.raises(MemoryScopeError):
        await extractor.enqueue(BOB, OWNER, turns)
    reader = Principal("user:alice", PrincipalKind.USER, "acme", "alice",
                       permissions=[Permission.READ])
    with pytest.raises(MemoryScopeError, match="memory:write"):
        await extractor.enqueue(reader, OWNER, turns)
    with pytest.raises(MemoryValidationError) as bad:
        await extractor.enqueue(ALICE, OWNER.replace(session_id="s9"), turns)
    assert bad.value.field == "turns"
    # Store-wide steps are an operator's: never a user's, never an admin bound to one.
    for who in (ALICE, Principal("svc:a", PrincipalKind.SERVICE, "acme", "alice",
                                 permissions=[Permission.ADMIN])):
        with pytest.raises(MemoryScopeError):
            await lease_extraction_jobs(manager, who, worker_id="w")
    with pytest.raises(MemoryValidationError) as limit:
        await lease_extraction_jobs(manager, OPERATOR, worker_id="w", limit=0)
    assert limit.value.field == "limit"
    # The job keeps what extraction uses of its principal's permissions.
    admin = Principal("svc:admin", PrincipalKind.SERVICE, "acme", permissions=list(
        Permission))
    await extractor.enqueue(admin, OWNER.replace(user_id="carol"), await said(
        tiers, "We use Postgres.", "Ok", who=admin, owner=OWNER.replace(user_id="carol")))
    [job] = await lease_extraction_jobs(manager, OPERATOR, worker_id="w")
    assert job.principal.permissions == {Permission.READ, Permission.WRITE,
                                         Permission.ADMIN}
    refused = [e for e in sink.events if e.operation == "enqueue_extraction"
               and e.type == "memory.index.rejected"]
    assert len(refused) == 2


async def test_a_worker_without_what_it_needs_is_refused(
        manager: GovernedMemoryManager) -> None:
    with pytest.raises(MemoryConfigurationError, match="conversation tier"):
        ExtractionWorker(MemoryTiers(long_term=manager), MemoryExtractor(manager, None))
    tiers = MemoryTiers(long_term=manager, turns=InMemoryTurnStore())
    with pytest.raises(MemoryConfigurationError, match="language model"):
        ExtractionWorker(tiers, MemoryExtractor(manager, None))
    with pytest.raises(MemoryConfigurationError, match="disabled"):
        ExtractionWorker(tiers, MemoryExtractor(manager, Planned(TEA),
                                                policy=ContextPolicy.disabled()))


async def test_the_model_timeout_degrades_an_inline_extraction_too(
        tiers: MemoryTiers, manager: GovernedMemoryManager) -> None:
    turns = await said(tiers, "I prefer green tea.", "Noted!")
    result = await MemoryExtractor(manager, Planned("hang"), model_timeout_s=0.01).extract(
        ALICE, OWNER, turns)
    assert result.stored == () and result.retryable == "extraction.model_failed"
