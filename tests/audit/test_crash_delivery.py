"""No lost events: a process killed (SIGKILL) after the native provider committed a
write but before its event reached the trail loses nothing, and a fresh manager on the
same files delivers the event into the hash chain exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from actors import ALICE
from audit_support import files_in
from governed_memory.audit import AuditSink, iter_entries, verify_trail
from governed_memory.clock import SystemClock
from governed_memory.events import InMemoryEventSink
from governed_memory.manager import GovernedMemoryManager
from governed_memory.scope import Scope
from governed_memory_native import build_native_provider

CHILD = Path(__file__).with_name("crash_child.py")

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL")


def run_and_kill(db: Path, trail: Path, order: str) -> str:
    """Start the writer, wait until it is inside the committed event's delivery, kill
    it; returns the id of the record it committed."""
    process = subprocess.Popen([sys.executable, str(CHILD), str(db), str(trail), order],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert process.stdout is not None
        ready = process.stdout.readline()
        assert ready.strip() == b"ready", process.stderr.read() if process.stderr else ready
        line = process.stdout.readline()
        assert line.startswith(b"committed "), line
        record_id = line.split()[1].decode()
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait(timeout=30)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
    assert process.returncode == -signal.SIGKILL
    return record_id


def committed_in_trail(trail: Path, record_id: str) -> list[int]:
    return [entry.seq for entry in iter_entries([trail])
            if entry.type == "memory.write.committed"
            and record_id in entry.event.get("record_ids", ())]


@pytest.mark.parametrize("order", ["hang-first", "hang-last"])
async def test_a_killed_writer_loses_no_event_and_the_restart_delivers_it_once(
        tmp_path: Path, order: str) -> None:
    """``hang-first``: killed before the audit sink saw the event. ``hang-last``: the
    audit sink appended it but the outbox never heard, so it is offered again and the
    sink's dedup (rebuilt from the files on open) keeps one."""
    db, trail = tmp_path / "memory.db", tmp_path / "trail"
    record_id = run_and_kill(db, trail, order)
    before = committed_in_trail(trail, record_id)
    assert len(before) == (0 if order == "hang-first" else 1)

    for restart in range(2):  # a second restart must not append it again
        provider = build_native_provider({"backend": "sqlite", "path": str(db)},
                                         SystemClock())
        audit, seen = AuditSink(trail), InMemoryEventSink()
        async with GovernedMemoryManager(provider, sinks=[audit, seen]) as manager:
            # start() drained what the crash left; the write itself was committed.
            record = await manager.get(ALICE, Scope("acme", user_id="alice"), record_id)
            assert record.content == "written before the crash"
            seen.events = [e for e in seen.events if e.operation != "get"]
        if restart == 0:
            assert [e.record_ids for e in seen.events] == [(record_id,)]
        else:
            assert seen.events == []
        assert len(committed_in_trail(trail, record_id)) == 1
    verification = verify_trail([trail])
    assert verification.ok, verification.problem
    types = [entry.type for entry in iter_entries([trail]) if entry.event["operation"] == "add"]
    assert types == ["memory.write.requested", "memory.write.committed"]
    assert len(files_in(trail)) == 1
