"""``add`` and ``update`` take the content the same way: a positional argument, or ``-``
to read it from stdin (one trailing newline dropped, the rest kept as is)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_support import ALICE, invoke
from governed_memory.cli.building import HOME_ENV
from governed_memory.plugins import BLOCK_ENV

pytest.importorskip("governed_memory_native.plugin")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(BLOCK_ENV, raising=False)
    monkeypatch.delenv(HOME_ENV, raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


def _json(*args: str, input: str | None = None) -> Any:
    return json.loads(invoke(*args, "--json", input=input).stdout)


def test_add_reads_stdin_for_a_dash(db: Path) -> None:
    added = _json("add", "--db", str(db), *ALICE, "-", input="from a pipe\n")
    assert added["content"] == "from a pipe"  # the pipe's newline is not content


def test_stdin_keeps_inner_lines_and_only_one_trailing_newline_goes(db: Path) -> None:
    text = "line one\n\n  line three  \n\n"
    added = _json("add", "--db", str(db), *ALICE, "-", input=text)
    assert added["content"] == "line one\n\n  line three  \n"


def test_update_takes_content_like_add(db: Path) -> None:
    record = _json("add", "--db", str(db), *ALICE, "Alice drinks tea")
    updated = _json("update", "--db", str(db), *ALICE, record["id"], "Alice drinks green tea",
                    "--expected-revision", record["revision"])
    assert (updated["content"], updated["version"]) == ("Alice drinks green tea", 2)
    piped = _json("update", "--db", str(db), *ALICE, record["id"], "-",
                  input="Alice drinks oolong\n")
    assert (piped["content"], piped["version"]) == ("Alice drinks oolong", 3)


def test_update_without_content_changes_only_the_fields_given(db: Path) -> None:
    record = _json("add", "--db", str(db), *ALICE, "unchanged text", "--importance", "0.2")
    updated = _json("update", "--db", str(db), *ALICE, record["id"], "--importance", "0.9")
    assert (updated["content"], updated["importance"]) == ("unchanged text", 0.9)


@pytest.mark.parametrize("command", ["add", "update"])
def test_empty_stdin_is_a_usage_error_and_writes_nothing(db: Path, command: str) -> None:
    record = _json("add", "--db", str(db), *ALICE, "already here")
    target = [] if command == "add" else [record["id"]]
    result = invoke(command, "--db", str(db), *ALICE, *target, "-", input="", code=2)
    assert "stdin was empty" in result.stderr
    listed = _json("list", "--db", str(db), *ALICE)
    assert [(i["content"], i["version"]) for i in listed["items"]] == [("already here", 1)]


def test_update_no_longer_has_a_content_option(db: Path) -> None:
    record = _json("add", "--db", str(db), *ALICE, "x")
    result = invoke("update", "--db", str(db), *ALICE, record["id"], "--content", "y", code=2)
    assert "No such option" in result.stderr


def test_add_help_says_how_content_is_given() -> None:
    out = invoke("add", "--help").stdout
    assert "CONTENT" in out and "stdin" in out
    assert "[CONTENT]" in invoke("update", "--help").stdout


def test_event_times_are_iso_or_epoch_and_bound_the_search(db: Path) -> None:
    lisbon = _json("add", "--db", str(db), *ALICE, "Alice flew to Lisbon",
                   "--occurred-at", "2026-03-14T09:30:00Z")
    assert lisbon["occurred_at"] == 1_773_480_600.0
    oslo = _json("add", "--db", str(db), *ALICE, "Alice flew to Oslo",
                 "--occurred-at", "1777716000")
    assert oslo["occurred_at"] == 1_777_716_000.0
    march = _json("search", "--db", str(db), *ALICE, "flew", "--before", "2026-04-01")
    assert [hit["record"]["id"] for hit in march["hits"]] == [lisbon["id"]]
    may = _json("search", "--db", str(db), *ALICE, "flew", "--since", "2026-04-01T00:00:00+00:00")
    assert [hit["record"]["id"] for hit in may["hits"]] == [oslo["id"]]
    then = _json("search", "--db", str(db), *ALICE, "flew", "--as-of", "2026-04-01")
    assert [hit["record"]["id"] for hit in then["hits"]] == [lisbon["id"]]
    moved = _json("update", "--db", str(db), *ALICE, oslo["id"], "--occurred-at", "2026-01-01")
    assert moved["occurred_at"] == 1_767_225_600.0
    refused = invoke("search", "--db", str(db), *ALICE, "flew", "--since", "yesterday", code=2)
    assert "not a time" in refused.output and "ISO 8601" in refused.output
    for impossible in ("nan", "inf", "1e400"):
        invoke("search", "--db", str(db), *ALICE, "flew", "--since", impossible, code=2)
    # A time ago counts back from now, as the audit commands take it.
    recent = _json("search", "--db", str(db), *ALICE, "flew", "--since", "3650 days ago")
    assert {hit["record"]["id"] for hit in recent["hits"]} == {lisbon["id"], oslo["id"]}
    assert _json("search", "--db", str(db), *ALICE, "flew", "--since", "2d")["hits"] == []
