"""``audit query … --summary principal``: who touched the tenant, subject or scope asked
about, how many operations, allowed, denied, rejected or failed, by operation and
outcome; each operation counted once (by the event that closed it), as a table or JSON."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from governed_memory.audit import (
    AuditSink,
    EventFilter,
    PrincipalActivity,
    principal_summary,
    query,
)
from governed_memory.audit.times import iso
from governed_memory.cli import audit_reading
from governed_memory.cli.main import cli
from governed_memory.events import RECEIPT_EVENT, ErasureEvidence, MemoryEvent, subject_hash

NOW = 1_800_000_000.0
ALICE_SCOPE = "sh1:" + "a1" * 32
ALICE = subject_hash("acme", "alice")

# principal, tenant, operation, closing type (None: no closing event), outcome,
# error code, minutes ago
OPERATIONS: list[tuple[str, str, str, str | None, str | None, str | None, int]] = [
    ("user:alice", "acme", "add", "committed", "committed", None, 300),
    ("user:alice", "acme", "add", "committed", "committed", None, 50),
    ("user:alice", "acme", "search", "completed", "completed", None, 40),
    ("user:alice", "acme", "delete", "rejected", "deny", "policy_denied", 30),
    ("user:mallory", "acme", "search", "rejected", "deny", "scope_denied", 20),
    ("user:mallory", "acme", "get", "rejected", "rejected", "not_found", 19),
    ("user:mallory", "acme", "add", "rejected", "invalid", "validation", 18),
    ("user:mallory", "acme", "add", "failed", "failed", "storage", 17),
    ("user:mallory", "acme", "update", None, None, None, 16),  # never closed
    ("svc:dpo", "acme", "delete_user", "committed", "committed", None, 10),
    ("user:carol", "globex", "add", "committed", "committed", None, 5),
]


def _events() -> list[MemoryEvent]:
    events = []
    for n, (principal, tenant, operation, closing, outcome, error, minutes) in enumerate(
            OPERATIONS):
        kind = "read" if operation in ("search", "get") else "write"
        common: dict[str, Any] = {
            "operation_id": f"op_{n}", "operation": operation, "principal_id": principal,
            "tenant_id": tenant, "occurred_at": NOW - minutes * 60,
            "scope_hash": ALICE_SCOPE if tenant == "acme" else "sh1:" + "c0" * 32,
            "subject_hashes": (ALICE,) if tenant == "acme" else ()}
        events.append(MemoryEvent(event_id=f"evt_{n}.0", type=f"memory.{kind}.requested", **common))
        if closing is not None:
            events.append(MemoryEvent(event_id=f"evt_{n}.9", type=f"memory.{kind}.{closing}",
                                      outcome=outcome, error_code=error, **common))
        if operation == "delete_user":  # the receipt is an event, not an operation
            events.append(MemoryEvent(event_id=f"evt_{n}.8", type=RECEIPT_EVENT, outcome="receipt",
                                      erasure=ErasureEvidence("req_1"), **common))
    return events


@pytest.fixture(scope="module")
def trail(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("trail")

    async def write() -> None:
        sink = AuditSink(directory)
        for event in _events():
            await sink.emit(event)
        await sink.close()

    asyncio.run(write())
    return directory


def test_each_principal_is_summed_up(trail: Path) -> None:
    rows = {row.principal_id: row for row in principal_summary(query([trail],
                                                                     EventFilter()))}
    assert list(rows) == ["user:alice", "user:mallory", "svc:dpo", "user:carol"]  # ties by id
    alice, mallory, dpo = rows["user:alice"], rows["user:mallory"], rows["svc:dpo"]
    assert alice == PrincipalActivity(
        "user:alice", ("acme",), 4, 3, 1, 0, 0,
        {"add": {"committed": 2}, "delete": {"deny": 1}, "search": {"completed": 1}},
        NOW - 300 * 60, NOW - 30 * 60, 8)
    assert (mallory.operations, mallory.allowed, mallory.denied, mallory.rejected,
            mallory.failed, mallory.events) == (4, 0, 1, 2, 1, 9)
    assert mallory.by_operation == {"add": {"failed": 1, "invalid": 1},
                                    "get": {"rejected": 1}, "search": {"deny": 1}}
    assert (dpo.operations, dpo.allowed, dpo.events) == (1, 1, 3)  # the receipt is no op
    assert rows["user:carol"].tenant_ids == ("globex",)


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(audit_reading, "_now", lambda: NOW)

    def invoke(*args: str) -> Result:
        result = CliRunner().invoke(cli, ["audit", "query", *args, "--summary", "principal"])
        assert result.exit_code == 0, result.stderr
        return result

    return invoke


def test_the_summary_as_json_follows_the_filters(trail: Path, run: Any) -> None:
    body = json.loads(run(str(trail), "--tenant", "acme", "--json").stdout)
    assert body["summary"] == "principal"
    assert [p["principal_id"] for p in body["principals"]] == [
        "user:alice", "user:mallory", "svc:dpo"]
    assert (body["operations"], body["events"]) == (9, 20)
    alice = body["principals"][0]
    assert alice["by_operation"] == {"add": {"committed": 2}, "delete": {"deny": 1},
                                     "search": {"completed": 1}}
    assert (alice["allowed"], alice["denied"], alice["first_at"]) == (3, 1, NOW - 18000)
    # the other ways to name what was touched: a subject, a scope hash, a time window
    by_subject = json.loads(run(str(trail), "--subject", "acme", "alice", "--json").stdout)
    by_scope = json.loads(run(str(trail), "--scope-hash", ALICE_SCOPE, "--json").stdout)
    assert by_subject["principals"] == by_scope["principals"] == body["principals"]
    recent = json.loads(run(str(trail), "--since", "1 hour ago", "--json").stdout)
    assert {p["principal_id"]: p["operations"] for p in recent["principals"]} == {
        "user:mallory": 4, "user:alice": 3, "svc:dpo": 1, "user:carol": 1}
    denials = json.loads(run(str(trail), "--outcome", "deny", "--json").stdout)
    assert {p["principal_id"]: p["denied"] for p in denials["principals"]} == {
        "user:mallory": 1, "user:alice": 1}
    top = json.loads(run(str(trail), "--limit", "1", "--json").stdout)
    assert [p["principal_id"] for p in top["principals"]] == ["user:alice"]
    assert top["operations"] == 10  # totals count every principal, shown or not


def test_the_summary_as_a_table(trail: Path, run: Any) -> None:
    shown = run(str(trail), "--since", "2 hours ago")
    header, *rows = shown.stdout.splitlines()
    assert header.split() == ["principal", "tenant", "operations", "allowed", "denied",
                              "rejected", "failed", "last", "seen", "by", "operation",
                              "and", "outcome"]
    assert [row.split()[:7] for row in rows] == [
        ["user:mallory", "acme", "4", "0", "1", "2", "1"],
        ["user:alice", "acme", "3", "2", "1", "0", "0"],
        ["svc:dpo", "acme", "1", "1", "0", "0", "0"],
        ["user:carol", "globex", "1", "1", "0", "0", "0"]]
    assert rows[1].split()[7:] == [iso(NOW - 30 * 60), "add:committed=1", "delete:deny=1",
                                   "search:completed=1"]
    assert header.index("operations") + len("operations") == rows[0].index(" 4") + 2
    assert shown.stderr == "4 principal(s), 9 operation(s) in 20 event(s)\n"
    empty = run(str(trail), "--until", "1w")
    assert len(empty.stdout.splitlines()) == 1 and empty.stdout.split() == header.split()
    assert empty.stderr == "0 principal(s), 0 operation(s) in 0 event(s)\n"


def test_the_guides_summary_example_is_what_the_command_prints(tmp_path: Path) -> None:
    """docs/compliance.md shows a summary: the same operations print the same table (the
    times aside)."""
    from governed_memory import GovernedMemoryManager, Scope
    from governed_memory.errors import MemoryPolicyDeniedError, MemoryScopeError
    from governed_memory.principal import Permission, Principal, PrincipalKind

    doc = (Path(__file__).resolve().parents[2] / "docs" / "compliance.md").read_text()
    command = '$ governed-memory audit query trail --subject acme alice --since "1 hour ago"'
    block = doc[doc.index(command):]
    shown = block[block.index("\n") + 1:block.index("```")].splitlines()
    alice = Principal("user:alice", PrincipalKind.USER, "acme", "alice",
                      frozenset({Permission.READ, Permission.WRITE}))
    mallory = Principal("user:mallory", PrincipalKind.USER, "acme", "mallory",
                        frozenset({Permission.READ}))
    dpo = Principal("svc:dpo", PrincipalKind.SERVICE, "acme",
                    permissions=frozenset({Permission.ADMIN}))
    scope = Scope("acme", user_id="alice")

    async def operate() -> None:
        async with GovernedMemoryManager.from_profile(
                "compliance-strict@1.0.0", sinks=[AuditSink(tmp_path / "trail")],
                provider_config_overrides={"backend": "memory"}) as memory:
            await memory.add(alice, scope, "prefers oolong tea", idempotency_key="w1")
            with pytest.raises(MemoryPolicyDeniedError):
                await memory.add(alice, scope, "no key")
            await memory.search(alice, scope, "tea")
            with pytest.raises(MemoryScopeError):
                await memory.search(mallory, scope, "tea")
            await memory.delete_user(dpo, "acme", "alice")

    asyncio.run(operate())
    result = CliRunner().invoke(cli, ["audit", "query", str(tmp_path / "trail"), "--subject",
                                      "acme", "alice", "--since", "1 hour ago", "--summary",
                                      "principal"])
    assert result.exit_code == 0, result.stderr
    stamp = re.compile(r"\d{4}-\d\d-\d\dT[\d:.]+\+00:00")
    printed = [stamp.sub("T", line) for line in result.stdout.splitlines()]
    assert printed + result.stderr.splitlines() == [stamp.sub("T", line) for line in shown]
