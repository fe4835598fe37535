"""The ``governed-memory`` command line, driven through click's CliRunner against a
temporary SQLite database (and once through a real subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from importlib.metadata import version as dist_version
from pathlib import Path
from typing import Any

import governed_memory
import pytest
from click.testing import CliRunner, Result
from governed_memory.capabilities import Capabilities
from governed_memory.cli.common import HOME_ENV
from governed_memory.cli.main import cli
from governed_memory.converter import structure
from governed_memory.plugins import BLOCK_ENV
from governed_memory.records import DeleteResult, MemoryRecord, MemoryVersion
from governed_memory.scope import Scope

pytest.importorskip(
    "governed_memory_native.plugin",
    reason="the native provider (providers/governed_memory_native) is not importable yet",
)

ALICE = ["--tenant", "acme", "--project", "support", "--user", "alice"]
ALICE_SCOPE = Scope("acme", project_id="support", user_id="alice")

Run = Callable[..., Result]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(BLOCK_ENV, raising=False)
    monkeypatch.delenv(HOME_ENV, raising=False)
    monkeypatch.chdir(tmp_path)  # a forgotten --db never lands in the repository


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


@pytest.fixture
def run() -> Run:
    runner = CliRunner()

    def invoke(*args: str, code: int = 0) -> Result:
        result = runner.invoke(cli, list(args))
        assert result.exit_code == code, (
            f"exit {result.exit_code} != {code}\nstdout: {result.stdout}\n"
            f"stderr: {result.stderr}\nexception: {result.exception!r}"
        )
        return result

    return invoke


@pytest.fixture
def mem(run: Run, db: Path) -> Callable[..., Any]:
    """Run a data command against the temp database and parse its ``--json`` output."""

    def invoke(command: str, *args: str, scope: list[str] = ALICE) -> Any:
        return json.loads(run(command, "--db", str(db), *scope, *args, "--json").stdout)

    return invoke


@pytest.fixture
def existing_db(run: Run, db: Path) -> Path:
    """A database that exists (a record in another tenant), for commands that refuse to
    run on one that does not."""
    run("add", "--db", str(db), "--tenant", "elsewhere", "makes the file")
    return db


# -- help and version --------------------------------------------------------------------


def test_help_lists_every_command(run: Run) -> None:
    out = run("--help").stdout
    assert "Scoped, governed memory" in out
    for command in ("add", "get", "list", "search", "update", "delete", "history", "demo",
                    "providers"):
        assert command in out


@pytest.mark.parametrize("command", ["add", "get", "list", "search", "update", "delete",
                                     "history", "demo", "providers"])
def test_every_command_has_help(run: Run, command: str) -> None:
    assert "Usage:" in run(command, "--help").stdout


def test_version(run: Run) -> None:
    out = run("--version").stdout
    assert "governed-memory" in out
    assert governed_memory.__version__ in out
    assert dist_version("governed-memory") in out


def test_scope_flags_require_tenant(run: Run, db: Path) -> None:
    result = run("add", "--db", str(db), "content", code=2)
    assert "--tenant" in result.stderr


# -- providers ---------------------------------------------------------------------------


def test_providers_list_text(run: Run) -> None:
    out = run("providers", "list").stdout
    assert "native" in out
    assert "(plugin native)" in out
    assert "capabilities:" in out
    assert "max page size: 100" in out


def test_providers_list_json(run: Run) -> None:
    rows = json.loads(run("providers", "list", "--json").stdout)
    native = next(row for row in rows if row["name"] == "native")
    assert native["plugin"] == "native"
    assert native["description"]
    caps = structure(native["capabilities"], Capabilities)  # strict: exactly the fields
    assert caps.max_page_size == 100
    assert caps.history is True


def test_providers_list_respects_blocking(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BLOCK_ENV, "native")
    rows = json.loads(run("providers", "list", "--json").stdout)
    assert [row["name"] for row in rows if row["name"] == "native"] == []


# -- the record lifecycle ----------------------------------------------------------------


def test_add_get_list_search_update_delete_history(run: Run, mem: Callable[..., Any],
                                                   db: Path) -> None:
    added = mem("add", "Alice prefers dark mode in every editor", "--type", "preference",
                "--key", "ui.theme", "--metadata", '{"source": "chat", "n": 1}',
                "--importance", "0.8")
    record = structure(added, MemoryRecord)  # the JSON is the converter's exact form
    assert record.version == 1
    assert record.scope == ALICE_SCOPE
    assert record.scope_hash == ALICE_SCOPE.scope_hash
    assert record.key == "ui.theme"
    assert dict(record.metadata) == {"source": "chat", "n": 1}
    assert record.importance == 0.8
    assert record.memory_type.value == "preference"
    assert record.status.value == "active"
    rid, rev1 = record.id, record.revision

    other = mem("add", "The billing service ships on Fridays", "--type", "fact")
    assert other["id"] != rid

    got = mem("get", rid)
    assert (got["id"], got["revision"], got["version"]) == (rid, rev1, 1)
    assert mem("get", "--key", "ui.theme")["id"] == rid

    listed = mem("list")
    assert [item["id"] for item in listed["items"]] == [rid, other["id"]]
    assert listed["next_cursor"] is None
    assert [i["id"] for i in mem("list", "--type", "fact")["items"]] == [other["id"]]

    found = mem("search", "dark mode")
    assert found["hits"][0]["record"]["id"] == rid
    assert found["hits"][0]["rank"] == 1
    assert found["hits"][0]["explanation"]["signals"]

    updated = mem("update", rid, "Alice prefers dark mode, high contrast",
                  "--expected-revision", rev1)
    assert updated["id"] == rid
    assert updated["version"] == 2
    assert updated["revision"] != rev1
    assert updated["content"] == "Alice prefers dark mode, high contrast"
    assert updated["key"] == "ui.theme"  # untouched fields keep their value
    rev2 = updated["revision"]
    assert mem("get", rid)["revision"] == rev2

    stale = run("update", "--db", str(db), *ALICE, rid, "Alice prefers light mode",
                "--expected-revision", rev1, code=5)
    assert "conflict" in stale.stderr
    assert mem("get", rid)["version"] == 2  # nothing was written

    history = [structure(v, MemoryVersion) for v in mem("history", rid)]
    assert [v.record.version for v in history] == [1, 2]
    assert [v.operation.value for v in history] == ["add", "update"]
    assert history[0].record.revision == rev1
    assert history[1].record.revision == rev2

    stale_delete = run("delete", "--db", str(db), *ALICE, rid, "--expected-revision", rev1,
                       code=5)
    assert "conflict" in stale_delete.stderr

    deleted = structure(mem("delete", rid, "--expected-revision", rev2), DeleteResult)
    assert deleted.record_id == rid
    assert deleted.hard is False
    assert deleted.version == 3
    assert deleted.scope_hash == ALICE_SCOPE.scope_hash

    gone = run("get", "--db", str(db), *ALICE, rid, code=4)
    assert "not_found" in gone.stderr
    assert [item["id"] for item in mem("list")["items"]] == [other["id"]]
    assert rid not in [hit["record"]["id"] for hit in mem("search", "dark mode")["hits"]]

    tombstoned = mem("history", rid)
    assert [v["record"]["version"] for v in tombstoned] == [1, 2, 3]
    assert tombstoned[-1]["operation"] == "delete"
    assert tombstoned[-1]["record"]["status"] == "deleted"


def test_text_output(run: Run, db: Path) -> None:
    out = run("add", "--db", str(db), *ALICE, "plain text memory", "--key", "k").stdout
    assert "plain text memory" in out
    assert "version:   1" in out
    rid = next(line.split()[1] for line in out.splitlines() if line.startswith("id:"))
    assert rid in run("list", "--db", str(db), *ALICE).stdout
    assert "v1  add" in run("history", "--db", str(db), *ALICE, rid).stdout
    assert f"deleted {rid} (soft, tombstone v2)" in run("delete", "--db", str(db), *ALICE,
                                                       rid).stdout
    assert "(no records)" in run("list", "--db", str(db), *ALICE).stdout
    assert "(no matches)" in run("search", "--db", str(db), *ALICE, "plain").stdout


def test_hard_delete_removes_history(run: Run, mem: Callable[..., Any], db: Path) -> None:
    rid = mem("add", "ephemeral")["id"]
    assert mem("delete", rid, "--hard")["hard"] is True
    run("history", "--db", str(db), *ALICE, rid, code=4)
    run("get", "--db", str(db), *ALICE, rid, code=4)


def test_scopes_are_exact_and_isolated(run: Run, mem: Callable[..., Any], db: Path) -> None:
    rid = mem("add", "alice's secret")["id"]
    bob = ["--tenant", "acme", "--project", "support", "--user", "bob"]
    tenant_only = ["--tenant", "acme"]
    other_tenant = ["--tenant", "globex", "--project", "support", "--user", "alice"]
    for scope in (bob, tenant_only, other_tenant):
        run("get", "--db", str(db), *scope, rid, code=4)
        assert mem("list", scope=scope)["items"] == []
        assert mem("search", "secret", scope=scope)["hits"] == []
    # The tenant-level record is not visible from the user scope either.
    tenant_rid = mem("add", "tenant-wide note", scope=tenant_only)["id"]
    run("get", "--db", str(db), *ALICE, tenant_rid, code=4)
    assert [i["id"] for i in mem("list", scope=tenant_only)["items"]] == [tenant_rid]


def test_list_pages_with_cursor(run: Run, mem: Callable[..., Any], db: Path) -> None:
    ids = [mem("add", f"memory number {i}")["id"] for i in range(5)]
    first = mem("list", "--limit", "2")
    assert [i["id"] for i in first["items"]] == ids[:2]
    assert first["next_cursor"]
    second = mem("list", "--limit", "2", "--cursor", first["next_cursor"])
    assert [i["id"] for i in second["items"]] == ids[2:4]
    third = mem("list", "--limit", "2", "--cursor", second["next_cursor"])
    assert [i["id"] for i in third["items"]] == ids[4:]
    # A cursor is bound to its scope.
    refused = run("list", "--db", str(db), "--tenant", "acme", "--cursor", first["next_cursor"],
                  code=2)
    assert "validation" in refused.stderr


def test_idempotency_key(run: Run, mem: Callable[..., Any], db: Path) -> None:
    first = mem("add", "once", "--idempotency-key", "req-1")
    again = mem("add", "once", "--idempotency-key", "req-1")
    assert again["id"] == first["id"]
    assert again["revision"] == first["revision"]
    assert len(mem("list")["items"]) == 1
    clash = run("add", "--db", str(db), *ALICE, "different", "--idempotency-key", "req-1",
                code=5)
    assert "conflict" in clash.stderr


# -- errors and exit codes -----------------------------------------------------------------


UNKNOWN_ID = "01ZZZZZZZZZZZZZZZZZZZZZZZZ"


@pytest.mark.parametrize(
    "args",
    [
        ["get", UNKNOWN_ID],
        ["get", "--key", "no-such-key"],
        ["update", UNKNOWN_ID, "x"],
        ["delete", UNKNOWN_ID],
        ["history", UNKNOWN_ID],
    ],
    ids=["get", "get-key", "update", "delete", "history"],
)
def test_unknown_record_exits_4(run: Run, existing_db: Path, args: list[str]) -> None:
    result = run(args[0], "--db", str(existing_db), *ALICE, *args[1:], code=4)
    assert "not_found" in result.stderr
    assert "no database" not in result.stderr  # the record is missing, not the file


@pytest.mark.parametrize("command", ["add", "update"])
@pytest.mark.parametrize("metadata", ["not json", "[1, 2]", '"a string"', "{bad"])
def test_bad_metadata_is_a_usage_error(run: Run, mem: Callable[..., Any], existing_db: Path,
                                       command: str, metadata: str) -> None:
    db = existing_db
    target = ["content"] if command == "add" else [mem("add", "x")["id"]]
    result = run(command, "--db", str(db), *ALICE, *target, "--metadata", metadata, code=2)
    assert "--metadata" in result.stderr
    assert len(mem("list")["items"]) == (0 if command == "add" else 1)


@pytest.mark.parametrize(
    "args",
    [
        ["list", "--limit", "0"],
        ["list", "--limit", "101"],
        ["add", "x", "--importance", "2"],
        ["add", "   "],
        ["get"],
        ["search", "q", "--limit", "0"],
    ],
    ids=["limit-0", "limit-101", "importance", "blank-content", "get-nothing", "search-limit"],
)
def test_validation_errors_exit_2(run: Run, existing_db: Path, args: list[str]) -> None:
    result = run(args[0], "--db", str(existing_db), *ALICE, *args[1:], code=2)
    assert "validation" in result.stderr


def test_bad_type_choice_is_a_usage_error(run: Run, db: Path) -> None:
    assert "--type" in run("add", "--db", str(db), *ALICE, "x", "--type", "recipe",
                           code=2).stderr


@pytest.mark.parametrize("tenant", ["*", " ", "a\x00b"])
def test_invalid_scope_flag_exits_2(run: Run, db: Path, tenant: str) -> None:
    result = run("add", "--db", str(db), "--tenant", tenant, "x", code=2)
    assert "Invalid value for --tenant: scope.tenant_id" in result.stderr


def test_default_database_lives_under_home_env(run: Run, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv(HOME_ENV, str(home))
    run("add", *ALICE, "stored in the home db")
    assert (home / "memory.db").exists()
    out = json.loads(run("list", *ALICE, "--json").stdout)
    assert [i["content"] for i in out["items"]] == ["stored in the home db"]


# -- the installed console script ------------------------------------------------------


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in (BLOCK_ENV, HOME_ENV)}


def test_module_entry_point_in_subprocess() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "governed_memory.cli.main", "--help"],
        capture_output=True, text=True, timeout=60, env=_env(), check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Scoped, governed memory" in proc.stdout


def test_console_script_in_subprocess(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("governed-memory")
    if not script.exists():
        pytest.skip(f"console script not installed next to {sys.executable}")
    proc = subprocess.run([str(script), "--version"], capture_output=True, text=True,
                          timeout=60, env=_env(), check=False)
    assert proc.returncode == 0, proc.stderr
    assert governed_memory.__version__ in proc.stdout

    db = tmp_path / "sub.db"
    proc = subprocess.run(
        [str(script), "add", "--db", str(db), "--tenant", "acme", "from a subprocess",
         "--json"],
        capture_output=True, text=True, timeout=60, env=_env(), check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["content"] == "from a subprocess"
    missing = subprocess.run(
        [str(script), "get", "--db", str(db), "--tenant", "acme", UNKNOWN_ID],
        capture_output=True, text=True, timeout=60, env=_env(), check=False,
    )
    assert missing.returncode == 4
    assert "not_found" in missing.stderr
