"""Erasure evidence end to end: ``delete_user``'s receipt (per-store counts; never a
count of cached searches a process-local cache cannot know) is recorded in the trail, a
repeat says nothing was left, and the subject report — and the CLI over it — shows it
without any content."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from actors import ADMIN, ALICE, ALICE_SCOPE
from click.testing import CliRunner
from governed_memory.audit import AuditSink, subject_report, verify_trail
from governed_memory.cli.main import cli
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryScopeError
from governed_memory.events import RECEIPT_EVENT, InMemoryEventSink, subject_hash
from governed_memory.manager import GovernedMemoryManager
from governed_memory.plugins import PluginManager
from governed_memory.principal import Permission, Principal, PrincipalKind
from governed_memory_native import build_native_provider

BOB = Principal("user:bob", PrincipalKind.USER, "acme", "bob",
                frozenset({Permission.READ, Permission.WRITE}))
SECRET_CONTENT = "alice's private preference: oolong"


async def alice_history(manager: GovernedMemoryManager) -> None:
    first = await manager.add(ALICE, ALICE_SCOPE, SECRET_CONTENT)
    await manager.add(ALICE, ALICE_SCOPE, "alice walks to work")
    await manager.update(ALICE, ALICE_SCOPE, first.id, content=SECRET_CONTENT + " tea")
    await manager.search(ALICE, ALICE_SCOPE, "oolong")
    await manager.get(ALICE, ALICE_SCOPE, first.id)
    with pytest.raises(MemoryScopeError):
        await manager.list(BOB, ALICE_SCOPE)  # someone else tries to read her memories


async def test_a_cached_erasure_claims_no_cache_count_and_repeats_as_nothing_left(
        tmp_path: Path) -> None:
    trail, events = tmp_path / "trail", InMemoryEventSink()
    manager = GovernedMemoryManager.from_profile(
        "chat-assistant@1.0.0", plugins=PluginManager.load(), clock=ManualClock(),
        sinks=[AuditSink(trail), events], provider_config_overrides={"backend": "memory"})
    async with manager:
        await alice_history(manager)
        first = await manager.delete_user(ADMIN, "acme", "alice")
        again = await manager.delete_user(ADMIN, "acme", "alice")
    assert first.verify() and again.verify()
    assert first.counts["records"] == 2 and first.counts["versions"] == 3
    assert first.counts["index_entries"] >= 2
    # chat-assistant caches in this process's memory: it cannot see other processes'
    # caches, so the receipt counts none (the Redis store's count: tests/cache).
    assert "cached_searches" not in first.counts
    assert not any(again.counts.values())  # idempotent: nothing was left

    # No layer above the provider extended the receipt, so the committed events carry
    # it as the provider issued it and no separate receipt event is needed.
    assert RECEIPT_EVENT not in events.types()
    receipts = [e for e in events.events if e.erasure is not None]
    assert [e.erasure.receipt_hash for e in receipts if e.erasure] == [first.receipt_hash,
                                                                        again.receipt_hash]
    assert receipts[0].subject_hashes == (subject_hash("acme", "alice"),)
    assert verify_trail([trail]).ok

    report = subject_report([trail], "acme", "alice")
    summary = report.summary()
    assert summary["written"] == 3 and summary["read"] == 2 and summary["denied"] == 1
    assert summary["erased"] == 2
    assert [e.request_id for e in report.erasures] == [first.request_id, again.request_id]
    assert [e.receipt_verified for e in report.erasures] == [True, True]
    assert report.erasures[0].counts == dict(first.counts)
    assert [e.nothing_left for e in report.erasures] == [False, True]
    assert subject_report([trail], "acme", "bob").activities == ()


async def test_an_outbox_erasure_is_one_committed_event_with_the_receipt(tmp_path: Path) -> None:
    trail, clock = tmp_path / "trail", ManualClock()
    provider = build_native_provider({"backend": "sqlite", "path": str(tmp_path / "m.db")},
                                     clock)
    events = InMemoryEventSink()
    async with GovernedMemoryManager(provider, clock=clock,
                                     sinks=[AuditSink(trail), events]) as manager:
        await alice_history(manager)
        receipt = await manager.delete_user(ADMIN, "acme", "alice")
    assert RECEIPT_EVENT not in events.types()  # the committed event already carries it
    erasure = subject_report([trail], "acme", "alice").erasures
    assert len(erasure) == 1 and erasure[0].receipt_hash == receipt.receipt_hash
    assert erasure[0].receipt_verified and erasure[0].counts["records"] == 2
    # The wrong user id cannot verify another subject's receipt.
    assert subject_report([trail], "acme", "alicia").erasures == ()


async def test_the_cli_verifies_queries_and_reports(tmp_path: Path) -> None:
    trail = tmp_path / "trail"
    manager = GovernedMemoryManager.from_profile(
        "chat-assistant@1.0.0", plugins=PluginManager.load(), clock=ManualClock(),
        sinks=[AuditSink(trail)], provider_config_overrides={"backend": "memory"})
    async with manager:
        await alice_history(manager)
        await manager.delete_user(ADMIN, "acme", "alice")
        await manager.delete_user(ADMIN, "acme", "alice")
    runner = CliRunner()

    verified = runner.invoke(cli, ["audit", "verify", str(trail)])
    assert verified.exit_code == 0, verified.output
    assert verified.output.startswith("OK chain ")

    checkpoint = runner.invoke(cli, ["audit", "checkpoint", str(trail)])
    assert checkpoint.exit_code == 0
    (tmp_path / "checkpoints").write_text(checkpoint.output)

    report = runner.invoke(cli, ["audit", "report", str(trail), "--tenant", "acme",
                                 "--user", "alice"])
    assert report.exit_code == 0, report.output
    text = report.output
    assert "written: 3, read: 2, deleted: 0, erased: 2, denied: 1, failed: 0" in text
    assert "nothing was left" in text and text.count("receipt hash verified") == 2
    assert "cached_searches=" not in text
    assert "oolong" not in text and "walks" not in text

    as_json = json.loads(runner.invoke(cli, ["audit", "report", str(trail), "--tenant",
                                             "acme", "--user", "alice", "--json"]).output)
    assert as_json["summary"]["erased"] == 2

    adds = runner.invoke(cli, ["audit", "query", str(trail), "--operation", "add", "--json"])
    lines = [json.loads(line) for line in adds.output.splitlines()]
    assert {line["event"]["operation"] for line in lines} == {"add"}
    assert sorted(line["event"]["type"] for line in lines) == sorted(
        ["memory.write.requested", "memory.write.committed"] * 2)
    denied = runner.invoke(cli, ["audit", "query", str(trail), "--outcome", "deny",
                                 "--principal", "user:bob"])
    assert denied.exit_code == 0 and "memory.read.rejected" in denied.output
    none = runner.invoke(cli, ["audit", "query", str(trail), "--since", "2100-01-01"])
    assert none.exit_code == 0 and "0 event(s)" in none.output
    scoped = runner.invoke(cli, ["audit", "query", str(trail), "--scope-hash",
                                 ALICE_SCOPE.scope_hash, "--subject", "acme", "alice",
                                 "--json"])
    assert len(scoped.output.splitlines()) > 6

    # Tamper: drop one entry from the middle; verify, query and report all refuse.
    path = sorted(trail.glob("audit-*.jsonl"))[0]
    lines_raw = path.read_bytes().splitlines()
    path.write_bytes(b"\n".join(lines_raw[:5] + lines_raw[6:]) + b"\n")
    broken = runner.invoke(cli, ["audit", "verify", str(trail)])
    assert broken.exit_code == 1
    assert f"BROKEN {path}:6 (entry 6)" in broken.output
    for command in (["query", str(trail)], ["report", str(trail), "--tenant", "acme",
                                            "--user", "alice"]):
        assert runner.invoke(cli, ["audit", *command]).exit_code == 1

    # Truncation past the exported checkpoint.
    path.write_bytes(b"\n".join(lines_raw[:5]) + b"\n")
    cut = runner.invoke(cli, ["audit", "verify", str(trail), "--checkpoint",
                              str(tmp_path / "checkpoints")])
    assert cut.exit_code == 1 and "truncated" in cut.output
