"""Cancelling PostgreSQL operations at arbitrary points never leaves a transaction open,
a writer lock held, or a write half-applied.

psycopg cancels the running statement on the server when the awaiting task is
cancelled; the unit then rolls back and the pool replaces a connection it cannot trust.
These tests cancel adds, updates and searches after a range of delays (so the
cancellation lands on connecting, locking, each round trip and COMMIT in turn) and then
check what a second, impatient provider sees.

Both providers store retrieval snapshots in the background (``[retrieval] snapshots =
batched``: a flush ~50 ms after a search, in a write transaction of its own, under the
same ``application_name``). The final check flushes them first: it once counted the
impatient provider's flush, in flight right then, as a transaction left open.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest
from governed_memory import MemoryRecord
from governed_memory.clock import ManualClock
from governed_memory.requests import GetRequest, HistoryRequest, SearchRequest, UpdateRequest
from governed_memory_native import build_native_provider
from native_support import USER_SCOPE, config_for, make_ctx, note
from postgres_support import POSTGRES_DSN, advisory_locks, require_postgres_package

require_postgres_package()

import psycopg  # noqa: E402
from governed_memory_native.postgres.locks import (  # noqa: E402
    tenant_lock_key,
    writer_lock_key,
)

DELAYS = tuple(n * 0.0007 for n in range(24))


def _open_transactions(schema: str) -> int:
    """This schema's pooled sessions that are still inside a transaction."""
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
            " AND state <> 'idle'", (f"governed-memory/{schema}",)).fetchone()
    return int(row[0]) if row else 0


@pytest.mark.parametrize("operation", ["add", "update", "search"])
async def test_cancelled_operations_leave_nothing_behind(tmp_path: Path, clock: ManualClock,
                                                         operation: str) -> None:
    config = config_for("postgres", tmp_path)
    provider = build_native_provider(config, clock)
    impatient = build_native_provider({**config, "busy_timeout_ms": 0}, clock)
    await provider.start()
    await impatient.start()
    try:
        current: MemoryRecord = await provider.add(note("count 0"), make_ctx(clock))
        for n, delay in enumerate(DELAYS):
            call: Coroutine[Any, Any, object]
            if operation == "add":
                call = provider.add(note(f"added {n}", key=f"k{n}", idempotency_key=f"i{n}"),
                                    make_ctx(clock))
            elif operation == "update":
                call = provider.update(UpdateRequest(
                    scope=USER_SCOPE, record_id=current.id, content=f"count {n + 1}",
                    expected_revision=current.revision), make_ctx(clock))
            else:
                call = provider.search(SearchRequest(scopes=(USER_SCOPE,), query="count"),
                                       make_ctx(clock))
            task = asyncio.create_task(call)
            await asyncio.sleep(delay)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            # the writer lock is free: an impatient writer gets it at once
            await impatient.add(note(f"probe {n}"), make_ctx(clock))
            latest = await impatient.get(GetRequest(scope=USER_SCOPE, record_id=current.id),
                                         make_ctx(clock))
            history = await impatient.history(
                HistoryRequest(scope=USER_SCOPE, record_id=current.id), make_ctx(clock))
            assert [v.record.revision for v in history][-1] == latest.revision
            assert len(history) == latest.version  # a version per applied update, no more
            current = latest
            if operation == "add":
                found = await impatient.search(
                    SearchRequest(scopes=(USER_SCOPE,), query=f"added {n}", limit=100),
                    make_ctx(clock))
                applied = [h.record for h in found.hits if h.record.content == f"added {n}"]
                assert len(applied) <= 1
                replay = await impatient.add(
                    note(f"added {n}", key=f"k{n}", idempotency_key=f"i{n}"), make_ctx(clock))
                assert not applied or replay.id == applied[0].id  # all of it or none of it
        # the provider whose operations were cancelled still works, and none of its
        # pooled connections was returned inside a transaction or holding a lock; the
        # background snapshot flushes are done first, so none of them is in flight
        await provider.add(note("after the storm"), make_ctx(clock))
        await provider.flush_snapshots()
        await impatient.flush_snapshots()
        assert _open_transactions(config["schema"]) == 0
        schema = config["schema"]
        assert advisory_locks(writer_lock_key(schema)) == []
        assert advisory_locks(tenant_lock_key(schema, USER_SCOPE.tenant_id)) == []
    finally:
        await provider.close()
        await impatient.close()
