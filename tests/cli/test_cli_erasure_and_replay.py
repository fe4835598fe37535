"""``delete-user``, ``delete-all``, ``purge-expired`` and ``replay`` from the shell: each
is the manager's governed operation, printing its receipt or result (``--json`` too)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from governed_memory.cli.common import HOME_ENV
from governed_memory.cli.main import cli
from governed_memory.plugins import BLOCK_ENV

ALICE = ["--tenant", "acme", "--user", "alice"]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(BLOCK_ENV, raising=False)
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)


def run(db: Path, *args: str, code: int = 0, stdin: str | None = None) -> Result:
    result = CliRunner().invoke(cli, [args[0], "--db", str(db), *args[1:]], input=stdin,
                                catch_exceptions=False)
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result


def as_json(result: Result) -> Any:
    return json.loads(result.stdout)


def test_delete_user_prints_a_receipt_that_counts_everything(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    for text in ("likes tea", "works remotely"):
        run(db, "add", *ALICE, text)
    run(db, "add", "--tenant", "acme", "--user", "bob", "bob's note")
    receipt = as_json(run(db, "delete-user", "--tenant", "acme", "--user", "alice", "--yes",
                          "--json"))
    assert receipt["counts"]["records"] == 2 and receipt["user_id"] == "alice"
    assert receipt["receipt_hash"].startswith("sha256:")
    text = run(db, "delete-user", "--tenant", "acme", "--user", "alice", "--yes").stdout
    assert "records 0" in text and "receipt sha256:" in text  # a repeat finds nothing left
    assert "(no records)" in run(db, "list", *ALICE).stdout
    assert "bob's note" in run(db, "list", "--tenant", "acme", "--user", "bob").stdout


def test_destructive_commands_ask_first(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    run(db, "add", *ALICE, "likes tea")
    run(db, "delete-user", "--tenant", "acme", "--user", "alice", code=1, stdin="n\n")
    run(db, "delete-all", *ALICE, code=1, stdin="n\n")
    assert "likes tea" in run(db, "list", *ALICE).stdout
    assert "erased 1 record" in run(db, "delete-all", *ALICE, stdin="y\n").stdout


def test_purge_expired_walks_every_page(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    for n in range(3):
        run(db, "add", *ALICE, f"short-lived {n}", "--ttl", "0.2")
    run(db, "add", *ALICE, "kept")
    time.sleep(0.3)
    result = as_json(run(db, "purge-expired", *ALICE, "--limit", "2", "--json"))
    assert result == {"purged": 3, "pages": 3}  # 4 records, 2 a page, then an empty one
    assert "kept" in run(db, "list", *ALICE).stdout


def test_replay_prints_what_a_search_returned(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    added = as_json(run(db, "add", *ALICE, "likes green tea", "--json"))
    found = as_json(run(db, "search", *ALICE, "tea", "--json"))
    snapshot = found["snapshot_id"]
    assert "snapshot: snap_" in run(db, "search", *ALICE, "tea").stdout
    run(db, "update", *ALICE, added["id"], "likes black coffee")
    replayed = as_json(run(db, "replay", "--tenant", "acme", snapshot, "--json"))
    assert [hit["record"]["content"] for hit in replayed["hits"]] == ["likes green tea"]
    assert "likes green tea" in run(db, "replay", "--tenant", "acme", snapshot).stdout
    run(db, "replay", "--tenant", "acme", "--user", "bob", snapshot, code=3)  # not his scope
    run(db, "replay", "--tenant", "globex", snapshot, code=4)  # another tenant: not found
