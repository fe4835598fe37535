"""Where a profile's audit trail goes, and a fail-closed audit that has nowhere to
record (issue 28).

- Every built-in profile names its trail (``[audit] path = "audit"``), so a manager
  built from one in Python records every operation, beside its database: the same
  place the CLI uses, and nothing in the working directory itself.
- ``[audit] fail_closed = true`` with no trail and no sink is refused when the profile
  loads (``profiles validate``, ``from_profile``), naming ``audit.path``, instead of
  loading and then refusing every operation; ``sinks=()`` with such a profile is refused
  by ``from_profile``.
- When a strict trail really cannot record, the error names the sink and what failed.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import attrs
import pytest
from actors import ALICE
from click.testing import CliRunner, Result
from governed_memory import GovernedMemoryManager, Scope
from governed_memory.audit import iter_entries, verify_trail
from governed_memory.cli.building import HOME_ENV, PROFILE_ENV
from governed_memory.cli.main import cli
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryConfigurationError, MemoryUnavailableError
from governed_memory.events import AuditUnavailableError, InMemoryEventSink, MemoryEvent
from governed_memory.plugins import BLOCK_ENV
from governed_memory.profiles import ProfileLoadError, ProfileRegistry, loads_profile
from governed_memory.sinks import default_base_dir
from governed_memory.sync import SyncMemoryManager
from governed_memory_native import build_native_provider
from profile_support import BUILTIN, installed, write_toml

MINE = Scope("acme", user_id="alice")
STRICT_WITHOUT_TRAIL = """
spec_version = 1
id = "strict-nowhere"
version = "1.0.0"

[provider.config]
backend = "memory"

[audit]
fail_closed = true
"""


@pytest.fixture(autouse=True)
def in_tmp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in (BLOCK_ENV, HOME_ENV, PROFILE_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def invoke(*args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == code, (result.stdout, result.stderr, result.exception)
    return result


def _names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def _types(trail: Path) -> list[str]:
    return [str(entry.event["type"]) for entry in iter_entries([trail])]


# -- the built-in profiles keep a trail from Python too --------------------------------------


def test_every_builtin_profile_names_a_trail() -> None:
    registry = ProfileRegistry.from_plugins(installed())
    for reference in BUILTIN:
        assert registry.get(reference).audit.path == "audit", reference


async def test_a_builtin_profile_records_beside_its_database(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "home"))
    async with GovernedMemoryManager.from_profile("chat-assistant@1.0.0") as manager:
        record = await manager.add(ALICE, MINE, "Alice prefers dark mode")
        await manager.search(ALICE, MINE, "dark mode")
    assert (tmp_path / "home" / "memory.db").is_file()
    trail = tmp_path / "home" / "audit"
    assert verify_trail([trail]).ok
    assert {"memory.write.committed", "memory.read.completed"} <= set(_types(trail))
    committed = [entry.event for entry in iter_entries([trail])
                 if entry.event["type"] == "memory.write.committed"]
    assert committed[0]["record_ids"] == [record.id]
    assert _names(tmp_path) == ["home"]  # nothing else written


async def test_without_a_home_it_is_the_embedded_databases_directory(tmp_path: Path) -> None:
    async with GovernedMemoryManager.from_profile("local@1.0.0") as manager:
        await manager.add(ALICE, MINE, "a note")
    assert _names(tmp_path) == [".governed-memory"]
    assert verify_trail([tmp_path / ".governed-memory" / "audit"]).ok


async def test_a_database_path_puts_the_trail_beside_it(tmp_path: Path) -> None:
    db = tmp_path / "data" / "team.db"
    async with GovernedMemoryManager.from_profile(
            "agent-run@1.0.0", provider_config_overrides={"path": str(db)}) as manager:
        await manager.add(ALICE, Scope("acme", user_id="alice", run_id="r1"), "step one",
                          idempotency_key="k1")
    assert verify_trail([tmp_path / "data" / "audit"]).ok
    assert _names(tmp_path) == ["data"]
    spec = ProfileRegistry.from_plugins(installed()).get("agent-run@1.0.0")
    assert default_base_dir(spec, {"path": str(db)}) == db.parent
    assert default_base_dir(spec, {"backend": "memory"}, environ={HOME_ENV: "/h"}) == Path("/h")
    assert default_base_dir(spec, environ={}) == Path(".governed-memory")


def test_python_and_the_cli_share_one_trail(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "home"))
    with SyncMemoryManager.from_profile("local@1.0.0") as memory:
        memory.add(ALICE, MINE, "from Python")
    invoke("list", "--tenant", "acme", "--user", "alice")
    trail = tmp_path / "home" / "audit"
    verification = verify_trail([trail])
    assert verification.ok
    principals = {entry.event["principal_id"] for entry in iter_entries([trail])}
    assert "user:alice" in principals and any(p.startswith("cli:") for p in principals)


async def test_compliance_strict_works_from_python(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # Before, its fail-closed trail had no sink from Python: every operation was refused.
    monkeypatch.setenv(HOME_ENV, str(tmp_path))
    async with GovernedMemoryManager.from_profile("compliance-strict@1.0.0") as manager:
        assert manager.events.strict
        await manager.add(ALICE, MINE, "prefers oolong tea", idempotency_key="k1")
    assert _types(tmp_path / "audit")[:2] == ["memory.write.requested",
                                              "memory.write.committed"]


# -- fail-closed with nowhere to record is refused up front ----------------------------------


def test_loading_refuses_fail_closed_without_a_trail() -> None:
    with pytest.raises(ProfileLoadError) as caught:
        loads_profile(STRICT_WITHOUT_TRAIL)
    assert len(caught.value.problems) == 1
    assert caught.value.problems[0].startswith("audit.path: fail_closed = true needs a trail")
    # a trail or another sink is somewhere to record
    assert loads_profile(STRICT_WITHOUT_TRAIL + 'path = "audit"\n').audit.fail_closed
    assert loads_profile(STRICT_WITHOUT_TRAIL + '[audit.sinks.jsonl]\npath = "e.jsonl"\n'
                         ).audit.fail_closed


def test_validate_and_from_profile_name_the_missing_path(tmp_path: Path) -> None:
    strict = write_toml(tmp_path, STRICT_WITHOUT_TRAIL, "strict.toml")
    refused = invoke("profiles", "validate", str(strict), code=7)
    assert "audit.path: fail_closed = true needs a trail" in refused.stderr
    with pytest.raises(MemoryConfigurationError, match=r"audit\.path: fail_closed = true"):
        GovernedMemoryManager.from_profile(strict, plugins=installed())
    added = invoke("add", "--profile", str(strict), "--tenant", "acme", "x", code=7)
    assert "audit.path" in added.stderr
    assert not (tmp_path / ".governed-memory").exists()


def test_from_profile_refuses_no_sinks_for_a_fail_closed_profile() -> None:
    with pytest.raises(MemoryConfigurationError, match=r"fail_closed = true, but sinks=\(\)"):
        GovernedMemoryManager.from_profile("compliance-strict@1.0.0", sinks=(),
                                           provider_config_overrides={"backend": "memory"})


# -- when a strict trail cannot record, the error says why -----------------------------------


class DiskFull:
    name = "audit"

    async def emit(self, event: MemoryEvent) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "/secret/place/audit-1.jsonl")

    async def close(self) -> None:
        return None


class Broken:
    name = "kafka"

    async def emit(self, event: MemoryEvent) -> None:
        raise RuntimeError("broker at kafka://user:pw@host refused")

    async def close(self) -> None:
        return None


def _strict(*sinks: Any) -> GovernedMemoryManager:
    clock = ManualClock()
    return GovernedMemoryManager(build_native_provider({"backend": "memory"}, clock),
                                 clock=clock, sinks=sinks, fail_closed=True)


async def test_the_runtime_error_names_the_sink_and_what_failed() -> None:
    kept = InMemoryEventSink()
    async with _strict(DiskFull(), Broken(), kept) as manager:
        with pytest.raises(AuditUnavailableError) as caught:
            await manager.add(ALICE, MINE, "prefers tea")
    message = str(caught.value)
    assert message.startswith("the audit trail could not record memory.write.requested: ")
    assert "sink 'audit' failed: OSError (ENOSPC: No space left on device)" in message
    assert "sink 'kafka' failed: RuntimeError" in message
    assert "/secret/place" not in message and "pw@host" not in message  # not shown
    assert caught.value.sinks == ("audit", "kafka")
    assert isinstance(caught.value.__cause__, OSError)  # the whole story, in process
    assert caught.value.code == "audit_unavailable"


async def test_a_strict_manager_without_a_sink_says_so() -> None:
    async with _strict() as manager:
        with pytest.raises(MemoryUnavailableError, match="has no event sink to record to"):
            await manager.add(ALICE, MINE, "prefers tea")


class CommitsRefused:
    """Records every event but a write's committed one (the disk filled up between)."""

    name = "audit"

    async def emit(self, event: MemoryEvent) -> None:
        if event.type == "memory.write.committed":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    async def close(self) -> None:
        return None


class WithoutOutbox:
    """The in-memory native provider, declaring no event outbox: a write's committed
    event is emitted after the provider committed."""

    def __init__(self) -> None:
        self._inner = build_native_provider({"backend": "memory"}, ManualClock())

    def capabilities(self) -> Any:
        return attrs.evolve(self._inner.capabilities(), event_outbox=False)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


async def test_an_unrecorded_commit_names_its_cause_too() -> None:
    manager = GovernedMemoryManager(WithoutOutbox(),  # type: ignore[arg-type]
                                    sinks=[CommitsRefused()], fail_closed=True)
    async with manager:
        with pytest.raises(AuditUnavailableError) as caught:
            await manager.add(ALICE, MINE, "once", idempotency_key="k1")
    assert str(caught.value).startswith(
        "add was applied, but the audit trail could not record memory.write.committed: "
        "sink 'audit' failed: OSError (ENOSPC: No space left on device); retry with the "
        "same idempotency key")
    assert caught.value.sinks == ("audit",)
