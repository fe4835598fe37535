"""A writer that dies between commit and delivery (run by test_crash_delivery.py).

It writes one memory through the manager over a native SQLite provider with an audit
sink, next to a sink that announces the committed event and then hangs, so the parent
can SIGKILL it at exactly that moment: the record and its event are committed, the
event is not yet acknowledged (and, with ``hang-first``, not in the trail either).

usage: crash_child.py DB TRAIL hang-first|hang-last
"""

from __future__ import annotations

import asyncio
import os
import sys

from governed_memory.audit import AuditSink
from governed_memory.clock import SystemClock
from governed_memory.events import MemoryEvent
from governed_memory.manager import GovernedMemoryManager
from governed_memory.principal import Permission, Principal, PrincipalKind
from governed_memory.scope import Scope
from governed_memory_native import build_native_provider


class HangOnCommit:
    name = "hang"

    async def emit(self, event: MemoryEvent) -> None:
        if event.type == "memory.write.committed":
            os.write(1, f"committed {event.record_ids[0]}\n".encode())
            await asyncio.sleep(3600)  # a wedged sink

    async def close(self) -> None:
        return None


async def main(db: str, trail: str, order: str) -> None:
    clock = SystemClock()
    provider = build_native_provider({"backend": "sqlite", "path": db}, clock)
    audit = AuditSink(trail)
    sinks = [HangOnCommit(), audit] if order == "hang-first" else [audit, HangOnCommit()]
    alice = Principal("user:alice", PrincipalKind.USER, "acme", "alice",
                      frozenset({Permission.READ, Permission.WRITE}))
    async with GovernedMemoryManager(provider, clock=clock, sinks=sinks) as manager:
        os.write(1, b"ready\n")
        await manager.add(alice, Scope("acme", user_id="alice"), "written before the crash")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
