"""``--help`` lists every command and the exit codes from a table, importing no command
module, the manager or a plugin; the table agrees with the commands; and a data command
imports only what it uses (no numpy for a lexical search, no pytest, no OpenTelemetry
SDK, no command module of a plugin). Times are measured by bench/cli_startup.py, not
here: these tests hold the import properties the times come from."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from cli_support import ALICE, child_env, invoke, python
from governed_memory.cli.exit_codes import EXIT_CODES
from governed_memory.cli.main import COMMANDS

HEAVY_FOR_HELP = ("governed_memory.manager", "governed_memory.cli.common", "pluggy",
                  "asyncio", "attr", "governed_memory_native", "governed_memory_service")
HEAVY_FOR_DATA = ("numpy", "pytest", "hypothesis", "opentelemetry.sdk", "faiss", "mem0",
                  "governed_memory_service.cli", "governed_memory.cli.conformance",
                  "governed_memory.cli.audit", "governed_memory.cli.demo")


def _loaded_after(argv: list[str], watched: tuple[str, ...], cwd: Path) -> dict[str, object]:
    code = (
        "import json, sys\n"
        "from governed_memory.cli.main import cli\n"
        "try:\n"
        f"    cli({argv!r})\n"
        "except SystemExit as exit:\n"
        "    code = exit.code\n"
        f"watched = {watched!r}\n"
        "found = sorted(w for w in watched for m in list(sys.modules)\n"
        "               if m == w or m.startswith(w + '.'))\n"
        "print('\\nRESULT ' + json.dumps({'code': code, 'loaded': sorted(set(found))}))\n"
    )
    done = python(code, cwd=cwd, env=child_env(GOVERNED_MEMORY_HOME=str(cwd)))
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))  # type: ignore[no-any-return]


def test_help_lists_every_command_and_every_exit_code() -> None:
    out = invoke("--help").stdout
    listed = {line.split()[0] for line in out.split("Commands:")[1].splitlines()
              if line.startswith("  ") and line.split()}
    assert set(COMMANDS) <= listed
    assert "Exit codes:" in out
    for code in sorted(set(EXIT_CODES.values()) | {0, 1}):
        assert f"\n    {code}  " in out, code
    assert "audit commands have their own" in out and "6 event outside" in out


def test_the_table_agrees_with_each_command() -> None:
    for name, entry in COMMANDS.items():
        command = entry.load()
        assert isinstance(command, click.Command)
        assert command.name == name
        assert entry.summary == command.get_short_help_str(limit=10_000), name


def test_help_imports_no_command_module_manager_or_plugin(tmp_path: Path) -> None:
    result = _loaded_after(["--help"], HEAVY_FOR_HELP, tmp_path)
    assert result == {"code": 0, "loaded": []}
    assert _loaded_after(["--version"], HEAVY_FOR_HELP, tmp_path)["loaded"] == []


def test_a_lexical_add_and_search_import_only_what_they_use(tmp_path: Path) -> None:
    db = str(tmp_path / "memory.db")
    added = _loaded_after(["add", "--db", db, *ALICE, "Alice likes tea"], HEAVY_FOR_DATA,
                          tmp_path)
    assert added == {"code": 0, "loaded": []}
    found = _loaded_after(["search", "--db", db, *ALICE, "tea"], HEAVY_FOR_DATA, tmp_path)
    assert found == {"code": 0, "loaded": []}


def test_errors_are_typed_lines_with_the_family_exit_code(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    monkeypatch.chdir(tmp_path)
    db = str(tmp_path / "memory.db")
    invoke("add", "--db", db, *ALICE, "exists")
    missing = invoke("get", "--db", db, *ALICE, "01ZZZZZZZZZZZZZZZZZZZZZZZZ", code=4)
    assert missing.stderr.startswith("error (not_found): ")
    assert "Traceback" not in missing.stderr
    denied = invoke("add", "--db", db, *ALICE, "key ghp_" + "Zq4" * 12, code=3)
    assert denied.stderr.startswith("error (policy_denied): ")
