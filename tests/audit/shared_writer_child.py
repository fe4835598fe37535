"""A writer sharing a trail with others (run by test_shared_trail.py).

It waits for the parent's go (a line on stdin) so the writers start together, then
appends COUNT events whose ids carry WRITER, rotating at MAX_FILE_BYTES.

usage: shared_writer_child.py TRAIL WRITER COUNT MAX_FILE_BYTES FSYNC
"""

from __future__ import annotations

import asyncio
import sys

from governed_memory.audit import AuditSink
from governed_memory.events import MemoryEvent


async def main(trail: str, writer: str, count: int, max_file_bytes: int, fsync: str) -> None:
    sink = AuditSink(trail, max_file_bytes=max_file_bytes, fsync=fsync)
    await sink.open()
    print("ready", flush=True)
    sys.stdin.readline()
    for n in range(count):
        await sink.emit(MemoryEvent(
            event_id=f"evt_{writer}.{n}", type="memory.write.committed",
            occurred_at=1_700_000_000.0 + n, operation_id=f"op_{writer}{n}",
            operation="add", principal_id=f"svc:{writer}", tenant_id="acme",
            outcome="committed", count=1))
    await sink.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                     sys.argv[5]))
