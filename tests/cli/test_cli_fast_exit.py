"""The console script skips the interpreter's teardown after a command, and loses
nothing by it: exit codes, every byte of output, ``atexit`` handlers, and a thread still
running (which makes it exit the ordinary way)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_support import child_env, python, script
from governed_memory.cli.fast_exit import exit_code

SCRIPT = ("import sys\n"
          "from governed_memory.cli.main import script\n"
          "sys.argv = ['governed-memory', *sys.argv[1:]]\n")


@pytest.mark.parametrize(("code", "status"), [(None, 0), (0, 0), (4, 4), ("bye", 1)])
def test_exit_codes_follow_system_exit(code: object, status: int) -> None:
    assert exit_code(code) == status


def test_the_installed_script_is_the_fast_one() -> None:
    if not script().exists():
        pytest.skip("console script not installed")
    assert "import script" in script().read_text(encoding="utf-8")


def test_codes_and_all_output_survive(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    added = python(SCRIPT + "script()\n", "add", "--db", db, "--tenant", "acme", "the first",
                   cwd=tmp_path)
    assert added.returncode == 0, added.stderr
    assert "content:   the first" in added.stdout
    fill = ("import asyncio\n"
            "from pathlib import Path\n"
            "from governed_memory.cli.building import build_manager\n"
            "from governed_memory.cli.common import operator\n"
            "from governed_memory.scope import Scope\n"
            "async def main():\n"
            f"    async with build_manager('local@1.0.0', Path({db!r})) as m:\n"
            "        for n in range(99):\n"
            "            await m.add(operator('acme'), Scope('acme'), f'memory {n} ' + 'x' * 400)\n"
            "asyncio.run(main())\n")
    assert python(fill, cwd=tmp_path).returncode == 0
    listed = python(SCRIPT + "script()\n", "list", "--db", db, "--tenant", "acme",
                    "--limit", "100", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)["items"]) == 100  # ~60 KB, every byte of it
    missing = python(SCRIPT + "script()\n", "get", "--db", db, "--tenant", "acme",
                     "01ZZZZZZZZZZZZZZZZZZZZZZZZ", cwd=tmp_path)
    assert (missing.returncode, missing.stderr.startswith("error (not_found)")) == (4, True)
    usage = python(SCRIPT + "script()\n", "add", cwd=tmp_path)
    assert usage.returncode == 2 and "Usage:" in usage.stderr


def test_atexit_handlers_still_run(tmp_path: Path) -> None:
    code = ("import atexit\n"
            "atexit.register(lambda: print('flushed at exit', flush=True))\n"
            + SCRIPT + "script()\n")
    done = python(code, "--version", cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout.splitlines()[-1] == "flushed at exit"


def test_a_running_thread_makes_it_exit_the_ordinary_way(tmp_path: Path) -> None:
    marker = tmp_path / "finished"
    code = ("import threading, time\n"
            "def work():\n"
            "    time.sleep(0.3)\n"
            f"    open({str(marker)!r}, 'w').close()\n"
            "threading.Thread(target=work).start()\n"
            + SCRIPT + "script()\n")
    done = python(code, "--version", cwd=tmp_path)
    assert done.returncode == 0
    assert marker.exists()  # the thread ran to its end


def test_a_closed_pipe_is_not_a_traceback(tmp_path: Path) -> None:
    if not script().exists():
        pytest.skip("console script not installed")
    pipeline = f"{script()} --help | head -c 10"
    done = subprocess.run(["bash", "-c", pipeline], capture_output=True, text=True,
                          env=child_env(), timeout=60, cwd=tmp_path, check=False)
    assert done.stdout == "Usage: gov"
    assert "Traceback" not in done.stderr
