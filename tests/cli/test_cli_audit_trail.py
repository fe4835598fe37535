"""The CLI keeps an audit trail: the sinks a profile's ``[audit]`` names, else a
hash-chained trail next to the database, so ``compliance-strict`` works from the shell
end to end; and ``audit verify|checkpoint|query`` say what they found with an exit code
of their own for each outcome."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from governed_memory.audit import (
    AuditSink,
    Checkpoint,
    iter_entries,
    subject_report,
    verify_trail,
)
from governed_memory.cli.common import HOME_ENV
from governed_memory.cli.main import cli
from governed_memory.events import JsonLinesEventSink, MemoryEvent, read_events
from governed_memory.hookspecs import hookimpl
from governed_memory.plugins import BLOCK_ENV, PluginManager

pytest.importorskip("governed_memory_native.plugin")

STRICT = "compliance-strict@1.0.0"
ALICE = ["--tenant", "acme", "--user", "alice"]
Run = Callable[..., Result]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(BLOCK_ENV, raising=False)
    monkeypatch.delenv(HOME_ENV, raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def run() -> Run:
    runner = CliRunner()

    def invoke(*args: str, code: int = 0) -> Result:
        result = runner.invoke(cli, list(args))
        assert result.exit_code == code, (
            f"exit {result.exit_code} != {code}\nstdout: {result.stdout}\n"
            f"stderr: {result.stderr}\nexception: {result.exception!r}")
        return result

    return invoke


def _json(result: Result) -> Any:
    return json.loads(result.stdout)


def _operations(trail: Path) -> list[tuple[str, str]]:
    return [(str(e.event.get("operation")), e.type.rsplit(".", 1)[-1])
            for e in iter_entries([trail])]


# -- compliance-strict from the shell ------------------------------------------------------


def test_compliance_strict_works_from_the_cli_end_to_end(run: Run, tmp_path: Path) -> None:
    strict = ["--profile", STRICT, "--db", str(tmp_path / "memory.db")]
    added = _json(run("add", *strict, *ALICE, "prefers oolong tea", "--type", "preference",
                      "--idempotency-key", "w1", "--json"))
    rid = added["id"]
    assert _json(run("get", *strict, *ALICE, rid, "--json"))["id"] == rid
    hits = _json(run("search", *strict, *ALICE, "tea", "--json"))["hits"]
    assert [hit["record"]["id"] for hit in hits] == [rid]
    updated = _json(run("update", *strict, *ALICE, rid, "prefers green tea",
                        "--expected-revision", added["revision"], "--idempotency-key", "w2",
                        "--json"))
    assert updated["version"] == 2
    assert [i["id"] for i in _json(run("list", *strict, *ALICE, "--json"))["items"]] == [rid]
    assert len(_json(run("history", *strict, *ALICE, rid, "--json"))) == 2
    # the profile's own rules still hold: a write without an idempotency key is refused
    refused = run("add", *strict, *ALICE, "no key", code=3)
    assert "idempotency" in refused.stderr

    trail = tmp_path / "audit"
    ok = run("audit", "verify", str(trail))
    assert ok.stdout.startswith("OK chain") and "14 entries" in ok.stdout
    assert _operations(trail) == [
        (op, kind) for op, outcome in [("add", "committed"), ("get", "completed"),
                                       ("search", "completed"), ("update", "committed"),
                                       ("list", "completed"), ("history", "completed"),
                                       ("add", "rejected")]
        for kind in ("requested", outcome)]
    events = [entry.event for entry in iter_entries([trail])]
    assert {e["profile_id"] for e in events} == {"compliance-strict"}
    assert all(not e.get("content_hashes") for e in events)  # event_detail = "minimal"
    assert not any(b"tea" in path.read_bytes() for path in trail.iterdir())
    report = subject_report([trail], "acme", "alice")
    assert report.summary()["written"] == 2 and report.summary()["denied"] == 1

    # an auditor's checkpoint, then more work: the trail still proves it
    checkpoint = tmp_path / "checkpoints.jsonl"
    checkpoint.write_text(run("audit", "checkpoint", str(trail)).stdout)
    run("get", *strict, *ALICE, rid)
    later = run("audit", "verify", str(trail), "--checkpoint", str(checkpoint))
    assert "16 entries" in later.stdout and "1 checkpoint(s) matched" in later.stdout


def test_compliance_strict_deletes_and_erases_from_the_cli(run: Run, tmp_path: Path) -> None:
    strict = ["--profile", STRICT, "--db", str(tmp_path / "memory.db")]
    rid = _json(run("add", *strict, *ALICE, "prefers oolong tea", "--idempotency-key", "w1",
                    "--json"))["id"]
    refused = run("delete", *strict, *ALICE, rid, code=3)  # the profile wants a key
    assert "idempotency" in refused.stderr
    run("delete", *strict, *ALICE, rid, "--idempotency-key", "d1")
    run("get", *strict, *ALICE, rid, code=4)
    trail = tmp_path / "audit"
    assert _operations(trail)[-6:] == [("delete", "requested"), ("delete", "rejected"),
                                       ("delete", "requested"), ("delete", "committed"),
                                       ("get", "requested"), ("get", "rejected")]
    assert run("audit", "verify", str(trail)).stdout.startswith("OK chain")
    # the erasure is on the trail too, with a receipt the subject report verifies
    run("search", *strict, *ALICE, "tea")
    run("delete-user", *strict, *ALICE, "--yes")
    report = _json(run("audit", "report", str(trail), *ALICE, "--json"))
    (erasure,) = report["erasures"]
    assert erasure["receipt_verified"] and erasure["counts"]["records"] == 1
    assert erasure["counts"]["retrieval_snapshots"] == 1  # the search named alice's scope


def test_a_failing_trail_refuses_fail_closed_commands(run: Run, tmp_path: Path) -> None:
    (tmp_path / "audit").write_text("not a directory")  # the trail cannot be opened
    refused = run("add", "--profile", STRICT, "--db", str(tmp_path / "memory.db"), *ALICE,
                  "prefers oolong tea", "--idempotency-key", "w1", code=9)
    assert "audit_unavailable" in refused.stderr


# -- where the trail goes ------------------------------------------------------------------


def test_the_default_trail_lies_next_to_the_database(run: Run, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv(HOME_ENV, str(home))
    run("add", *ALICE, "prefers oolong tea")
    assert verify_trail([home / "audit"]).entries == 2
    elsewhere = tmp_path / "elsewhere" / "memory.db"
    run("add", "--db", str(elsewhere), *ALICE, "prefers green tea")
    assert verify_trail([elsewhere.parent / "audit"]).entries == 2
    assert verify_trail([home / "audit"]).entries == 2  # untouched


AUDITED = {
    "spec_version": 1, "id": "audited", "version": "1.0.0",
    "provider": {"name": "native", "config": {"backend": "sqlite"}},
    "audit": {"fail_closed": True, "path": "trail", "fsync": "interval",
              "fsync_interval_s": 0.5, "checkpoint_path": "checkpoints.jsonl",
              "checkpoint_every": 2, "sinks": {"jsonl": {"path": "events.jsonl"}}},
}


def _with_profiles(monkeypatch: pytest.MonkeyPatch, *profiles: dict[str, Any]) -> None:
    class TeamProfiles:
        @staticmethod
        @hookimpl
        def register_memory_profiles(register: Callable[..., None]) -> None:
            for profile in profiles:
                register(profile)

    real_load = PluginManager.load
    monkeypatch.setattr(PluginManager, "load",
                        lambda *a, **k: real_load([TeamProfiles()]))


def test_the_sinks_a_profile_names_are_built_under_the_home(
        run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _with_profiles(monkeypatch, AUDITED)
    db = tmp_path / "data" / "memory.db"
    for n in range(2):
        run("add", "--profile", "audited@1.0.0", "--db", str(db), *ALICE, f"note {n}")
    home = db.parent
    assert not (home / "audit").exists()  # the profile named its own trail
    checkpoints = [Checkpoint.from_json(line)
                   for line in (home / "checkpoints.jsonl").read_text().splitlines()]
    assert [c.count for c in checkpoints] == [2, 4]
    verification = verify_trail([home / "trail"], checkpoints)
    assert verification.ok and verification.entries == 4
    logged = read_events(home / "events.jsonl")
    assert [e.event_id for e in logged] == [e.event["event_id"]
                                            for e in iter_entries([home / "trail"])]


def test_a_profile_naming_an_unknown_sink_is_refused_with_its_path(
        run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = {**AUDITED, "id": "leaky", "audit": {"sinks": {"kafka": {"topic": "t"}}}}
    _with_profiles(monkeypatch, broken)
    refused = run("add", "--profile", "leaky@1.0.0", "--db", str(tmp_path / "m.db"), *ALICE,
                  "x", code=7)
    assert "audit.sinks.kafka" in refused.stderr and "unknown event sink" in refused.stderr
    assert not (tmp_path / "m.db").exists()


# -- audit verify / checkpoint / query: what they found, and their exit codes -------------


def _event(n: int) -> MemoryEvent:
    return MemoryEvent(event_id=f"evt_{n}.1", type="memory.write.committed",
                       occurred_at=1_700_000_000.0 + n,
                       operation_id=f"op_{n}", operation="add", principal_id="user:alice",
                       tenant_id="acme", outcome="committed")


@pytest.fixture
def trail(tmp_path: Path) -> Path:
    directory = tmp_path / "trail"

    async def write() -> None:
        sink = AuditSink(directory, max_file_bytes=4096)
        for n in range(40):
            await sink.emit(_event(n))
        await sink.close()

    asyncio.run(write())
    assert len(list(directory.glob("audit-*.jsonl"))) > 2
    return directory


def test_verify_exit_codes(run: Run, trail: Path, tmp_path: Path) -> None:
    assert run("audit", "verify", str(trail)).stdout.startswith("OK chain")
    files = sorted(trail.glob("audit-*.jsonl"))
    checkpoint = tmp_path / "checkpoints.jsonl"
    checkpoint.write_text(run("audit", "checkpoint", str(trail)).stdout)
    files[0].unlink()  # defect 1: removing the first file passed --checkpoint
    removed = run("audit", "verify", str(trail), "--checkpoint", str(checkpoint), code=1)
    assert removed.stderr.startswith("BROKEN ") and "were removed" in removed.stderr
    named = run("audit", "verify", *map(str, files[1:]), "--checkpoint", str(checkpoint),
                code=1)
    assert "checked only from the genesis" in named.stderr
    assert run("audit", "checkpoint", str(trail), code=1).stderr.startswith("BROKEN ")


def test_a_plain_event_log_and_an_empty_directory_are_not_called_broken(
        run: Run, tmp_path: Path) -> None:
    async def log() -> None:
        sink = JsonLinesEventSink(tmp_path / "demo" / "events.jsonl")
        await sink.emit(_event(1))
        await sink.close()

    asyncio.run(log())
    plain = run("audit", "verify", str(tmp_path / "demo" / "events.jsonl"), code=3)
    assert "not a hash-chained trail" in plain.stderr and "BROKEN" not in plain.stderr
    empty = run("audit", "verify", str(tmp_path / "demo"), code=4)
    assert "no trail here" in empty.stderr and "BROKEN" not in empty.stderr
    as_json = _json(run("audit", "verify", "--json", str(tmp_path / "demo"), code=4))
    assert (as_json["ok"], as_json["status"]) == (False, "no_trail")
    assert run("audit", "checkpoint", str(tmp_path / "demo" / "events.jsonl"), code=3)
    assert run("audit", "query", str(tmp_path / "demo"), code=4)
    assert run("audit", "report", str(tmp_path / "demo"), "--tenant", "acme", "--user",
               "alice", code=4)


def test_query_text_shows_the_policy_revision_and_the_reasons(run: Run,
                                                              tmp_path: Path) -> None:
    db = ["--db", str(tmp_path / "memory.db")]
    run("add", *db, *ALICE, "password: hunter2", code=3)  # local refuses credentials
    denied = run("audit", "query", str(tmp_path / "audit"), "--outcome", "deny").stdout
    line = denied.strip()
    event = next(e.event for e in iter_entries([tmp_path / "audit"])
                 if e.event.get("outcome") == "deny")
    assert f"policy_revision={event['policy_revision']}" in line
    assert f"decision={event['decision_id']}" in line
    assert event["reasons"] and f"reasons={json.dumps(event['reasons'])}" in line


def test_query_summarizes_recent_work_per_principal(run: Run, tmp_path: Path) -> None:
    """Issue 28: ``--since "1 hour ago"`` is taken, and ``--summary principal`` says who
    touched the subject, how often, allowed or denied (real operations, real trail)."""
    db = ["--db", str(tmp_path / "memory.db")]
    run("add", *db, *ALICE, "prefers oolong tea")
    run("add", *db, *ALICE, "password: hunter2", code=3)  # local refuses credentials
    run("search", *db, *ALICE, "tea")
    trail = str(tmp_path / "audit")
    body = _json(run("audit", "query", trail, "--subject", "acme", "alice", "--since",
                     "1 hour ago", "--summary", "principal", "--json"))
    (row,) = body["principals"]
    operator = next(e.event["principal_id"] for e in iter_entries([tmp_path / "audit"]))
    assert row["principal_id"] == operator and row["tenant_ids"] == ["acme"]
    assert (row["operations"], row["allowed"], row["denied"]) == (3, 2, 1)
    assert row["by_operation"] == {"add": {"committed": 1, "deny": 1},
                                   "search": {"completed": 1}}
    table = run("audit", "query", trail, "--since", "1h", "--summary", "principal")
    assert table.stdout.splitlines()[1].split()[:7] == [operator, "acme", "3", "2", "1", "0",
                                                        "0"]
    none = run("audit", "query", trail, "--until", "2 days ago", "--summary", "principal")
    assert none.stderr.startswith("0 principal(s)")
    bad = run("audit", "query", trail, "--since", "last tuesday", code=2)
    assert "1 hour ago" in bad.stderr
