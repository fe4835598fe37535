"""A writer process killed mid-stream, for the outbox crash test of each SQL backend.

The claim (no committed record loses its event when the writing process dies) is the
same on SQLite and PostgreSQL, so ``test_native_event_outbox`` makes it once over both;
this module holds the process that is killed and the read-back.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import textwrap
from pathlib import Path
from typing import Any

from governed_memory.clock import ManualClock
from governed_memory.requests import ListRequest
from governed_memory_native import build_native_provider
from native_support import USER_SCOPE, make_ctx

_WRITER = textwrap.dedent("""
    import asyncio, json, sys
    sys.path[:0] = [{tests!r}, {native!r}]
    from governed_memory.clock import ManualClock
    from governed_memory_native import build_native_provider
    from native_support import note
    from outbox_support import outbox_ctx

    async def main():
        clock = ManualClock()
        provider = build_native_provider(json.loads({config!r}), clock)
        await provider.start()
        n = 0
        while True:
            await provider.add(note(f"note {{n}}"), outbox_ctx(clock))
            n += 1
            if n == 5:
                print("ready", flush=True)

    asyncio.run(main())
""")


async def kill_writers(config: dict[str, Any], rounds: int = 3) -> None:
    """Start a process adding notes with outbox events; SIGKILL it at a later point each
    round, once it has written a few."""
    here = Path(__file__).parent
    script = _WRITER.format(tests=str(here.parent), native=str(here),
                            config=json.dumps(config))
    for round_ in range(rounds):
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", script, stdout=asyncio.subprocess.PIPE)
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), timeout=60)
        assert line.strip() == b"ready", line
        await asyncio.sleep(0.05 * (round_ + 1))
        process.send_signal(signal.SIGKILL)
        await process.wait()


async def records_and_event_ids(config: dict[str, Any],
                                clock: ManualClock) -> tuple[set[str], list[str]]:
    """Reopen the store: the ids of the records it kept, and the record id each stored
    event names (the events are acknowledged as they are read)."""
    provider = build_native_provider(config, clock)
    await provider.start()
    try:
        records: set[str] = set()
        cursor = None
        while True:
            page = await provider.list(ListRequest(scope=USER_SCOPE, limit=100, cursor=cursor),
                                       make_ctx(clock))
            records.update(r.id for r in page.items)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        named: list[str] = []
        while events := await provider.pending_events(1000):
            named.extend(e.record_ids[0] for e in events)
            await provider.acknowledge_events([e.event_id for e in events])
        return records, named
    finally:
        await provider.close()
