"""docs/cli.md runs as written: its ``bash`` blocks, in order, as one shell session
against the installed ``governed-memory`` script (a command that fails stops it), each
``|| echo "exit $?"  # exit N`` printing the exit code its comment promises; and every
built-in command appears in a block that runs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import child_env, script
from governed_memory.cli.main import COMMANDS

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
BASH = re.compile(r"```bash\n(.*?)```", re.DOTALL)
EXPECTED_EXIT = re.compile(r'\|\| echo "exit \$\?"\s+# exit (\d+)')


def _blocks() -> list[str]:
    return BASH.findall(DOC.read_text(encoding="utf-8"))


def test_every_builtin_command_has_an_example_that_runs() -> None:
    text = "\n".join(_blocks())
    missing = [name for name in COMMANDS
               if not re.search(rf"governed-memory (--profile \S+ )?{re.escape(name)}\b", text)]
    assert missing == []


def test_the_documented_session_runs(tmp_path: Path) -> None:
    if shutil.which("jq") is None:
        pytest.skip("the documented session uses jq (.ci/run installs it)")
    if not script().exists():
        pytest.skip(f"console script not installed next to {sys.executable}")
    blocks = _blocks()
    session = "set -euo pipefail\n" + "\n".join(blocks)
    env = child_env(PATH=os.pathsep.join([str(script().parent), os.environ.get("PATH", "")]))
    done = subprocess.run(["bash", "-c", session], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, f"stdout:\n{done.stdout[-4000:]}\nstderr:\n{done.stderr[-4000:]}"
    promised = [int(code) for block in blocks for code in EXPECTED_EXIT.findall(block)]
    printed = [int(code) for code in re.findall(r"^exit (\d+)$", done.stdout, re.MULTILINE)]
    assert printed == promised
    assert len(promised) >= 5
    # the session wrote where it said it would: nothing at the default location
    assert not (tmp_path / ".governed-memory").exists()
    assert (tmp_path / "home" / "memory.db").is_file()
