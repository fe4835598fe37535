"""A node whose trail sequencer is killed mid-batch (run by
test_postgres_trail_takeover.py).

It records COUNT adds through a manager whose PostgreSQL trail does not sequence, so
every event waits in the intake, prints ``recorded``; then it sequences in batches of
BATCH: the first batch commits, and inside the second, with its entries inserted and
its intake rows deleted but not yet committed, it prints ``mid-batch N`` and waits for
the parent's SIGKILL.

usage: trail_sequencer_child.py DSN SCHEMA COUNT BATCH
"""

from __future__ import annotations

import asyncio
import os
import sys

from governed_memory.clock import SystemClock
from governed_memory.manager import GovernedMemoryManager
from governed_memory.principal import Permission, Principal, PrincipalKind
from governed_memory.scope import Scope
from governed_memory_native import build_native_provider
from governed_memory_native.postgres.trail.sink import PostgresTrailSink, parse_trail_config


async def main(dsn: str, schema: str, count: int, batch: int) -> None:
    config = {"backend": "postgres", "dsn": dsn, "schema": schema}
    recorder = PostgresTrailSink(parse_trail_config(
        {"provider": "native", "provider_config": config, "sequence": False}))
    alice = Principal("user:alice", PrincipalKind.USER, "acme", "alice",
                      frozenset({Permission.READ, Permission.WRITE}))
    async with GovernedMemoryManager(build_native_provider(config, SystemClock()),
                                     sinks=[recorder], fail_closed=True) as manager:
        for n in range(count):
            await manager.add(alice, Scope("acme", user_id="alice"), f"note {n}")
    os.write(1, b"recorded\n")

    batches = 0

    async def stop_in_the_second(appended: int) -> None:
        nonlocal batches
        batches += 1
        if batches == 2:
            os.write(1, f"mid-batch {appended}\n".encode())
            await asyncio.sleep(3600)

    sequencer = PostgresTrailSink(parse_trail_config(
        {"dsn": dsn, "schema": schema, "batch": batch, "sequence": False}),
        before_commit=stop_in_the_second)
    await sequencer.sequence()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
