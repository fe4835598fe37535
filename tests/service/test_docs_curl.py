"""docs/service.md's curl session runs as written: its profile and its shell blocks, in
order, against a real ``governed-memory serve`` on a loopback port.

Two things differ from the page: the port (a free one instead of 8080, so parallel runs
do not collide) and the Redis key prefix (one per run, so a shared Redis cannot answer
with an earlier run's working state). Every ``curl`` in the session uses ``-f`` or
checks its status, and ``jq -e`` fails on a false answer, so a route that stops
answering as documented fails this test.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import tomllib
import uuid
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "service.md"
MARK = "<!-- runs in tests/service/test_docs_curl.py -->"


def _blocks(text: str, marker: str, language: str) -> list[str]:
    pattern = re.escape(marker) + r"\n```" + language + r"\n(.*?)```"
    return re.findall(pattern, text, re.DOTALL)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tools_or_fail() -> None:
    missing = [tool for tool in ("curl", "jq", "bash")
               if subprocess.run(["which", tool], capture_output=True).returncode]
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the curl session needs {', '.join(missing)}")
        pytest.skip(f"needs {', '.join(missing)}")


def test_the_curl_session_runs_as_written(tmp_path: Path) -> None:
    _tools_or_fail()
    text = DOC.read_text(encoding="utf-8")
    (profile,) = _blocks(text, "<!-- service.toml -->", "toml")
    session = _blocks(text, MARK, "bash")
    assert len(session) >= 5, "the session's blocks are marked"
    prefix = f"gm:ws:docs-{uuid.uuid4().hex[:12]}:"
    assert 'key_prefix = "gm:ws:"' in profile
    (tmp_path / "service.toml").write_text(
        profile.replace('key_prefix = "gm:ws:"', f'key_prefix = "{prefix}"'),
        encoding="utf-8")
    # On a failing step the server the session started in the background is stopped
    # too (it would hold the output pipes open); the trace shows the failing command.
    script = ("set -euo pipefail -x\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n"
              + "\n".join(session))
    assert script.count("8080") == 2, "the port is given twice: --port and GM"
    script = script.replace("8080", str(_free_port()))
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    result = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    # The session ended by stopping the server cleanly, and wrote where it was told.
    assert (tmp_path / "memory.db").exists() and (tmp_path / "turns.db").exists()


EXTRA_OF_KIND = {"redis": "redis", "postgres": "postgres"}
"""The extra a store kind (or the native provider's backend) loads its client from."""


def test_the_try_it_install_line_installs_what_the_session_needs() -> None:
    """The section's install line names the service extra and every extra its profile
    needs (the Redis working-state store needs ``redis``), so following the page from a
    clean environment works; and the session it installs for is the one that runs."""
    text = DOC.read_text(encoding="utf-8")
    (install,) = _blocks(text, "<!-- the install line for this section -->", "bash")
    (profile,) = _blocks(text, "<!-- service.toml -->", "toml")
    match = re.fullmatch(r"pip install 'governed-memory\[([a-z,]+)\]'\n", install)
    assert match, install
    extras = set(match.group(1).split(","))
    spec = tomllib.loads(profile)
    kinds = {store["kind"] for store in spec.get("stores", {}).values()}
    kinds.add(spec["provider"].get("config", {}).get("backend", "sqlite"))
    needed = {"service"} | {EXTRA_OF_KIND[k] for k in kinds if k in EXTRA_OF_KIND}
    assert needed == extras, (needed, extras)
    assert text.index("<!-- the install line for this section -->") < text.index(MARK)
