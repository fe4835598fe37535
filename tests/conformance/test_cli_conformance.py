"""``governed-memory conformance`` as an operator runs it: a real subprocess of the
installed console script, from a directory that must stay untouched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(sys.executable).with_name("governed-memory")
FEW = "round_trips or stale_revision or history_lists or isolation_property"


def conformance(cwd: Path, *args: str, home: Path | None = None,
                env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    if not SCRIPT.exists():
        pytest.skip(f"console script not installed next to {sys.executable}")
    environment = {k: v for k, v in os.environ.items()
                   if k not in ("GOVERNED_MEMORY_HOME", "PYTEST_ADDOPTS", "HYPOTHESIS_PROFILE")}
    if home is not None:
        environment["GOVERNED_MEMORY_HOME"] = str(home)
    environment.update(env or {})
    return subprocess.run([str(SCRIPT), "conformance", *args], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=600, check=False)


def capability_rows(stdout: str) -> dict[str, list[str]]:
    """The capability table's rows by capability (the area table below it is left out:
    areas such as ``history`` share a name with a capability)."""
    lines = stdout.splitlines()
    start = next(n for n, line in enumerate(lines)
                 if line.split()[:2] == ["capability", "passed"])
    end = next(n for n, line in enumerate(lines) if n > start and line.startswith("total"))
    return {line.split()[0]: line.split()[1:] for line in lines[start + 2:end + 1]
            if line and not line.startswith("-")}


def test_default_config_passes_and_touches_nothing_of_the_operator(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    proc = conformance(work, "--provider", "native", "-k", FEW, home=home)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.split()[:5] == ["capability", "passed", "failed", "skipped", "xfailed"]
               for line in lines)
    rows = capability_rows(proc.stdout)
    assert rows["compare_and_set"] == ["1", "0", "0", "0"]
    assert rows["history"] == ["1", "0", "0", "0"]
    assert rows["total"][1] == "0"
    assert lines[-1] == "PASS"
    assert not any(line.startswith("WARNING:") for line in lines), (
        "a run that skipped nothing for a flag warned about skips")
    assert list(home.iterdir()) == [], "the run wrote into the operator's GOVERNED_MEMORY_HOME"
    assert list(work.iterdir()) == [], "the run left files in the working directory"


def test_config_placeholder_and_json_report(tmp_path: Path) -> None:
    proc = conformance(tmp_path, "--provider", "native", "--json", "-k", "round_trips",
                       "--config", '{"backend": "sqlite", "path": "{tmp}/memory.db"}')
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] is True
    assert report["provider"] == "native"
    assert [row["capability"] for row in report["rows"]] == ["core"]
    assert [test["test"] for test in report["tests"]] == [
        "test_add_then_get_round_trips_every_field"]


BROKEN_PLUGIN = """\
from broken import RevisionIgnoringProvider
from example_provider import ExampleProvider
from governed_memory import hookimpl
from governed_memory.capabilities import Capabilities


class BareProvider(ExampleProvider):
    \"\"\"Declares only what must be declared: every feature flag is off.\"\"\"

    def capabilities(self):
        return Capabilities(durable=False, transactional=True)


@hookimpl
def register_memory_providers(register):
    register("broken-revisions", lambda config, clock: RevisionIgnoringProvider(clock))
    register("bare-example", lambda config, clock: BareProvider(clock))
"""


def with_broken_provider(tmp_path: Path) -> dict[str, str]:
    """A plugin registering a provider that ignores ``expected_revision``."""
    site = tmp_path / "broken-site"
    info = site / "broken_cli_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (site / "broken_cli_plugin.py").write_text(BROKEN_PLUGIN, encoding="utf-8")
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-cli-plugin\n"
                                   "Version: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(
        "[governed_memory]\nbroken-cli = broken_cli_plugin\n", encoding="utf-8")
    return {"PYTHONPATH": os.pathsep.join([str(site), str(HERE), str(HERE.parent)])}


def test_failures_are_listed_and_exit_non_zero(tmp_path: Path) -> None:
    proc = conformance(tmp_path, "--provider", "broken-revisions", "-k",
                       "round_trips or stale_revision", env=with_broken_provider(tmp_path))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "failed:" in proc.stdout
    assert "  test_stale_revision_conflicts_and_changes_nothing [compare_and_set]" in proc.stdout
    assert proc.stdout.splitlines()[-1] == "FAIL"


def test_areas_skipped_for_a_flag_are_listed_and_a_mostly_skipped_run_says_so(
        tmp_path: Path) -> None:
    """A provider that declares no feature passes what it is tested on, but most of the
    suite is skipped: the area table says which areas did not run and for which flag,
    and a warning says so on stdout and stderr before the verdict."""
    env = with_broken_provider(tmp_path)
    proc = conformance(tmp_path, "--provider", "bare-example", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    areas = {line.split("  ")[0]: line for line in lines[lines.index(next(
        line for line in lines if line.split()[:2] == ["area", "tests"])):]}
    status = {area: line.rsplit("  ", 1)[-1] for area, line in areas.items()}
    assert status["lifecycle, CRUD"] == "ran"
    # Each skipped area names every flag its tests need that is off, in the
    # order of Capabilities.
    assert status["review"] == "skipped (idempotency, review)"
    assert status["dedup"] == "skipped (idempotency, dedup)"
    assert status["idempotency"] == "skipped (idempotency, soft_delete)"
    assert status["search"] == "skipped (lexical_search, metadata_filters)"
    assert status["event time"].startswith("partly skipped (")
    warning = [line for line in lines if line.startswith("WARNING:")]
    assert warning and "suite tests were SKIPPED" in warning[0], proc.stdout
    assert "review" in warning[1] and "dedup" in warning[1]
    assert "suite tests were SKIPPED" in proc.stderr
    assert lines[-1] == "PASS"

    report = json.loads(conformance(tmp_path, "--provider", "bare-example", "--json",
                                    env=env).stdout)
    flags = report["skipped_for_flags"]
    assert flags["most_of_the_suite"] is True and flags["tests"] > flags["of"] / 2
    by_area = {row["area"]: row for row in report["areas"]}
    assert by_area["review"]["ran"] == 0
    assert by_area["review"]["skipped_for"] == ["idempotency", "review"]


def test_a_provider_that_cannot_be_built_stops_the_run_at_its_first_test(
        tmp_path: Path) -> None:
    # A database path that cannot exist: every provider start would fail the same way.
    proc = conformance(tmp_path, "--provider", "native", "-k", "round_trips or stale_revision",
                       "--config", '{"backend": "sqlite", "path": "/dev/null/memory.db"}')
    assert proc.returncode == 7, proc.stdout + proc.stderr
    assert proc.stderr.count("the database directory cannot be created") == 1
    assert "stopped at its first test" in proc.stderr


def test_unknown_provider_and_bad_config_are_refused(tmp_path: Path) -> None:
    unknown = conformance(tmp_path, "--provider", "no-such-provider")
    assert unknown.returncode == 7
    assert "unknown provider 'no-such-provider'" in unknown.stderr
    bad = conformance(tmp_path, "--provider", "native", "--config", "[1, 2]")
    assert bad.returncode == 2
    assert "must be a JSON object" in bad.stderr


# -- server-backed providers: a namespace per instance, an emptiness check, cleanup --------------

HERE = Path(__file__).parent
SERVER_TESTS = FEW + " or survive_a_reopen or key_of_an_expired"


def with_file_server(tmp_path: Path) -> dict[str, str]:
    from file_server_provider import register_for_subprocess

    site = tmp_path / "site"
    register_for_subprocess(site)
    return {"PYTHONPATH": os.pathsep.join([str(site), str(HERE), str(HERE.parent)])}


def server_conformance(tmp_path: Path, config: dict[str, str], *args: str,
                       ) -> subprocess.CompletedProcess[str]:
    if not SCRIPT.exists():
        pytest.skip(f"console script not installed next to {sys.executable}")
    env = {k: v for k, v in os.environ.items()
           if k not in ("GOVERNED_MEMORY_HOME", "PYTEST_ADDOPTS", "HYPOTHESIS_PROFILE")}
    env.update(with_file_server(tmp_path))
    return subprocess.run([str(SCRIPT), "conformance", "--provider", "file-server",
                           "--config", json.dumps(config), *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600, check=False)


def test_every_instance_gets_its_own_namespace_and_is_cleaned_up(tmp_path: Path) -> None:
    server = tmp_path / "server"
    server.mkdir()
    proc = server_conformance(tmp_path, {"server": str(server), "namespace": "{namespace}"},
                              "-k", SERVER_TESTS)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[-1] == "PASS"
    rows = capability_rows(proc.stdout)
    assert rows["durable"] == ["1", "0", "0", "0"], "the durability test must run and pass"
    assert list(server.iterdir()) == [], "the cleanup hook left namespaces on the server"


def test_an_instance_that_is_not_empty_fails_saying_so(tmp_path: Path) -> None:
    server = tmp_path / "server"
    server.mkdir()
    # An earlier run left a record in the one namespace every instance is configured with.
    seed = tmp_path / "seed.py"
    seed.write_text(
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "from governed_memory.clock import ManualClock\n"
        "from governed_memory_conformance.harness import Harness\n"
        "from governed_memory_conformance.scopes import HOME\n"
        "from file_server_provider import FileServerProvider\n"
        "async def main():\n"
        "    provider = FileServerProvider(ManualClock(), Path(sys.argv[1]), 'shared')\n"
        "    await provider.start()\n"
        "    await Harness(provider, ManualClock()).add('left over', key='k')\n"
        "    await provider.close()\n"
        "asyncio.run(main())\n", encoding="utf-8")
    env = {**os.environ, **with_file_server(tmp_path)}
    subprocess.run([sys.executable, str(seed), str(server)], env=env, check=True, timeout=60)
    proc = server_conformance(tmp_path, {"server": str(server), "namespace": "shared"},
                              "-k", "round_trips")
    assert proc.returncode == 1
    assert "a new provider instance is not empty" in proc.stdout, proc.stdout
    assert "put '{namespace}' in the config" in proc.stdout
    assert proc.stdout.splitlines()[-1] == "FAIL"
    assert (server / "shared.json").exists(), "the check must not destroy what it found"
