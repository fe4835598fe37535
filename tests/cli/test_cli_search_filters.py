"""``governed-memory search`` takes the read-time filters: ``--visibility``,
``--source-type``, ``--sensitivity`` and ``--exclude-sensitivity`` (the last three
repeatable), applied before the top ``--limit``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_support import ALICE, invoke
from governed_memory.cli.common import HOME_ENV


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(HOME_ENV, raising=False)
    monkeypatch.chdir(tmp_path)


def _json(db: Path, *args: str, code: int = 0) -> Any:
    result = invoke(*args[:1], "--db", str(db), *ALICE, *args[1:], "--json", code=code)
    return json.loads(result.stdout) if code == 0 else result


def _ids(found: Any) -> list[str]:
    return [hit["record"]["id"] for hit in found["hits"]]


def test_search_filters_from_the_command_line(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    for _ in range(3):
        _json(db, "add", "kayak kayak kayak kayak", "--source-type", "conversation",
              "--metadata", '{"sensitivity": "restricted"}')
    tool = _json(db, "add", "a kayak rental price list from the booking tool",
                 "--source-type", "tool", "--metadata", '{"sensitivity": "restricted"}')
    public = _json(db, "add", "the kayak club meets by the river on sundays",
                   "--source-type", "conversation", "--metadata", '{"sensitivity": "public"}')
    assert _ids(_json(db, "search", "kayak", "--limit", "1", "--source-type", "tool",
                      "--source-type", "web")) == [tool["id"]]
    assert _ids(_json(db, "search", "kayak", "--limit", "1", "--sensitivity", "public")) == [
        public["id"]]
    assert _ids(_json(db, "search", "kayak", "--exclude-sensitivity", "restricted")) == [
        public["id"]]
    # What the command line writes is private: a search for shared memories finds none.
    assert _ids(_json(db, "search", "kayak", "--visibility", "shared")) == []
    assert len(_ids(_json(db, "search", "kayak", "--visibility", "private"))) == 5
    refused = _json(db, "search", "kayak", "--visibility", "public", code=2)
    assert "--visibility" in refused.stderr
