"""``governed-memory audit ... --store DSN --schema S`` (or a ``postgresql://`` TRAIL):
verify, checkpoint, prove, consistency, query and report read the trail straight from
PostgreSQL; ``export`` writes the files the file tools take; an altered row is BROKEN
(exit 1), a schema without a trail is "no trail here" (4), a store that cannot be
reached exits 9, and arguments that cannot go together exit 2."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from actors import ALICE, ALICE_SCOPE
from click.testing import CliRunner, Result
from governed_memory import GovernedMemoryManager
from governed_memory.cli.main import cli
from governed_memory.sinks import build_sinks
from postgres_support import POSTGRES_DSN, drop_schemas, postgres_config, require_postgres_package
from trail_support import execute, trail_profile

require_postgres_package()

ADDS = 12


def run(*args: str | Path, code: int = 0) -> Result:
    result = CliRunner().invoke(cli, ["audit", *map(str, args)])
    assert result.exit_code == code, (
        f"exit {result.exit_code} != {code}\nstdout: {result.stdout}\n"
        f"stderr: {result.stderr}\nexception: {result.exception!r}")
    return result


async def _record(config: dict[str, object]) -> None:
    spec = trail_profile()
    async with GovernedMemoryManager.from_profile(
            spec, sinks=build_sinks(spec, provider_config_overrides=config),
            provider_config_overrides=config) as manager:
        for n in range(ADDS):
            await manager.add(ALICE, ALICE_SCOPE, f"note {n}")


@pytest.fixture(scope="module", autouse=True)
def _schemas() -> Iterator[None]:
    yield
    drop_schemas()


@pytest.fixture
def schema(tmp_path: Path) -> str:
    config = postgres_config(tmp_path)
    asyncio.run(_record(config))
    return str(config["schema"])


def store(schema: str) -> list[str]:
    return ["--store", POSTGRES_DSN, "--schema", schema]


def test_verify_checkpoint_prove_and_export_from_the_store(schema: str, tmp_path: Path
                                                           ) -> None:
    verified = run("verify", *store(schema))
    assert verified.stdout.startswith("OK chain chain_")
    assert f"{2 * ADDS} entries in postgresql://127.0.0.1:5432/test (schema {schema})" in (
        verified.stdout)
    as_url = json.loads(run("verify", POSTGRES_DSN, "--schema", schema, "--json").stdout)
    assert (as_url["status"], as_url["entries"], as_url["waiting"]) == ("ok", 2 * ADDS, 0)

    checkpoint = tmp_path / "cp.json"
    checkpoint.write_text(run("checkpoint", *store(schema)).stdout)
    first = json.loads(run("query", *store(schema), "--operation", "add", "--limit", "3",
                           "--json").stdout.splitlines()[2])["event"]["event_id"]
    proof = tmp_path / "proof.json"
    proof.write_text(run("prove", first, *store(schema), "--checkpoint", checkpoint,
                         "--event-out", tmp_path / "event.json").stdout)
    run("verify-proof", proof, "--checkpoint", checkpoint, "--event", tmp_path / "event.json")

    out = tmp_path / "export"
    exported = run("export", *store(schema), "--out", out, "--max-file-bytes", "4096")
    assert f"{2 * ADDS} entries in" in exported.stdout
    assert len(list(out.glob("audit-*.jsonl"))) > 1
    run("verify", out, "--checkpoint", checkpoint)
    from_files = tmp_path / "proof-files.json"
    from_files.write_text(run("prove", first, out, "--checkpoint", checkpoint).stdout)
    assert from_files.read_text() == proof.read_text()
    run("export", *store(schema), "--out", out, code=2)  # never over an existing trail

    report = run("report", *store(schema), "--tenant", "acme", "--user", "alice")
    assert f"written: {ADDS}" in report.stdout


def test_consistency_between_two_checkpoints_of_the_store(schema: str, tmp_path: Path
                                                          ) -> None:
    earlier, later = tmp_path / "monday.json", tmp_path / "friday.json"
    earlier.write_text(run("checkpoint", *store(schema)).stdout)
    asyncio.run(_record(postgres_config(tmp_path)))  # the same schema: more entries
    later.write_text(run("checkpoint", POSTGRES_DSN, "--schema", schema).stdout)
    assert json.loads(later.read_text())["tree_size"] == 4 * ADDS
    proof = tmp_path / "consistency.json"
    proof.write_text(run("consistency", earlier, later, *store(schema)).stdout)
    run("verify-proof", proof, "--checkpoint", later, "--earlier", earlier)


def test_an_altered_row_is_broken_on_the_command_line(schema: str) -> None:
    execute(schema, "UPDATE audit_entries SET event = replace(event, '\"add\"', '\"get\"')"
                    " WHERE seq = 6")
    broken = run("verify", *store(schema), code=1)
    assert broken.stderr.startswith(f"BROKEN postgresql://127.0.0.1:5432/test (schema {schema})"
                                    " (entry 6): hash does not match")
    run("checkpoint", *store(schema), code=1)
    run("query", *store(schema), code=1)


def test_what_is_not_a_trail_store_or_cannot_be_reached(tmp_path: Path) -> None:
    no_trail = postgres_config(tmp_path)["schema"]
    assert "no trail here" in run("verify", *store(str(no_trail)), code=4).stderr
    run("export", *store(str(no_trail)), "--out", tmp_path / "out", code=4)
    down = run("verify", "--store", "postgresql://postgres@127.0.0.1:1/test", code=9)
    assert down.stderr.startswith("error (unavailable): cannot read the trail at "
                                  "postgresql://127.0.0.1:1/test")


def test_arguments_that_do_not_go_together(tmp_path: Path) -> None:
    run("verify", tmp_path, "--schema", "s", code=2)
    run("verify", tmp_path, "--store", POSTGRES_DSN, code=2)
    run("verify", POSTGRES_DSN, "--store", POSTGRES_DSN, code=2)
    run("export", tmp_path, "--out", tmp_path / "out", code=2)
    run("verify", code=2)


def test_a_cli_command_records_into_the_profiles_postgres_trail_and_no_file_trail(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    schema = str(postgres_config(tmp_path)["schema"])
    profile = tmp_path / "team.toml"
    profile.write_text(PROFILE_FILE.format(dsn=POSTGRES_DSN, schema=schema))
    monkeypatch.setenv("GOVERNED_MEMORY_HOME", str(tmp_path / "home"))
    added = CliRunner().invoke(cli, ["add", "--profile", str(profile), "--tenant", "acme",
                                     "--user", "alice", "noted from the shell"])
    assert added.exit_code == 0, added.stderr
    assert not (tmp_path / "home" / "audit").exists()  # the profile names its trail
    types = [json.loads(line)["event"]["type"] for line in run(
        "query", *store(schema), "--json").stdout.splitlines()]
    assert types == ["memory.write.requested", "memory.write.committed"]


PROFILE_FILE = """\
spec_version = 1
id = "team-postgres"
version = "1.0.0"

[provider.config]
backend = "postgres"
dsn = "{dsn}"
schema = "{schema}"

[audit]
fail_closed = true

[audit.sinks.postgres-trail]
store = "provider"
"""

