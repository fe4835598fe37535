"""``governed-memory review list``: the review queue from the shell, under a profile that
holds web-sourced memories for review."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from governed_memory.cli.common import HOME_ENV
from governed_memory.cli.main import cli
from governed_memory.plugins import BLOCK_ENV

ALICE = ["--tenant", "acme", "--user", "alice"]
PROFILE = ["--profile", "chat-assistant@1.0.0"]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(BLOCK_ENV, raising=False)
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)


def run(db: Path, *args: str, code: int = 0) -> Result:
    words = 2 if args[0] == "review" else 1  # the options follow the (sub)command
    result = CliRunner().invoke(cli, [*args[:words], *PROFILE, "--db", str(db),
                                      *args[words:]], catch_exceptions=False)
    assert result.exit_code == code, (result.stdout, result.stderr)
    return result


def test_held_memories_are_listed_decided_and_gone(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    held = json.loads(run(db, "add", *ALICE, "read on a web page", "--source-type", "web",
                          "--source-id", "https://example.org", "--json").stdout)
    assert held["status"] == "pending_review"
    run(db, "add", *ALICE, "said in the chat")
    queue = json.loads(run(db, "review", "list", *ALICE, "--json").stdout)  # the queue
    assert [item["id"] for item in queue["items"]] == [held["id"]]
    assert held["id"] in run(db, "review", "list", *ALICE).stdout
    run(db, "approve", *ALICE, held["id"])
    assert "(no records)" in run(db, "review", "list", *ALICE).stdout
    assert "read on a web page" in run(db, "search", *ALICE, "web page").stdout
