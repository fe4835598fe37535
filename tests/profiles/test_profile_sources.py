"""Anything that takes a profile takes a registered reference or a TOML file (a ``str``
naming an existing file, or an ``os.PathLike``), through one framework function,
``governed_memory.profiles.resolve_profile``; a string that is neither is one error
naming both possibilities (issue 28)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from actors import ALICE
from click.testing import CliRunner, Result
from governed_memory import GovernedMemoryManager, Scope
from governed_memory.cli.building import HOME_ENV, PROFILE_ENV
from governed_memory.cli.main import cli
from governed_memory.errors import MemoryConfigurationError
from governed_memory.events import InMemoryEventSink
from governed_memory.plugins import BLOCK_ENV
from governed_memory.profiles import (
    ProfileRegistry,
    find_profile,
    load_profile,
    parse_profile,
    resolve_profile,
)
from governed_memory.sync import SyncMemoryManager
from profile_support import installed, write_toml

LEGAL = """
spec_version = 1
id = "legal-intake"
version = "1.2.0"

[provider.config]
backend = "memory"

[privacy]
secret_guard = "reject"

[policies]
enabled = ["permissions", "write-rules", "secret-guard"]
"""
MINE = Scope("acme", project_id="p", user_id="alice")


def invoke(*args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == code, (result.stdout, result.stderr, result.exception)
    return result


@pytest.fixture(autouse=True)
def in_tmp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in (BLOCK_ENV, HOME_ENV, PROFILE_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def test_a_reference_a_str_file_and_a_path_all_resolve(tmp_path: Path) -> None:
    plugins = installed()
    legal = write_toml(tmp_path, LEGAL, "legal-intake.toml")
    from_file = load_profile(legal)
    assert resolve_profile("legal-intake.toml", plugins) == from_file  # relative str
    assert resolve_profile(str(legal), plugins) == from_file
    assert resolve_profile(legal, plugins) == from_file  # os.PathLike
    registered = ProfileRegistry.from_plugins(plugins).get("chat-assistant@1.0.0")
    assert resolve_profile("chat-assistant@1.0.0", plugins) == registered
    assert resolve_profile("chat-assistant", plugins) == registered  # its newest version
    assert resolve_profile(registered) is registered
    found = find_profile(legal, plugins)
    assert found.file == legal and found.origin == f"file {legal.absolute()}"


def test_a_string_that_is_neither_names_both_possibilities(tmp_path: Path) -> None:
    for text in ("legal-intake.toml", "nope@1.0.0", "Team Profile", "profiles/x.toml"):
        with pytest.raises(MemoryConfigurationError) as caught:
            resolve_profile(text, installed())
        message = str(caught.value)
        assert message.startswith(f"profile {text!r} is neither a file (no such file: "
                                  f"{(tmp_path / text).absolute()}) nor a registered "
                                  "profile ("), message
        assert "pass the path of a TOML file or a registered id@version" in message
    with pytest.raises(MemoryConfigurationError,
                       match=r"unknown profile nope@1\.0\.0; registered: agent-run@1\.0\.0"):
        resolve_profile("nope@1.0.0", installed())
    (tmp_path / "folder").mkdir()
    with pytest.raises(MemoryConfigurationError, match="a directory, not a file"):
        resolve_profile("folder", installed())
    with pytest.raises(MemoryConfigurationError, match=r"profile file .*missing\.toml: "
                                                       "no such file"):
        resolve_profile(tmp_path / "missing.toml", installed())
    with pytest.raises(MemoryConfigurationError, match="not int"):
        resolve_profile(7, installed())  # type: ignore[arg-type]


def test_a_file_with_problems_names_each_by_its_path(tmp_path: Path) -> None:
    broken = write_toml(tmp_path, LEGAL + '\n[retrieval]\ntop_k = "many"\n', "broken.toml")
    for given in (broken, "broken.toml"):
        with pytest.raises(MemoryConfigurationError, match=r"retrieval\.top_k"):
            resolve_profile(given, installed())


async def test_from_profile_takes_a_file_as_str_or_path(tmp_path: Path) -> None:
    legal = write_toml(tmp_path, LEGAL, "legal-intake.toml")
    for given in ("legal-intake.toml", legal):
        sink = InMemoryEventSink()
        async with GovernedMemoryManager.from_profile(given, plugins=installed(),
                                                      sinks=[sink]) as manager:
            assert manager.profile_spec is not None
            assert manager.profile_spec.key == "legal-intake@1.2.0"
            await manager.add(ALICE, MINE, "Alice signed the engagement letter")
        assert {e.profile_id for e in sink.events} == {"legal-intake"}
    with pytest.raises(MemoryConfigurationError, match="is neither a file"):
        GovernedMemoryManager.from_profile("legal-intake-v2.toml", plugins=installed())


def test_the_sync_manager_takes_a_file_too(tmp_path: Path) -> None:
    legal = write_toml(tmp_path, LEGAL, "legal-intake.toml")
    for given in ("legal-intake.toml", legal):
        with SyncMemoryManager.from_profile(given, plugins=installed(), sinks=[]) as memory:
            assert memory.profile_spec is not None
            assert memory.profile_spec.id == "legal-intake"
            assert memory.add(ALICE, MINE, "noted").content == "noted"


def test_a_registered_profile_that_cannot_be_used_says_why() -> None:
    plugins = installed()
    registry = ProfileRegistry.from_plugins(plugins)
    registry.register(parse_profile({"id": "broken", "version": "1.0.0"}), origin="a plugin",
                      problem="policy 'no-such-policy' is not registered")
    found = find_profile("broken@1.0.0", plugins, registry=registry)
    assert found.problem is not None and found.origin == "a plugin"
    with pytest.raises(MemoryConfigurationError,
                       match=r"profile broken@1\.0\.0 \(from a plugin\) cannot be used here"):
        resolve_profile("broken@1.0.0", plugins, registry=registry)


# -- the command line: profiles show and validate take either --------------------------------


def test_profiles_show_takes_a_file_or_a_reference(tmp_path: Path) -> None:
    legal = write_toml(tmp_path, LEGAL, "legal-intake.toml")
    shown = invoke("profiles", "show", "legal-intake.toml").stdout
    assert "profile:  legal-intake@1.2.0" in shown
    assert f"file:     {legal.absolute()}" in shown
    assert '  privacy.secret_guard = "reject"' in shown
    as_json = json.loads(invoke("profiles", "show", str(legal), "--json").stdout)
    assert (as_json["id"], as_json["file"]) == ("legal-intake", str(legal.absolute()))
    registered = invoke("profiles", "show", "chat-assistant").stdout
    assert "profile:  chat-assistant@1.0.0" in registered and "plugin:" in registered
    refused = invoke("profiles", "show", "legal-intake-v2.toml", code=7)
    assert "is neither a file" in refused.stderr and "nor a registered profile" in refused.stderr


def test_profiles_validate_takes_a_reference_or_a_file(tmp_path: Path) -> None:
    write_toml(tmp_path, LEGAL, "legal-intake.toml")
    assert invoke("profiles", "validate", "legal-intake.toml").stdout.startswith(
        "ok: legal-intake@1.2.0")
    assert invoke("profiles", "validate", "compliance-strict@1.0.0").stdout.startswith(
        "ok: compliance-strict@1.0.0")
    refused = invoke("profiles", "validate", "nope@1.0.0", code=7)
    assert "is neither a file" in refused.stderr


def test_every_data_command_takes_a_relative_file_name(tmp_path: Path) -> None:
    write_toml(tmp_path, LEGAL.replace('backend = "memory"', 'backend = "sqlite"'),
               "legal-intake.toml")
    added = json.loads(invoke("add", "--profile", "legal-intake.toml", "--db", "m.db",
                              "--tenant", "acme", "--user", "alice", "a note",
                              "--json").stdout)
    listed = invoke("--profile", "legal-intake.toml", "list", "--db", "m.db", "--tenant",
                    "acme", "--user", "alice").stdout
    assert added["id"] in listed
