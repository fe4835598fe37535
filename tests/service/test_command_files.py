"""The service commands: one option name for the key store, exactly the files
docs/service.md says each creates, and no directory created for a mistyped path.

The outside trials found ``serve --keys`` beside ``keys create --keys-db`` (one thing,
two names), and ``serve``/``mcp`` creating every missing directory of an explicitly
given ``--db`` or ``--keys``, where a typo starts an empty store nobody finds again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from governed_memory_service.cli import main
from mcp import Client, StdioServerParameters

NOT_FOUND = 4


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory of its own, no ``$GOVERNED_MEMORY_HOME``."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GOVERNED_MEMORY_HOME", raising=False)
    return tmp_path


@pytest.mark.parametrize("command", [["keys", "create"], ["keys", "list"],
                                     ["keys", "revoke"], ["serve"]])
def test_every_command_names_the_key_store_keys(command: list[str]) -> None:
    shown = CliRunner().invoke(main, [*command, "--help"])
    assert shown.exit_code == 0
    assert "--keys FILE" in shown.output
    assert "--keys-db" not in shown.output  # the old spelling works, but is not advertised


def test_keys_names_the_store_and_keys_db_still_works(home: Path) -> None:
    runner = CliRunner()
    created = runner.invoke(main, ["keys", "create", "--keys", "k.db", "--tenant", "acme",
                                   "--user", "alice", "--permission", "memory:read"])
    assert created.exit_code == 0, created.output
    key_id = json.loads(created.stdout.splitlines()[0])["key_id"]
    old = runner.invoke(main, ["keys", "list", "--keys-db", "k.db"])
    assert old.exit_code == 0, old.output
    assert key_id in old.stdout
    assert "--keys-db is deprecated; use --keys" in old.stderr
    both = runner.invoke(main, ["keys", "list", "--keys", "k.db", "--keys-db", "k.db"])
    assert both.exit_code == 2 and "give --keys only" in both.output
    revoked = runner.invoke(main, ["keys", "revoke", "--keys", "k.db", key_id])
    assert revoked.exit_code == 0, revoked.output
    assert files(home) <= {"k.db", "k.db-wal", "k.db-shm"}


def test_keys_create_makes_the_default_home_but_no_other_directory(home: Path) -> None:
    runner = CliRunner()
    missing = home / "typo" / "keys.db"
    refused = runner.invoke(main, ["keys", "create", "--keys", str(missing), "--tenant",
                                   "acme", "--permission", "memory:read"])
    assert refused.exit_code == NOT_FOUND, refused.output
    assert str(missing) in refused.stderr and "does not exist" in refused.stderr
    assert files(home) == set()
    made = runner.invoke(main, ["keys", "create", "--tenant", "acme",
                                "--permission", "memory:read"])
    assert made.exit_code == 0, made.output
    assert (home / ".governed-memory" / "keys.db").is_file()


@pytest.mark.parametrize("option", ["--db", "--keys"])
def test_serve_refuses_a_file_in_a_missing_directory(home: Path, option: str) -> None:
    missing = home / "no" / "such" / "dir" / "file.db"
    result = CliRunner().invoke(main, ["serve", "--profile", "local@1.0.0", option,
                                       str(missing), "--port", "0"])
    assert result.exit_code == NOT_FOUND, result.output
    assert str(missing) in result.stderr
    assert files(home) == set()  # nothing created, not even the default home


def test_serve_refuses_a_profile_path_in_a_missing_directory(home: Path) -> None:
    profile = home / "p.toml"
    profile.write_text('spec_version = 1\nid = "p"\nversion = "1.0.0"\n[provider]\n'
                       'name = "native"\n[provider.config]\nbackend = "sqlite"\n'
                       f'path = "{home / "gone" / "m.db"}"\n', encoding="utf-8")
    result = CliRunner().invoke(main, ["serve", "--profile", str(profile), "--port", "0"])
    assert result.exit_code == NOT_FOUND, result.output
    assert "gone" in result.stderr
    assert files(home) == {"p.toml"}


def test_mcp_refuses_a_db_in_a_missing_directory(home: Path) -> None:
    missing = home / "x" / "y" / "memory.db"
    result = CliRunner().invoke(main, ["mcp", "--profile", "local@1.0.0", "--db",
                                       str(missing), "--tenant", "acme", "--user", "alice"])
    assert result.exit_code == NOT_FOUND, result.output
    assert str(missing) in result.stderr and "does not exist" in result.stderr
    assert files(home) == set()


def _mcp(cwd: Path, *args: str, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``mcp`` as a desktop agent that closes its stdin at once: the server starts,
    builds its manager and exits 0."""
    env = {k: v for k, v in os.environ.items() if k != "GOVERNED_MEMORY_HOME"}
    if home is not None:
        env["GOVERNED_MEMORY_HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "governed_memory_service", "mcp", *args,
                           "--tenant", "acme", "--user", "alice"], cwd=cwd, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120)


def test_mcp_creates_the_database_and_the_default_home_only(tmp_path: Path) -> None:
    """As docs/service.md says: the memory database (in the default home, which it may
    create, including a missing ``$GOVERNED_MEMORY_HOME``), and no key store."""
    plain = _mcp(tmp_path, "--profile", "local@1.0.0")
    assert plain.returncode == 0, plain.stderr
    assert files(tmp_path) == {".governed-memory", ".governed-memory/memory.db"}
    configured = tmp_path / "configured" / "home"
    assert _mcp(tmp_path, "--profile", "local@1.0.0", home=configured).returncode == 0
    assert (configured / "memory.db").is_file()
    assert not list(tmp_path.rglob("keys.db"))


async def test_mcp_takes_a_profile_file(tmp_path: Path) -> None:
    profile = tmp_path / "desk.toml"
    db = tmp_path / "from-the-profile.db"
    profile.write_text('spec_version = 1\nid = "desk"\nversion = "1.0.0"\n[provider]\n'
                       'name = "native"\n[provider.config]\nbackend = "sqlite"\n'
                       f'path = "{db}"\n', encoding="utf-8")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "governed_memory_service", "mcp", "--profile", str(profile),
              "--tenant", "acme", "--user", "alice"],
        env={**os.environ, "GOVERNED_MEMORY_HOME": str(tmp_path / "home")}, cwd=tmp_path)
    async with Client(params, cache=None) as client:
        stored = await client.call_tool("remember", {"content": "kept by the file's db"})
        assert not stored.is_error, stored.content
    assert db.is_file()
    assert not (tmp_path / "home").exists()  # the profile named the database
