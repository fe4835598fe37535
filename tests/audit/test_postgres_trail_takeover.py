"""A sequencer killed mid-batch (its process SIGKILLed inside the batch's transaction)
loses its advisory lock with its connection, its batch rolls back as a whole, and
another node's sequencer takes over where the last committed batch left the chain:
nothing lost, nothing doubled, one chain that verifies from its genesis."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from governed_memory.audit import verify_trail
from governed_memory_native.postgres.trail.sequencer import sequencer_lock_key
from governed_memory_native.postgres.trail.sink import postgres_trail_from_config
from postgres_support import (
    POSTGRES_DSN,
    advisory_locks,
    drop_schemas,
    postgres_config,
    require_postgres_package,
)
from trail_support import duplicates, execute, stored, trail_events

require_postgres_package()

CHILD = Path(__file__).with_name("trail_sequencer_child.py")
COUNT = 20
BATCH = 8

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL")


@pytest.fixture(scope="module", autouse=True)
def _schemas() -> Iterator[None]:
    yield
    drop_schemas()


def kill_mid_batch(schema: str) -> int:
    """Run the child until it is inside its second batch, SIGKILL it; returns how many
    entries that batch was about to append."""
    process = subprocess.Popen([sys.executable, str(CHILD), POSTGRES_DSN, schema, str(COUNT),
                                str(BATCH)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.strip() == b"recorded", process.stderr.read() if process.stderr else line
        line = process.stdout.readline()
        assert line.startswith(b"mid-batch "), process.stderr.read() if process.stderr else line
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait(timeout=60)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
    assert process.returncode == -signal.SIGKILL
    return int(line.split()[1])


async def test_another_node_takes_over_from_a_sequencer_killed_mid_batch(
        tmp_path: Path) -> None:
    schema = postgres_config(tmp_path)["schema"]
    in_flight = kill_mid_batch(schema)
    assert in_flight == BATCH

    # The server ends the dead sequencer's session, and its batch with it.
    deadline = time.monotonic() + 60
    while advisory_locks(sequencer_lock_key(schema)):
        assert time.monotonic() < deadline, "the killed sequencer's lock was never released"
        await asyncio.sleep(0.05)
    assert execute(schema, "SELECT entries FROM audit_chain") == [(BATCH,)]
    assert execute(schema, "SELECT count(*) FROM audit_entries") == [(BATCH,)]
    assert execute(schema, "SELECT count(*) FROM audit_intake") == [(2 * COUNT - BATCH,)]

    # Another node: its background sequencer takes the rest.
    other = postgres_trail_from_config({"dsn": POSTGRES_DSN, "schema": schema,
                                        "batch": BATCH, "interval_s": 0.05})
    try:
        await other.check()  # opens it: the sequencer starts
        deadline = time.monotonic() + 60
        while execute(schema, "SELECT count(*) FROM audit_intake") != [(0,)]:
            assert time.monotonic() < deadline, "no sequencer took over"
            await asyncio.sleep(0.05)
    finally:
        await other.close()

    events = trail_events(schema)
    ids = [event["event_id"] for event in events]
    assert len(ids) == 2 * COUNT and duplicates(ids) == []
    committed = {record for event in events if event["type"] == "memory.write.committed"
                 for record in event["record_ids"]}
    assert len(committed) == COUNT
    with stored(schema) as trail:
        verification = verify_trail([trail])
    assert verification.ok, verification.problem
    assert verification.entries == 2 * COUNT and verification.first_seq == 0
