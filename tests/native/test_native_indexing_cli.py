"""``governed-memory worker | reindex | outbox status|retry`` against a SQLite database.

The command line builds its manager from a registered profile; these tests stand in a
profile with an embedder (the hashing one) by replacing the opener, so everything after
it (the protocol calls, output, exit codes) runs as in production.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from governed_memory import GovernedMemoryManager, Principal, Scope
from governed_memory.capabilities import Capabilities
from governed_memory.cli import indexing as cli_indexing
from governed_memory.cli.main import cli
from governed_memory.clock import ManualClock
from governed_memory.plugins import PluginManager
from governed_memory.profiles import loads_profile
from governed_memory.provider_kit import NoOptionalFeatures
from governed_memory_native import build_native_provider
from indexing_support import ControlledEmbedder, settings
from native_support import make_ctx, note

PROFILE = """
spec_version = 1
id = "cli-hybrid"
version = "1.0.0"

[provider]
name = "native"

[stores.embedder]
kind = "hashing"
config = {{ dimension = {dimension} }}

[indexing]
mode = "async_outbox"

[retrieval]
modes = ["lexical", "vector"]
"""

ALICE = Principal("alice", "user", "acme", user_id="alice",
                  permissions=["memory:read", "memory:write"])
SCOPE = Scope(tenant_id="acme", user_id="alice")


@pytest.fixture
def database(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


def _use_profile(monkeypatch: pytest.MonkeyPatch, database: Path, dimension: int) -> None:
    spec = loads_profile(PROFILE.format(dimension=dimension))

    def open_manager(db: Path | None, profile: str | None = None) -> GovernedMemoryManager:
        return GovernedMemoryManager.from_profile(
            spec, plugins=PluginManager.load(blocked=[]),
            provider_config_overrides={"path": str(db or database)})

    monkeypatch.setattr(cli_indexing, "_open_manager", open_manager)


def _invoke(*args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == code, (result.output, result.stderr)
    return result


def _status(database: Path) -> dict[str, Any]:
    result = _invoke("outbox", "status", "--db", str(database), "--json")
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def _add(database: Path, *contents: str) -> None:
    spec = loads_profile(PROFILE.format(dimension=32))

    async def main() -> None:
        manager = GovernedMemoryManager.from_profile(
            spec, plugins=PluginManager.load(blocked=[]),
            provider_config_overrides={"path": str(database)})
        async with manager:
            for content in contents:
                await manager.add(ALICE, SCOPE, content)

    asyncio.run(main())


def test_worker_once_indexes_what_writes_queued(monkeypatch: pytest.MonkeyPatch,
                                                database: Path) -> None:
    _use_profile(monkeypatch, database, 32)
    _add(database, "green tea", "black coffee", "oolong")
    status = _status(database)["status"]
    assert (status["pending"], status["missing_vectors"]) == (3, 3)
    result = _invoke("worker", "--db", str(database), "--once", "--worker-id", "cli-test")
    assert "worker cli-test stopped: leased 3, indexed 3" in result.stdout
    status = _status(database)["status"]
    assert (status["pending"], status["missing_vectors"]) == (0, 0)
    assert status["vectors"] == {"hashing@fh1-w1-c3/32": 3}
    text = _invoke("outbox", "status", "--db", str(database)).stdout
    assert "embedder: hashing@fh1-w1-c3/32 (mode async_outbox)" in text
    assert "0 pending" in text


def test_dead_letters_are_listed_and_requeued(monkeypatch: pytest.MonkeyPatch,
                                              database: Path) -> None:
    clock = ManualClock()

    async def poison() -> None:
        failing = ControlledEmbedder(dimension=32)
        failing.failing = True
        provider = build_native_provider({"path": str(database), "index_max_attempts": 1},
                                         clock)
        provider.configure_indexing(settings(failing, "async_outbox"))
        await provider.start()
        try:
            await provider.add(note("green tea"), make_ctx(clock))
            assert (await provider.process_index_jobs(worker_id="w")).dead == 1
        finally:
            await provider.close()

    asyncio.run(poison())
    _use_profile(monkeypatch, database, 32)
    report = _status(database)
    assert report["status"]["dead"] == 1
    [dead] = report["dead"]
    assert (dead["state"], dead["attempts"], dead["last_error_code"]) == ("dead", 1,
                                                                         "unavailable")
    assert f"dead {dead['job_id']}" in _invoke("outbox", "status", "--db", str(database)).stdout
    _invoke("outbox", "retry", "--db", str(database), code=2)  # neither ids nor --all
    assert "requeued 1" in _invoke("outbox", "retry", "--db", str(database),
                                   dead["job_id"]).stdout
    _invoke("worker", "--db", str(database), "--once")
    status = _status(database)["status"]
    assert (status["dead"], status["missing_vectors"]) == (0, 0)


def test_reindex_reembeds_for_a_new_embedder(monkeypatch: pytest.MonkeyPatch,
                                             database: Path) -> None:
    _use_profile(monkeypatch, database, 32)
    _add(database, *(f"memory number {n}" for n in range(7)))
    _invoke("worker", "--db", str(database), "--once")
    # The profile moves to another model (here: another dimension).
    _use_profile(monkeypatch, database, 48)
    status = _status(database)["status"]
    assert (status["embedder"], status["missing_vectors"]) == ("hashing@fh1-w1-c3/48", 7)
    result = _invoke("reindex", "--db", str(database), "--batch", "3")
    assert "queued 7 record(s)" in result.stdout
    assert "indexed 7" in result.stdout
    status = _status(database)["status"]
    assert status["vectors"] == {"hashing@fh1-w1-c3/48": 7}
    assert status["missing_vectors"] == 0
    assert "queued 0 record(s)" in _invoke("reindex", "--db", str(database)).stdout


def test_a_provider_without_vectors_is_refused(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    def open_manager(db: Path | None, profile: str | None = None) -> GovernedMemoryManager:
        class Plain(NoOptionalFeatures):
            name = "plain"

            def capabilities(self) -> Capabilities:
                return Capabilities(durable=False, transactional=False)

            async def start(self) -> None: ...

            async def close(self) -> None: ...

        return GovernedMemoryManager(Plain())  # type: ignore[arg-type]

    monkeypatch.setattr(cli_indexing, "_open_manager", open_manager)
    result = _invoke("outbox", "status", "--db", str(tmp_path / "x.db"), code=6)
    assert "keeps no vectors" in result.stderr


def test_every_command_is_a_governed_operation_in_the_trail(monkeypatch: pytest.MonkeyPatch,
                                                            database: Path) -> None:
    from governed_memory.events import InMemoryEventSink

    spec = loads_profile(PROFILE.format(dimension=32))
    sink = InMemoryEventSink()

    def open_manager(db: Path | None, profile: str | None = None) -> GovernedMemoryManager:
        return GovernedMemoryManager.from_profile(
            spec, plugins=PluginManager.load(blocked=[]), sinks=[sink],
            provider_config_overrides={"path": str(db or database)})

    monkeypatch.setattr(cli_indexing, "_open_manager", open_manager)
    _add(database, "green tea", "black coffee")
    _invoke("worker", "--db", str(database), "--once", "--worker-id", "w")
    _invoke("reindex", "--db", str(database))
    _invoke("outbox", "status", "--db", str(database))
    _invoke("outbox", "retry", "--db", str(database), "--all")
    assert "removed 0" in _invoke("maintain", "--db", str(database)).stdout
    done = [(e.type, e.operation) for e in sink.events if e.type.endswith((".completed",))]
    assert ("memory.index.completed", "process_index_jobs") in done
    assert ("memory.index.completed", "reindex") in done
    assert ("memory.index.completed", "index_status") in done
    assert ("memory.index.completed", "retry_index_jobs") in done
    assert ("memory.maintenance.completed", "purge_snapshots") in done
    assert {e.principal_id for e in sink.events} == {e.principal_id for e in sink.events
                                                     if e.principal_id.startswith("cli:")}
    assert {e.tenant_id for e in sink.events} == {cli_indexing.STORE_TENANT}
