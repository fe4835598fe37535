"""``governed-memory worker`` runs queued extractions when its profile names a language
model and a turn store; ``extraction status|retry`` show and requeue the queue. The
opener is stood in (as the indexing CLI tests do) to hand the manager a scripted model:
everything after it runs as in production, against a SQLite database."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from governed_memory import GovernedMemoryManager, Principal, PrincipalKind, Scope
from governed_memory.cli import indexing as cli_indexing
from governed_memory.cli.main import cli
from governed_memory.events import InMemoryEventSink
from governed_memory.language_models import ScriptedModel
from governed_memory.plugins import PluginManager
from governed_memory.profiles import loads_profile
from governed_memory.tiers import MemoryTiers, TurnDraft
from governed_memory.turncontext import MemoryExtractor

PROFILE = """
spec_version = 1
id = "cli-extraction"
version = "1.0.0"

[provider]
name = "native"

[stores.turns]
kind = "sqlite"
config = {{ path = "{turns}" }}
"""
ALICE = Principal("user:alice", PrincipalKind.USER, "acme", "alice")
OWNER = Scope("acme", user_id="alice", session_id="s1")


def model() -> ScriptedModel:
    return ScriptedModel(responder=lambda call: {"facts": [
        {"content": "Alice prefers green tea", "type": "preference", "scope": "user",
         "importance": 0.8}]})


def opener(tmp_path: Path, sink: InMemoryEventSink,
           with_model: bool = True) -> Callable[..., GovernedMemoryManager]:
    spec = loads_profile(PROFILE.format(turns=tmp_path / "turns.db"))

    def open_manager(db: Path | None, profile: str | None = None) -> GovernedMemoryManager:
        manager = GovernedMemoryManager.from_profile(
            spec, plugins=PluginManager.load(), sinks=[sink],
            provider_config_overrides={"path": str(db or tmp_path / "memory.db")})
        if with_model:
            manager.language_model = model()
        return manager

    return open_manager


async def _queue(open_manager: Callable[..., GovernedMemoryManager], db: Path) -> str:
    manager = open_manager(db)
    async with MemoryTiers.from_manager(manager) as tiers:
        turns = (await tiers.append(ALICE, OWNER, TurnDraft.user("I prefer green tea.")),
                 await tiers.append(ALICE, OWNER, TurnDraft.assistant("Noted!")))
        job = await MemoryExtractor(manager, model()).enqueue(ALICE, OWNER, turns)
    return job.job_id


def _invoke(*args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == code, (result.output, result.stderr)
    return result


def test_the_worker_runs_queued_extractions(monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    sink = InMemoryEventSink()
    open_manager = opener(tmp_path, sink)
    asyncio.run(_queue(open_manager, db))
    monkeypatch.setattr(cli_indexing, "_open_manager", open_manager)
    assert "jobs: 1 pending" in _invoke("extraction", "status", "--db", str(db)).stdout

    ran = _invoke("worker", "--db", str(db), "--once", "--maintain-every", "0")
    assert "extraction: leased 1, done 1, retried 0, dead 0, lost leases 0, " \
           "facts stored 1" in ran.stderr
    status = _invoke("extraction", "status", "--db", str(db)).stdout
    assert "0 pending" in status and "1 done, 0 dead" in status
    added = [e for e in sink.events if e.operation == "add"
             and e.type == "memory.write.committed"]
    assert [e.principal_id for e in added] == ["user:alice"]
    assert "requeued 0 dead extraction job(s)" in _invoke(
        "extraction", "retry", "--db", str(db), "--all").stdout
    _invoke("extraction", "retry", "--db", str(db), code=2)  # neither ids nor --all


def test_without_a_model_the_worker_leaves_the_jobs_queued(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    sink = InMemoryEventSink()
    asyncio.run(_queue(opener(tmp_path, sink), db))
    monkeypatch.setattr(cli_indexing, "_open_manager", opener(tmp_path, sink, False))
    ran = _invoke("worker", "--db", str(db), "--once", "--maintain-every", "0")
    assert "extraction:" not in ran.stderr
    assert "jobs: 1 pending" in _invoke("extraction", "status", "--db", str(db)).stdout
