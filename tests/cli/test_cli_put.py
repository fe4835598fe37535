"""``governed-memory put KEY CONTENT`` (the manager's ``put``) and ``search --cursor``.

The first put of a key creates the database and the record, the next is a version of
it, ``--expected-revision`` refuses a stale one as a conflict; a search's next cursor
gives its next page."""

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


def _json(*args: str, input: str | None = None) -> Any:
    return json.loads(invoke(*args, "--json", input=input).stdout)


def test_put_adds_then_versions_the_keyed_record(tmp_path: Path) -> None:
    db = str(tmp_path / "memory.db")
    first = _json("put", "--db", db, *ALICE, "timezone", "Europe/Paris")
    second = _json("put", "--db", db, *ALICE, "timezone", "-", input="Asia/Tokyo\n")
    assert (first["key"], first["version"]) == ("timezone", 1)
    assert (second["id"], second["version"], second["content"]) == (first["id"], 2,
                                                                    "Asia/Tokyo")
    invoke("put", "--db", db, *ALICE, "timezone", "UTC", "--expected-revision",
           first["revision"], code=5)  # conflict: the record has moved on
    got = _json("get", "--db", db, *ALICE, "--key", "timezone")
    assert got["content"] == "Asia/Tokyo"


def test_search_pages_with_cursor(tmp_path: Path) -> None:
    db = str(tmp_path / "memory.db")
    for n in range(3):
        invoke("add", "--db", db, *ALICE, f"green tea note {n}")
    first = _json("search", "--db", db, *ALICE, "green tea", "--limit", "2")
    assert len(first["hits"]) == 2 and first["next_cursor"]
    second = _json("search", "--db", db, *ALICE, "green tea", "--limit", "2", "--cursor",
                   first["next_cursor"])
    ids = [hit["record"]["id"] for page in (first, second) for hit in page["hits"]]
    assert len(ids) == len(set(ids)) == 3 and second["next_cursor"] is None
