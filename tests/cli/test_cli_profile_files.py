"""``--profile`` takes a TOML file as well as a registered reference, on a command or
on the root group (or ``$GOVERNED_MEMORY_PROFILE``), through the same loader as
``profiles validate``; ``worker`` and ``reindex`` work under a profile with an
embedder and say clearly what is missing under one without."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import ALICE, HYBRID_PROFILE, LEXICAL_PROFILE, invoke
from governed_memory.cli import building
from governed_memory.cli.building import HOME_ENV, PROFILE_ENV
from governed_memory.plugins import BLOCK_ENV

pytest.importorskip("governed_memory_native.plugin")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in (BLOCK_ENV, HOME_ENV, PROFILE_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _profile_events(home: Path) -> set[str]:
    from governed_memory.audit import iter_entries

    return {str(entry.event.get("profile_id")) for entry in iter_entries([home / "audit"])}


def test_a_toml_file_builds_the_manager_of_a_data_command(tmp_path: Path) -> None:
    team = _write(tmp_path / "team.toml", LEXICAL_PROFILE.format(path_line=""))
    db = tmp_path / "data" / "memory.db"
    added = json.loads(invoke("add", "--profile", str(team), "--db", str(db), *ALICE,
                              "Alice prefers dark mode", "--json").stdout)
    found = json.loads(invoke("search", "--profile", str(team), "--db", str(db), *ALICE,
                              "dark mode", "--json").stdout)
    assert [hit["record"]["id"] for hit in found["hits"]] == [added["id"]]
    assert _profile_events(db.parent) == {"team-lexical"}  # the file's rules governed both
    # and its policies hold: the file refuses credentials
    refused = invoke("add", "--profile", str(team), "--db", str(db), *ALICE,
                     "token ghp_" + "Zq4" * 12, code=3)
    assert "secret-guard" in refused.stderr


def test_the_root_option_and_the_environment_name_the_profile_for_every_command(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    team = _write(tmp_path / "team.toml", LEXICAL_PROFILE.format(path_line=""))
    db = tmp_path / "memory.db"
    invoke("--profile", str(team), "add", "--db", str(db), *ALICE, "via the root option")
    monkeypatch.setenv(PROFILE_ENV, str(team))
    invoke("list", "--db", str(db), *ALICE)
    # a command's own --profile wins over the root's and the environment's
    invoke("--profile", str(team), "list", "--profile", "local@1.0.0", "--db", str(db), *ALICE)
    assert _profile_events(tmp_path) == {"team-lexical", "local"}


def test_a_path_in_the_profile_is_the_database_when_no_db_is_given(tmp_path: Path) -> None:
    db = tmp_path / "team" / "store.db"
    team = _write(tmp_path / "team.toml",
                  LEXICAL_PROFILE.format(path_line=f"path = {json.dumps(str(db))}"))
    invoke("search", "--profile", str(team), *ALICE, "anything", code=4)  # nothing there yet
    assert not db.parent.exists()
    invoke("add", "--profile", str(team), *ALICE, "kept where the profile says")
    assert db.is_file()
    assert (db.parent / "audit").is_dir()  # the trail sits beside that database
    assert not (tmp_path / ".governed-memory").exists()


def test_a_profile_file_with_problems_names_each_by_its_path(tmp_path: Path) -> None:
    broken = _write(tmp_path / "broken.toml", LEXICAL_PROFILE.format(path_line="")
                    + '\n[retrieval]\ntop_k = "many"\nbogus = 1\n')
    result = invoke("add", "--profile", str(broken), "--db", str(tmp_path / "m.db"), *ALICE,
                    "x", code=7)
    assert "error (configuration)" in result.stderr
    assert "invalid profile" in result.stderr
    assert "retrieval.top_k" in result.stderr
    assert "retrieval.bogus" in result.stderr
    assert not (tmp_path / "m.db").exists()


def test_a_missing_profile_file_and_an_unknown_reference_are_configuration_errors(
        tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "team.toml"
    result = invoke("add", "--profile", str(missing), "--db", str(tmp_path / "m.db"), *ALICE,
                    "x", code=7)
    assert str(missing) in result.stderr
    unknown = invoke("add", "--profile", "nosuch@1.0.0", "--db", str(tmp_path / "m.db"),
                     *ALICE, "x", code=7)
    assert "unknown profile nosuch@1.0.0" in unknown.stderr
    assert "local@1.0.0" in unknown.stderr  # the registered ones are listed


def test_worker_and_reindex_run_under_a_profile_with_an_embedder(tmp_path: Path) -> None:
    pytest.importorskip("numpy")
    team = _write(tmp_path / "hybrid.toml", HYBRID_PROFILE)
    db = tmp_path / "memory.db"
    for text in ("green tea", "black coffee", "oolong tea"):
        invoke("add", "--profile", str(team), "--db", str(db), *ALICE, text)
    status = json.loads(invoke("outbox", "status", "--profile", str(team), "--db", str(db),
                               "--json").stdout)["status"]
    assert (status["pending"], status["missing_vectors"]) == (3, 3)
    worked = invoke("worker", "--profile", str(team), "--db", str(db), "--once",
                    "--worker-id", "w1")
    assert "worker w1 stopped: leased 3, indexed 3" in worked.stdout
    reindexed = invoke("--profile", str(team), "reindex", "--db", str(db))
    assert "queued 0 record(s)" in reindexed.stdout  # every record has its vector
    status = json.loads(invoke("outbox", "status", "--profile", str(team), "--db", str(db),
                               "--json").stdout)["status"]
    assert status["vectors"] == {"hashing@fh1-w1-c3/32": 3}
    hits = json.loads(invoke("search", "--profile", str(team), "--db", str(db), *ALICE,
                             "tea", "--json").stdout)["hits"]
    assert {s["name"] for hit in hits for s in hit["explanation"]["signals"]} >= {
        "vector_cosine"}


def test_without_an_embedder_reindex_says_what_is_missing_and_worker_only_maintains(
        tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    invoke("add", "--db", str(db), *ALICE, "a lexical memory")
    refused = invoke("reindex", "--db", str(db), code=7)
    assert "profile local@1.0.0 configures no embedder ([stores.embedder])" in refused.stderr
    assert "--profile" in refused.stderr
    worked = invoke("worker", "--db", str(db), "--once")
    assert "configures no embedder" in worked.stderr
    assert "running maintenance only" in worked.stderr
    assert "stopped: leased 0" in worked.stdout


def test_serve_builds_its_manager_with_the_cli_function(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    serve = pytest.importorskip("governed_memory_service.serve")
    calls: list[tuple[str, Path | None]] = []

    def spy(profile: str, db: Path | None, **kwargs: object) -> str:
        calls.append((profile, db))
        return "the manager"

    monkeypatch.setattr(building, "build_manager", spy)
    _write(tmp_path / "team.toml", LEXICAL_PROFILE.format(path_line=""))
    assert serve.build_manager("team.toml", tmp_path / "m.db") == "the manager"
    assert calls == [("team.toml", tmp_path / "m.db")]
