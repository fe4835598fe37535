"""Nothing is written where it was not asked for: a command that does not create the
database refuses a missing one (exit 4, naming it) before building anything, so a
mistyped ``--db`` creates no directory and a read in the wrong directory leaves no
``.governed-memory/``; commands that touch no data write nothing at all."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import ALICE, invoke
from governed_memory.cli.building import HOME_ENV, PROFILE_ENV
from governed_memory.plugins import BLOCK_ENV

pytest.importorskip("governed_memory_native.plugin")

RECORD = "01ZZZZZZZZZZZZZZZZZZZZZZZZ"

EXISTING_ONLY = [
    ["get", *ALICE, RECORD],
    ["list", *ALICE],
    ["search", *ALICE, "anything"],
    ["history", *ALICE, RECORD],
    ["update", *ALICE, RECORD, "new text"],
    ["delete", *ALICE, RECORD],
    ["approve", *ALICE, RECORD],
    ["reject", *ALICE, RECORD],
    ["review", "list", *ALICE],
    ["replay", "--tenant", "acme", "snap_x"],
    ["delete-user", "--tenant", "acme", "--user", "alice", "--yes"],
    ["delete-all", *ALICE, "--yes"],
    ["purge-expired", *ALICE],
    ["outbox", "status"],
    ["outbox", "retry", "--all"],
    ["maintain"],
    ["reindex"],
]
IDS = [" ".join(a for a in args if not a.startswith("-") and a not in ALICE)[:30]
       for args in EXISTING_ONLY]


@pytest.fixture(autouse=True)
def empty_cwd(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in (BLOCK_ENV, HOME_ENV, PROFILE_ENV):
        monkeypatch.delenv(name, raising=False)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd


def _with_db(args: list[str], db: Path) -> list[str]:
    """``--db`` goes after the (sub)command's name."""
    at = 2 if args[0] in ("review", "outbox") else 1
    return [*args[:at], "--db", str(db), *args[at:]]


@pytest.mark.parametrize("args", EXISTING_ONLY, ids=IDS)
def test_a_missing_db_is_refused_naming_it_and_nothing_is_created(
        args: list[str], tmp_path: Path, empty_cwd: Path) -> None:
    db = tmp_path / "missing" / "dir" / "m.db"
    result = invoke(*_with_db(args, db), code=4)
    assert f"error (not_found): no database at {db}" in result.stderr
    assert "does not exist either" in result.stderr
    assert not (tmp_path / "missing").exists()
    assert list(empty_cwd.iterdir()) == []


@pytest.mark.parametrize("args", EXISTING_ONLY[:4] + EXISTING_ONLY[-3:],
                         ids=IDS[:4] + IDS[-3:])
def test_the_default_database_is_not_created_by_a_read(args: list[str],
                                                       empty_cwd: Path) -> None:
    result = invoke(*args, code=4)
    assert str(empty_cwd / ".governed-memory" / "memory.db") in result.stderr
    assert list(empty_cwd.iterdir()) == []


def test_a_write_creates_the_default_database_and_reads_then_find_it(
        empty_cwd: Path) -> None:
    invoke("add", *ALICE, "the first memory")  # the documented default: ./.governed-memory
    home = empty_cwd / ".governed-memory"
    assert sorted(p.name for p in empty_cwd.iterdir()) == [".governed-memory"]
    assert (home / "memory.db").is_file() and (home / "audit").is_dir()
    assert "the first memory" in invoke("list", *ALICE).stdout


def test_the_home_variable_keeps_everything_out_of_the_working_directory(
        tmp_path: Path, empty_cwd: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "home"))
    invoke("add", *ALICE, "kept in the home")
    invoke("search", *ALICE, "home")
    assert (tmp_path / "home" / "memory.db").is_file()
    assert list(empty_cwd.iterdir()) == []


@pytest.mark.parametrize("args", [
    ["--help"], ["--version"], ["add", "--help"], ["providers", "list"],
    ["profiles", "list"], ["profiles", "show", "chat-assistant"], ["policies", "list"],
    ["commands"], ["audit", "--help"],
], ids=lambda args: " ".join(args))
def test_commands_that_touch_no_data_write_nothing(args: list[str], empty_cwd: Path) -> None:
    invoke(*args)
    assert list(empty_cwd.iterdir()) == []


def test_the_demo_writes_only_its_own_directory(tmp_path: Path, empty_cwd: Path) -> None:
    invoke("demo", "--dir", str(tmp_path / "demo"))
    assert list(empty_cwd.iterdir()) == []
