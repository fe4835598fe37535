"""``register_cli_commands``: a plugin's command becomes a ``governed-memory``
subcommand, a plugin taking a built-in's name is refused, and ``--help`` does not
load plugins (built-in commands never look plugin commands up either: the group asks
plugins only for a name it does not build in).

Each case installs a real plugin (a module and an entry point in a ``.dist-info`` on
``PYTHONPATH``) and runs the command line in a child process, so entry-point discovery
is the real one.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PLUGIN = '''
import click
from governed_memory import hookimpl


@click.command()
@click.argument("who")
def hello(who):
    """Say hello from a plugin."""
    click.echo(f"hello {{who}} from acme")


@hookimpl
def register_cli_commands(register):
    register({name!r}, hello, description="from the acme plugin")
'''


def _install(site: Path, command_name: str) -> None:
    (site / "acme_cli_plugin.py").write_text(PLUGIN.format(name=command_name),
                                             encoding="utf-8")
    dist = site / "acme_cli_plugin-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-cli-plugin\n"
                                   "Version: 1.0\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text("[governed_memory]\nacme = acme_cli_plugin\n",
                                           encoding="utf-8")


def _run(site: Path, *code_or_args: str, code: str | None = None
         ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "GOVERNED_MEMORY_HOME": str(site)}
    argv = ([sys.executable, "-c", code] if code is not None
            else [sys.executable, "-m", "governed_memory.cli.main", *code_or_args])
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    path = tmp_path / "site"
    path.mkdir()
    return path


def test_a_plugin_command_is_a_subcommand(site: Path) -> None:
    _install(site, "hello")
    result = _run(site, "hello", "world")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "hello world from acme"
    listed = _run(site, "commands")
    assert listed.returncode == 0, listed.stderr
    # Beside the built-in plugins' own commands (the service's keys and serve).
    lines = [line.split() for line in listed.stdout.splitlines()]
    assert ["hello", "from", "the", "acme", "plugin"] in lines


def test_a_plugin_command_named_like_a_built_in_is_refused(site: Path) -> None:
    _install(site, "add")
    result = _run(site, "commands")
    assert result.returncode == 7
    assert "'add'" in result.stderr and "built-in" in result.stderr
    # An unknown name loads plugin commands too, and is refused the same way.
    assert _run(site, "hello", "world").returncode == 7


def test_help_does_not_load_plugins(site: Path) -> None:
    _install(site, "hello")
    code = ("import sys\n"
            "from governed_memory.cli.main import cli\n"
            "try:\n"
            "    cli(['--help'])\n"
            "except SystemExit:\n"
            "    pass\n"
            "loaded = [m for m in ('acme_cli_plugin', 'governed_memory_service.plugin',\n"
            "                      'governed_memory_native.plugin') if m in sys.modules]\n"
            "print('LOADED', loaded)\n")
    result = _run(site, code=code)
    assert result.returncode == 0, result.stderr
    assert "LOADED []" in result.stdout
    # --help says where plugin commands are listed
    assert "`governed-memory commands` lists them" in " ".join(result.stdout.split())
