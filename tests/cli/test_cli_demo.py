"""``governed-memory demo`` shows the product under the chat-assistant profile: a
credential refused, contact details redacted, a web memory held for review and
approved, scope isolation, compare-and-set, erasure with its receipt, and the
hash-chained trail verified; ids in full; a used directory refused."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from cli_support import invoke
from governed_memory.audit import iter_entries, verify_trail
from governed_memory.cli.building import HOME_ENV
from governed_memory.cli.demo import DEMO_ID, FAKE_TOKEN
from governed_memory.plugins import BLOCK_ENV
from governed_memory.profiles import load_profile

pytest.importorskip("governed_memory_native.plugin")

RECORD_ID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b")  # a time-sortable id, whole


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(BLOCK_ENV, raising=False)
    monkeypatch.delenv(HOME_ENV, raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    directory = tmp_path_factory.mktemp("demo") / "d"
    return directory, invoke("demo", "--dir", str(directory)).stdout


def test_it_runs_under_a_written_variant_of_chat_assistant(demo: tuple[Path, str]) -> None:
    directory, out = demo
    profile = directory / f"{DEMO_ID}-1.0.0.toml"
    spec = load_profile(profile)
    assert spec.key == f"{DEMO_ID}@1.0.0"
    assert spec.privacy.secret_guard.value == "reject" and spec.privacy.pii_redaction
    assert "pii-redaction" in spec.policies.enabled
    assert f"profile:  {spec.key}  revision {spec.revision}" in out
    assert "chat-assistant@1.0.0 with:" in out
    assert f"written to {profile}" in out
    # the file is an ordinary profile: the CLI validates it
    assert f"ok: {spec.key}" in invoke("profiles", "validate", str(profile)).stdout


def test_it_shows_each_governance_step(demo: tuple[Path, str]) -> None:
    _, out = demo
    assert "[REDACTED:email]" in out and "[REDACTED:phone]" in out
    assert "(policy_denied): denied by policy: secret-guard: secret detected: github_token" in out
    assert "is pending_review" in out
    assert "before review: 0 hit(s)" in out
    assert "approved by svc:moderator: active, v2; the search now finds" in out
    assert out.count("(scope_denied)") == 2
    assert "(conflict): expected_revision is stale" in out
    assert re.search(r"receipt sha256:[0-9a-f]{64}", out)
    assert re.search(r"request op_\S+: .*records 3", out)
    assert "is gone; bob's memories stay: 1 record(s)" in out


def test_ids_are_printed_whole(demo: tuple[Path, str]) -> None:
    _, out = demo
    assert "…" not in out
    ids = set(RECORD_ID.findall(out))
    assert len(ids) >= 4  # alice's three memories and bob's
    table = out.split("== 7.")[1]
    assert ids & set(RECORD_ID.findall(table)) == ids  # each one whole in the trail table


def test_the_trail_it_wrote_verifies_and_holds_no_content(demo: tuple[Path, str]) -> None:
    directory, out = demo
    trail = directory / "audit"
    verification = verify_trail([trail])
    assert verification.ok
    assert f"{verification.entries} entries chained from the genesis" in out
    assert f"head {verification.head}" in out
    types = {entry.event["type"] for entry in iter_entries([trail])}
    assert {"memory.write.rejected", "memory.read.rejected", "memory.erasure.receipt",
            "memory.write.committed"} <= types
    raw = "".join(path.read_text(encoding="utf-8") for path in trail.glob("*.jsonl"))
    for text in ("dark mode", "alice@example.com", "billing portal", FAKE_TOKEN):
        assert text not in raw
    checked = invoke("audit", "verify", str(trail)).stdout  # exit 0: the CLI agrees
    assert checked.startswith(f"OK chain {verification.chain_id}: {verification.entries} entries")


def test_the_credential_and_the_contact_details_never_reach_the_database(
        demo: tuple[Path, str]) -> None:
    directory, _ = demo
    stored = b"".join(path.read_bytes() for path in directory.glob("memory.db*"))
    assert FAKE_TOKEN.encode() not in stored
    assert b"alice@example.com" not in stored
    assert b"555 0100" not in stored


def test_a_used_directory_is_refused(demo: tuple[Path, str]) -> None:
    directory, _ = demo
    before = (directory / "memory.db").stat().st_size
    result = invoke("demo", "--dir", str(directory), code=2)
    assert "exists" in result.stderr and "fresh directory" in result.stderr
    assert (directory / "memory.db").stat().st_size == before
