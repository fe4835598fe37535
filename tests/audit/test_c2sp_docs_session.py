"""docs/compliance.md's auditor session with the open tools runs as written: its
marked shell blocks, in order, in one shell, on a trail written by the real sink, with
the independent verifier (tests/audit/goverify) on the PATH and the log's static files
served over HTTP on a loopback port.

Two things differ from the page: the port (a free one instead of 8000) and the growth
of the trail, which the page tells ("the trail grows") and this test does, through the
sink, before the block marked to run after it."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

from audit_support import write_trail
from c2sp_support import go_verifier

DOC = Path(__file__).resolve().parents[2] / "docs" / "compliance.md"
MARK = re.compile(r"<!-- runs in tests/audit/test_c2sp_docs_session\.py(, after the trail "
                  r"grew)? -->\n```bash\n(.*?)```", re.DOTALL)
GROW = """\
import asyncio, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from c2sp_support import grow
grow(Path("trail"), 40, 63)
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_auditors_session_runs_as_written(tmp_path: Path) -> None:
    import asyncio

    binary = go_verifier()
    blocks = MARK.findall(DOC.read_text(encoding="utf-8"))
    assert len(blocks) == 3 and sum(1 for after, _ in blocks if after) == 1
    asyncio.run(write_trail(tmp_path / "trail", 40))
    (tmp_path / "grow.py").write_text(GROW.format(tests=str(Path(__file__).parent)))
    script = ["set -euo pipefail -x", "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT"]
    for after, block in blocks:
        if after:
            script.append(f'"{sys.executable}" grow.py')
        script.append(block)
    text = "\n".join(script)
    assert text.count("8000") >= 4
    text = text.replace("8000", str(_free_port()))
    path = os.pathsep.join([str(Path(sys.executable).parent), str(binary.parent),
                            os.environ.get("PATH", "")])
    done = subprocess.run(["bash", "-c", text], cwd=tmp_path, env={**os.environ, "PATH": path},
                          capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    out = done.stdout
    assert "OK checkpoint of audit.example/acme: 63 entries" in out
    assert "witness.example/w1@" in out
    assert "63 entries, 1 tiles and 1 entry bundles give the signed root" in out
    assert "OK entry 7 " in out and "so is the proof's path" in out
    assert "at 63 entries extends itself at 40 entries" in out
    assert "REFUSED the checkpoint note does not verify" in done.stderr
    print(out)
