"""``governed-memory blocks show|append|replace|rethink|history``: a team's profile file
declares the blocks and a SQLite block store; each command is one governed call as the
tenant's operator, in the trail and content-free there; an edit is durable (the next
invocation, another process, reads it), compare-and-set with ``--expected-version``
(exit 5), bounded by the block's limit (exit 2); and a profile without blocks is a
configuration error (exit 7) that names what to declare and creates nothing."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cli_support import ALICE, child_env, invoke, script
from governed_memory.audit import iter_entries, verify_trail
from governed_memory.cli.building import HOME_ENV, PROFILE_ENV
from governed_memory.plugins import BLOCK_ENV

pytest.importorskip("governed_memory_native.plugin")

PROFILE = """\
spec_version = 1
id = "team-agent"
version = "1.0.0"

[provider]
name = "native"

[provider.config]
backend = "sqlite"

[stores.blocks]
kind = "sqlite"
config = {{ path = "{path}" }}

[blocks.persona]
limit = 200
description = "Who the assistant is"
initial = "I am Sam, a travel assistant."
level = "session"

[blocks.human]
limit = 40
description = "What we know about the user"
"""
SESSION = [*ALICE, "--session", "s1"]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in (BLOCK_ENV, PROFILE_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def profile(tmp_path: Path) -> str:
    path = tmp_path / "agent.toml"
    path.write_text(PROFILE.format(path=tmp_path / "home" / "blocks.db"), encoding="utf-8")
    return str(path)


def blocks(profile: str, verb: str, *args: str, code: int = 0,
           input: str | None = None) -> Any:
    """``governed-memory blocks VERB --profile P ARGS``; its ``--json`` output parsed
    when the command succeeds and asked for it."""
    result = invoke("blocks", verb, "--profile", profile, *args, code=code, input=input)
    return json.loads(result.stdout) if code == 0 and "--json" in args else result


def _events(tmp_path: Path) -> list[dict[str, Any]]:
    return [entry.event for entry in iter_entries([tmp_path / "home" / "audit"])]


def test_edits_are_durable_and_each_command_is_a_governed_event(profile: str,
                                                                 tmp_path: Path) -> None:
    appended = blocks(profile, "append", *ALICE, "human", "Name: Alice", "--json")
    assert (appended["version"], appended["value"], appended["chars"]) == (1, "Name: Alice", 11)
    first = blocks(profile, "show", *SESSION, "--json")
    assert [(b["name"], b["version"], b["value"], b["chars"], b["limit"])
            for b in first["blocks"]] == [
        ("persona", 0, "I am Sam, a travel assistant.", 29, 200),
        ("human", 1, "Name: Alice", 11, 40)]
    replaced = blocks(profile, "replace", *ALICE, "human", "Alice", "Ali",
                      "--expected-version", "1", "--json")
    assert (replaced["version"], replaced["value"]) == (2, "Name: Ali")
    (tmp_path / "persona.txt").write_text("I am Sam.\nI plan trips.\n", encoding="utf-8")
    rethought = blocks(profile, "rethink", *SESSION, "persona", "--from-file",
                       str(tmp_path / "persona.txt"), "--json")
    assert (rethought["version"], rethought["value"]) == (1, "I am Sam.\nI plan trips.")
    piped = blocks(profile, "append", *ALICE, "human", "-", "--json", input="Likes tea\n")
    assert piped["value"] == "Name: Ali\nLikes tea"

    # Another process, reading the block store the earlier invocations wrote.
    shown = subprocess.run(
        [str(script()), "blocks", "show", "--profile", profile, *SESSION, "--json"],
        capture_output=True, text=True, timeout=120, check=False,
        env=child_env(**{HOME_ENV: str(tmp_path / "home")}))
    assert shown.returncode == 0, shown.stderr
    assert [(b["name"], b["version"], b["value"]) for b in json.loads(shown.stdout)["blocks"]
            ] == [("persona", 1, "I am Sam.\nI plan trips."),
                  ("human", 3, "Name: Ali\nLikes tea")]

    history = blocks(profile, "history", *ALICE, "human", "--json")
    assert [(v["version"], v["edit"]) for v in history["versions"]] == [
        (3, "append"), (2, "replace"), (1, "append")]
    page = blocks(profile, "history", *ALICE, "human", "--limit", "1",
                  "--before-version", "3", "--json")
    assert [(v["version"], v["value"]) for v in page["versions"]] == [(2, "Name: Ali")]
    text = blocks(profile, "history", *ALICE, "human", "--limit", "1").stdout
    assert text.startswith("v3  append") and "    Likes tea" in text

    events = _events(tmp_path)
    done = [(e["operation"], e["type"]) for e in events
            if e["type"] in ("memory.read.completed", "memory.write.committed")]
    assert done.count(("edit_block", "memory.write.committed")) == 4
    assert ("read_blocks", "memory.read.completed") in done  # show, and each edit's read
    assert done.count(("block_history", "memory.read.completed")) == 3
    assert {e["principal_id"] for e in events if e["operation"] in (
        "read_blocks", "edit_block", "block_history")} == {f"cli:{_user()}"}
    trail = json.dumps(events)
    assert "Alice" not in trail and "plan trips" not in trail, "the trail is content-free"
    assert verify_trail([tmp_path / "home" / "audit"]).ok


def _user() -> str:
    import os

    return os.environ.get("USER") or "operator"


def test_a_stale_version_and_an_edit_past_the_limit_change_nothing(profile: str) -> None:
    blocks(profile, "append", *ALICE, "human", "one")
    stale = blocks(profile, "rethink", *ALICE, "human", "lost", "--expected-version", "0",
                   code=5)
    assert "error (conflict): block 'human' is at version 1, not 0" in stale.stderr
    over = blocks(profile, "append", *ALICE, "human", "x" * 40, code=2)
    assert "error (validation): value would be 44 characters" in over.stderr
    assert "(4 over)" in over.stderr
    absent = blocks(profile, "replace", *ALICE, "human", "two", "three", code=2)
    assert "old does not occur in the block" in absent.stderr
    undeclared = blocks(profile, "append", *ALICE, "notes", "x", code=4)
    assert "declared: persona, human" in undeclared.stderr
    (human,) = blocks(profile, "show", *ALICE, "--name", "human", "--json")["blocks"]
    assert (human["version"], human["value"]) == (1, "one")
    # An empty block on purpose; an empty pipe is refused, not taken for that.
    assert blocks(profile, "rethink", *ALICE, "human", "", "--json")["value"] == ""
    refused = blocks(profile, "rethink", *ALICE, "human", "-", code=2, input="")
    assert "stdin was empty" in refused.stderr
    both = blocks(profile, "rethink", *ALICE, "human", "x", "--from-file", "f.txt", code=2)
    assert "not both" in both.stderr


def test_show_prints_each_block_with_its_size_and_level(profile: str) -> None:
    blocks(profile, "append", *ALICE, "human", "Name: Alice")
    # Without a session the session-level persona is not addressable: the user's only.
    alone = blocks(profile, "show", *ALICE).stdout
    assert alone.startswith("human  v1  11/40 chars  (updated ")
    assert "  What we know about the user\n    Name: Alice" in alone
    both = blocks(profile, "show", *SESSION).stdout
    assert both.startswith("persona  v0  29/200 chars  (the profile's initial text)")


def test_a_profile_without_blocks_is_a_configuration_error(tmp_path: Path) -> None:
    for verb, args in (("show", ()), ("append", ("human", "x")),
                       ("rethink", ("human", "x")), ("history", ("human",))):
        result = invoke("blocks", verb, *ALICE, *args, code=7)
        assert "[stores.blocks]" in result.stderr and "[blocks.<name>]" in result.stderr
        assert "local@1.0.0 declares no memory blocks" in result.stderr
    assert not (tmp_path / "home").exists(), "refused before anything was built"


def test_reads_refuse_a_missing_database_and_edits_create_it(profile: str,
                                                             tmp_path: Path) -> None:
    db = tmp_path / "elsewhere" / "m.db"
    for verb, args in (("show", ()), ("history", ("human",))):
        result = blocks(profile, verb, "--db", str(db), *ALICE, *args, code=4)
        assert f"no database at {db}" in result.stderr
    assert not db.parent.exists()
    blocks(profile, "append", "--db", str(db), *ALICE, "human", "first")
    assert db.is_file()
    assert blocks(profile, "history", "--db", str(db), *ALICE, "human",
                  "--json")["versions"][0]["value"] == "first"


def test_delete_user_erases_the_users_blocks_with_their_memories(profile: str) -> None:
    blocks(profile, "append", *ALICE, "human", "Name: Alice")
    blocks(profile, "append", *SESSION, "persona", "for Alice")
    erased = invoke("delete-user", "--profile", profile, "--tenant", "acme", "--user",
                    "alice", "--yes", "--json")
    body = json.loads(erased.stdout)
    assert body["block_versions_removed"] == 2 and body["user_id"] == "alice"
    shown = blocks(profile, "show", *SESSION, "--json")
    assert [b["version"] for b in shown["blocks"]] == [0, 0]
    text = invoke("delete-user", "--profile", profile, "--tenant", "acme", "--user",
                  "alice", "--yes")
    assert "memory-block versions erased: 0" in text.stdout
