"""Several processes appending to one trail at once (a CLI command next to a running
worker, two services on one host) keep one linear chain that verifies, with every
writer's events in it exactly once and in each writer's own order."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from audit_support import event_ids_in, files_in
from governed_memory.audit import verify_trail

CHILD = Path(__file__).with_name("shared_writer_child.py")
WRITERS = 3
EACH = 150

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs flock")


@pytest.mark.parametrize("fsync", ["never", "interval"])
def test_concurrent_processes_share_one_chain(tmp_path: Path, fsync: str) -> None:
    trail = tmp_path / "trail"
    children = [subprocess.Popen([sys.executable, str(CHILD), str(trail), f"w{i}", str(EACH),
                                  "4096", fsync],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
                for i in range(WRITERS)]
    try:
        for child in children:  # every writer has opened the trail before any appends
            assert child.stdout is not None and child.stdout.readline() == b"ready\n", (
                child.stderr.read() if child.stderr else b"")
        for child in children:
            assert child.stdin is not None
            child.stdin.write(b"go\n")
            child.stdin.flush()
        for child in children:
            _, err = child.communicate(timeout=120)
            assert child.returncode == 0, err.decode()
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
    verification = verify_trail([trail])
    assert verification.ok, verification.problem
    assert verification.entries == WRITERS * EACH
    assert len(files_in(trail)) > WRITERS  # every writer rotated onto others' files
    ids = event_ids_in(trail)
    assert len(set(ids)) == len(ids) == WRITERS * EACH
    for i in range(WRITERS):
        mine = [event_id for event_id in ids if event_id.startswith(f"evt_w{i}.")]
        assert mine == [f"evt_w{i}.{n}" for n in range(EACH)]
