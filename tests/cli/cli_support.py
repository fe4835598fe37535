"""Helpers for the CLI tests: invoking the command in process (click's runner) or as the
installed script in a child process, and profile files to pass with ``--profile``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner, Result
from governed_memory.cli.main import cli

ALICE = ["--tenant", "acme", "--user", "alice"]

HYBRID_PROFILE = """\
spec_version = 1
id = "team-hybrid"
version = "1.0.0"
description = "A team's own profile: the hashing embedder, indexed by a worker."

[provider]
name = "native"

[provider.config]
backend = "sqlite"

[stores.embedder]
kind = "hashing"
config = { dimension = 32 }

[indexing]
mode = "async_outbox"

[retrieval]
modes = ["lexical", "vector"]
"""

LEXICAL_PROFILE = """\
spec_version = 1
id = "team-lexical"
version = "2.0.0"

[provider]
name = "native"

[provider.config]
backend = "sqlite"
{path_line}

[privacy]
secret_guard = "reject"

[policies]
enabled = ["permissions", "write-rules", "secret-guard"]
"""


def invoke(*args: str, code: int = 0, input: str | None = None) -> Result:
    """Run ``governed-memory ARGS`` in process; the exit code must be ``code``."""
    result = CliRunner().invoke(cli, list(args), input=input)
    assert result.exit_code == code, (
        f"exit {result.exit_code} != {code}\nstdout: {result.stdout}\n"
        f"stderr: {result.stderr}\nexception: {result.exception!r}")
    return result


def script() -> Path:
    return Path(sys.executable).with_name("governed-memory")


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("GOVERNED_MEMORY_BLOCK_PLUGINS", "GOVERNED_MEMORY_HOME",
                        "GOVERNED_MEMORY_PROFILE")}
    env.update(extra)
    return env


def python(code: str, *args: str, cwd: Path | None = None,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -c CODE ARGS`` with this interpreter, in a fresh process."""
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                          text=True, timeout=300, cwd=cwd, env=env or child_env(),
                          check=False)


BLOCK_IMPORTS = """\
import sys
class _Block:
    def __init__(self, names):
        self.names = names
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.names:
            raise ImportError(f"blocked: {{name}}", name=name)
sys.meta_path.insert(0, _Block({names!r}))
"""
"""Prepended to a child's code: the named top-level packages cannot be imported, as
if their extra were not installed."""
