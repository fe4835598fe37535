"""``governed-memory remember --transcript FILE.json``: a conversation read by the
profile's language model (here the OpenAI-compatible adapter against a local server
that answers like a model), each fact decided against the scope, the decisions printed,
and the writes in the trail; without a model, a configuration refusal naming the
setting."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cli_support import ALICE, invoke
from governed_memory.cli.building import HOME_ENV, PROFILE_ENV
from governed_memory.plugins import BLOCK_ENV

pytest.importorskip("httpx")

PROFILE = """\
spec_version = 1
id = "team-remember"
version = "1.0.0"

[provider]
name = "native"

[provider.config]
backend = "sqlite"

[write]
review_source_types = ["web", "tool"]

[policies]
enabled = ["permissions", "write-rules", "secret-guard", "write-review"]

[stores.language_model]
kind = "openai"
config = {{ model = "memory-test", base_url = "{url}", api_key_env = "GM_TEST_NO_SUCH_KEY" }}
"""

FACTS = {"green tea": ("Alice prefers green tea", "preference"),
         "Lyon": ("Alice lives in Lyon", "fact"),
         "office moved": ("The office moved to Berlin", "fact")}


def answer(system: str, user: str) -> dict[str, Any]:
    """What the model says: the facts each numbered message states; nothing to
    reconcile (every close memory is left alone)."""
    if system.startswith("Task: remember"):
        return {"facts": [{"content": fact, "type": kind, "importance": 0.7,
                           "confidence": 0.9, "turns": [int(n)]}
                          for n, text in re.findall(r"^\[(\d+)\] \w+: (.*)$", user, re.M)
                          for phrase, (fact, kind) in FACTS.items() if phrase in text]}
    return {"decisions": []}


@pytest.fixture
def model_server() -> Iterator[tuple[str, list[str]]]:
    tasks: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            return None

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            system, user = (m["content"] for m in body["messages"])
            tasks.append(system.split("\n", 1)[0])
            content = json.dumps(answer(system, user))
            data = json.dumps({"choices": [{"index": 0, "message": {
                "role": "assistant", "content": content}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02},
                              daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", tasks
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in (BLOCK_ENV, PROFILE_ENV, "GM_TEST_NO_SUCH_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)


def _transcript(path: Path, messages: Any) -> str:
    path.write_text(json.dumps(messages), encoding="utf-8")
    return str(path)


CHAT = [{"role": "user", "content": "I prefer green tea", "turn_id": "t1"},
        {"role": "assistant", "content": "Noted.", "turn_id": "t2"},
        {"role": "user", "content": "I live in Lyon", "turn_id": "t3"},
        {"role": "tool", "content": "The page says the office moved", "turn_id": "t4"}]


def test_a_transcript_becomes_memories_and_a_rerun_writes_nothing(
        tmp_path: Path, model_server: tuple[str, list[str]]) -> None:
    url, tasks = model_server
    profile = tmp_path / "team.toml"
    profile.write_text(PROFILE.format(url=url), encoding="utf-8")
    db = str(tmp_path / "memory.db")
    chat = _transcript(tmp_path / "chat.json", CHAT)
    common = ["--profile", str(profile), "--db", db, *ALICE]
    shown = invoke("remember", *common, "--transcript", chat).stdout
    assert re.search(r"^added\s+\S+\s+Alice prefers green tea$", shown, re.M)
    assert re.search(r"^held_for_review\s+\S+\s+The office moved to Berlin$", shown, re.M)
    assert "3 facts (added 2, held_for_review 1); 1 model calls (openai:memory-test)" in shown
    assert tasks == ["Task: remember"]
    again = json.loads(invoke("remember", *common, "--transcript", chat, "--json").stdout)
    assert [d["decision"] for d in again["decisions"]] == [
        "unchanged", "unchanged", "held_for_review"]
    assert again["decisions"][1]["source_turn_ids"] == ["t3"]
    listed = json.loads(invoke("list", *common, "--json").stdout)
    assert sorted(r["content"] for r in listed["items"]) == ["Alice lives in Lyon",
                                                              "Alice prefers green tea"]
    assert {r["provenance"]["source_id"] for r in listed["items"]} == {"t1", "t3"}
    # From stdin too, as a {"messages": [...]} body.
    piped = invoke("remember", *common, "--transcript", "-", "--json",
                   input=json.dumps({"messages": CHAT[:1]}))
    assert [d["decision"] for d in json.loads(piped.stdout)["decisions"]] == ["unchanged"]
    # Every write is in the trail.
    from governed_memory.audit import iter_entries

    events = [entry.event for entry in iter_entries([tmp_path / "audit"])]
    adds = [e for e in events if e["type"] == "memory.write.committed"
            and e["operation"] == "add"]
    assert len({e["record_ids"][0] for e in adds}) == 3
    assert all("green tea" not in json.dumps(e) for e in events)


def test_without_a_model_the_command_names_the_setting(tmp_path: Path) -> None:
    chat = _transcript(tmp_path / "chat.json", CHAT)
    result = invoke("remember", "--db", str(tmp_path / "m.db"), *ALICE,
                    "--transcript", chat, code=7)
    assert "[stores.language_model]" in result.stderr


def test_a_transcript_that_does_not_read_is_a_usage_error(
        tmp_path: Path, model_server: tuple[str, list[str]]) -> None:
    url, tasks = model_server
    profile = tmp_path / "team.toml"
    profile.write_text(PROFILE.format(url=url), encoding="utf-8")
    common = ["--profile", str(profile), "--db", str(tmp_path / "m.db"), *ALICE]
    for text in ("not json", '{"turns": []}', '"a string"'):
        (tmp_path / "bad.json").write_text(text, encoding="utf-8")
        result = invoke("remember", *common, "--transcript", str(tmp_path / "bad.json"),
                        code=2)
        assert "--transcript" in result.stderr
    invoke("remember", *common, "--transcript", str(tmp_path / "missing.json"), code=2)
    bad = _transcript(tmp_path / "bad.json", [{"role": "boss", "content": "x"}])
    result = invoke("remember", *common, "--transcript", bad, code=2)
    assert "messages[0].role" in result.stderr
    assert tasks == []
