"""``SyncMemoryManager.audit``: an auditor's reads of the trail, blocking, as views of
``GovernedAudit``'s methods on the facade's loop; so the arguments, the governance, the
answers and the refusals are the async facade's."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from governed_memory import Principal, Scope
from governed_memory.audit import AuditSink, EventFilter, query
from governed_memory.audit.proofs import InclusionProof, TreeCheckpoint, verify_inclusion
from governed_memory.audit_requests import (
    AuditFilter,
    AuditTrailError,
    GovernedAudit,
    InclusionAnswer,
    TrailReader,
)
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryScopeError, MemoryValidationError
from governed_memory.events import InMemoryEventSink
from governed_memory.manager import GovernedMemoryManager
from governed_memory.sync import SyncAudit, SyncMemoryManager

ALICE = Principal("user:alice", "user", tenant_id="acme", user_id="alice",
                  permissions=["memory:read", "memory:write"])
AUDITOR = Principal("svc:auditor", "service", tenant_id="acme", permissions=["audit:read"])
ADMIN = Principal("svc:admin", "service", tenant_id="acme", permissions=["memory:admin"])
MINE = Scope("acme", user_id="alice")
DAY = 86_400.0


@attrs.frozen
class Trailed:
    memory: SyncMemoryManager
    clock: ManualClock
    trail: Path


@pytest.fixture
def trailed(tmp_path: Path) -> Iterator[Trailed]:
    clock = ManualClock()
    trail = tmp_path / "trail"
    with SyncMemoryManager.from_plugins("native", {"backend": "sqlite",
                                                   "path": str(tmp_path / "memory.db")},
                                        sinks=[AuditSink(trail)], clock=clock) as memory:
        yield Trailed(memory, clock, trail)


def _params(method: Any, skip: int) -> list[tuple[str, object, object]]:
    return [(p.name, p.kind, p.default)
            for p in list(inspect.signature(method).parameters.values())[skip:]]


def test_the_sync_audit_has_every_read_with_the_same_arguments() -> None:
    reads = {name: member for name, member in
             inspect.getmembers(GovernedAudit, inspect.iscoroutinefunction)
             if not name.startswith("_")}
    assert set(reads) == {"query", "summary", "report", "verify", "prove", "consistency"}
    for name, method in reads.items():
        mirror = getattr(SyncAudit, name, None)
        assert mirror is not None, f"SyncAudit lacks {name}"
        assert not inspect.iscoroutinefunction(mirror)
        assert _params(mirror, 1) == _params(method, 1), name
        assert (inspect.signature(mirror).return_annotation
                == inspect.signature(method).return_annotation), name


def _async_reads(trail: Path) -> GovernedAudit:
    """The async facade over the same trail files, on a manager of its own (its reads
    are recorded in its own sink, so the trail the sync facade reads is unchanged)."""
    other = GovernedMemoryManager.from_plugins("native", {"backend": "memory"},
                                               sinks=[InMemoryEventSink()])
    return GovernedAudit.of(other.activity, TrailReader(directory=trail))


def test_the_sync_reads_answer_what_the_async_reads_answer(trailed: Trailed) -> None:
    memory = trailed.memory
    note = memory.add(ALICE, MINE, "Alice prefers window seats")
    memory.search(ALICE, MINE, "seats")
    until = str(trailed.clock.now() + 1)
    trailed.clock.advance(60)  # every read below is after the window
    window = AuditFilter(until=until)
    checkpoint = memory.audit.verify(AUDITOR, "acme").checkpoint
    assert checkpoint is not None
    committed = next(entry.event for entry in query([trailed.trail], EventFilter())
                     if entry.event["type"] == "memory.write.committed")
    assert note.id in committed["record_ids"]

    async def the_async_answers() -> tuple[Any, ...]:
        reads = _async_reads(trailed.trail)
        return (await reads.query(AUDITOR, "acme", where=window),
                await reads.summary(AUDITOR, "acme", where=window),
                await reads.prove(AUDITOR, "acme", committed["event_id"], checkpoint))

    events, summary, proven = asyncio.run(the_async_answers())
    assert memory.audit.query(AUDITOR, "acme", where=window) == events
    assert len(events.events) == 4  # add and search: requested and committed / completed
    assert memory.audit.summary(AUDITOR, "acme", where=window) == summary
    sync_proof = memory.audit.prove(AUDITOR, "acme", committed["event_id"], checkpoint)
    assert isinstance(sync_proof, InclusionAnswer) and sync_proof == proven
    verify_inclusion(sync_proof.event, InclusionProof.from_json(sync_proof.proof),
                     TreeCheckpoint.from_json(checkpoint))
    later = memory.audit.verify(AUDITOR, "acme").checkpoint
    assert later is not None
    assert memory.audit.consistency(AUDITOR, "acme", checkpoint, later).proof
    report = memory.audit.report(AUDITOR, "acme", "alice")
    assert report.summary["written"] == 1 and report.summary["read"] == 1
    # The facade's reads are governed operations of the auditor, in the trail.
    operations = [entry.event["operation"] for entry in query([trailed.trail], EventFilter())
                  if entry.event["type"] == "memory.audit.completed"]
    assert operations == ["audit_verify", "audit_query", "audit_query", "audit_prove",
                          "audit_verify", "audit_prove", "audit_report"]


def test_the_sync_reads_refuse_as_the_async_reads_refuse(trailed: Trailed) -> None:
    memory = trailed.memory
    memory.add(ALICE, MINE, "a note")
    with pytest.raises(MemoryScopeError) as sync_refusal:
        memory.audit.verify(ADMIN, "acme")

    async def the_async_refusal() -> str:
        with pytest.raises(MemoryScopeError) as refused:
            await _async_reads(trailed.trail).verify(ADMIN, "acme")
        return str(refused.value)

    assert str(sync_refusal.value) == asyncio.run(the_async_refusal())
    assert str(sync_refusal.value).endswith("principal lacks audit:read")
    with pytest.raises(MemoryScopeError, match="bound to no user"):
        memory.audit.query(Principal("user:alice", "user", tenant_id="acme",
                                     user_id="alice", permissions=["audit:read"]), "acme")
    for where, field in ((AuditFilter(since="yesterday-ish"), "since"),
                         (AuditFilter(until="-24h ago"), "until")):
        with pytest.raises(MemoryValidationError) as bad:
            memory.audit.query(AUDITOR, "acme", where=where)
        assert bad.value.field == field
    with pytest.raises(MemoryValidationError) as bad:
        memory.audit.query(AUDITOR, "acme", limit=-1)
    assert bad.value.field == "limit"


def test_minus_24h_counts_back_from_the_managers_clock(trailed: Trailed) -> None:
    memory = trailed.memory
    memory.add(ALICE, MINE, "an old note")
    trailed.clock.advance(3 * DAY)
    recent = memory.add(ALICE, MINE, "a new note")
    trailed.clock.advance(60)
    for since in ("-24h", "- 2 days", "24h", "2 days ago"):
        found = memory.audit.query(AUDITOR, "acme",
                                   where=AuditFilter(operation="add", since=since))
        assert {tuple(e.event["record_ids"]) for e in found.events
                if e.event["type"] == "memory.write.committed"} == {(recent.id,)}, since


def test_a_closed_facade_refuses_its_audit_reads(tmp_path: Path) -> None:
    memory = SyncMemoryManager.from_plugins("native", {"backend": "memory"},
                                            sinks=[AuditSink(tmp_path / "trail")])
    memory.add(ALICE, MINE, "a note")
    assert memory.audit is memory.audit  # one view per facade
    assert memory.audit.verify(AUDITOR, "acme").ok
    memory.close()
    with pytest.raises(RuntimeError, match="closed"):
        memory.audit.verify(AUDITOR, "acme")


def test_a_broken_trail_is_refused_through_the_sync_facade(trailed: Trailed) -> None:
    trailed.memory.add(ALICE, MINE, "a note")
    first = trailed.trail / "audit-000001.jsonl"
    data = first.read_bytes()
    at = data.index(b'"count":1,')
    first.write_bytes(data[:at] + b'"count":7,' + data[at + len(b'"count":1,'):])
    with pytest.raises(AuditTrailError, match=r"^BROKEN audit-000001\.jsonl"):
        trailed.memory.audit.query(AUDITOR, "acme")
    assert not trailed.memory.audit.verify(AUDITOR, "acme").ok
