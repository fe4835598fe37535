"""After an erasure commits, the SQLite file holds nothing of the erased record.

The lexical index is plain tables (``lexical_postings`` and ``lexical_terms`` hold the
words; FTS5 and its segments, which kept erased terms until a merge, are gone since
schema v9), and since schema v11 a record's words may still sit in its scope's delta
(``lexical_delta``), or its merged postings may be hidden by a tombstone
(``lexical_tombstones``) until the next merge. These tests erase a record carrying a
marker word in every way the provider erases, with the record in each of those places,
then read every table of the file, and the raw bytes of the database and its WAL after
a checkpoint, looking for the marker.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from governed_memory import MemoryRecord, Scope
from governed_memory.clock import ManualClock
from governed_memory.requests import (
    AddRequest,
    DeleteAllRequest,
    DeleteRequest,
    DeleteUserRequest,
    PurgeExpiredRequest,
    SearchRequest,
    UpdateRequest,
)
from governed_memory_native import NativeMemoryProvider, build_native_provider
from governed_memory_native.retrieval.tokens import words
from lexical_support import check_sqlite_index, table_counts
from native_support import OTHER_USER, USER_SCOPE, make_ctx, note

FILLER = ("tea", "green", "hike", "mountain", "coffee", "monday", "report", "launch",
          "carol", "office", "window", "seat", "zebra", "zone", "quiet", "query")
MARKER = "zzqxjresidue"
# Look for the tail of the marker's stem (the term the index stores; the content's word
# starts with it too), which no other term shares a prefix with (B-tree pages may
# prefix-compress neighbouring keys).
NEEDLE = words(MARKER)[0][2:].encode()
assert MARKER.encode().startswith(b"zz" + NEEDLE)


def _rows_holding_needle(path: Path) -> dict[str, int]:
    """For every table of the file (shadow tables too), how many rows hold the needle."""
    conn = sqlite3.connect(path)
    try:
        tables = [row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        found = {}
        for table in tables:
            count = 0
            for row in conn.execute(f'SELECT * FROM "{table}"'):
                for value in row:
                    raw = value.encode() if isinstance(value, str) else value
                    if isinstance(raw, bytes) and NEEDLE in raw.lower():
                        count += 1
                        break
            found[table] = count
        return found
    finally:
        conn.close()


def _bytes_holding_needle(path: Path) -> int:
    """Occurrences in the raw database file and WAL, after a truncating checkpoint."""
    conn = sqlite3.connect(path)
    try:
        busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        assert busy == 0
    finally:
        conn.close()
    wal = path.with_name(path.name + "-wal")
    return sum(file.read_bytes().lower().count(NEEDLE) for file in (path, wal)
               if file.exists())


async def _fill(provider: NativeMemoryProvider, clock: ManualClock, scope: Scope,
                count: int, rng: random.Random) -> None:
    """Other records, each its own transaction, so the index has several segments."""
    for _ in range(count):
        text = " ".join(rng.choices(FILLER, k=12))
        await provider.add(note(text, scope=scope), make_ctx(clock))


Erasure = Callable[[NativeMemoryProvider, ManualClock, MemoryRecord], Awaitable[object]]


async def _hard_delete(provider: NativeMemoryProvider, clock: ManualClock,
                       record: MemoryRecord) -> object:
    return await provider.delete(DeleteRequest(scope=record.scope, record_id=record.id,
                                               hard=True), make_ctx(clock))


async def _hard_delete_tombstone(provider: NativeMemoryProvider, clock: ManualClock,
                                 record: MemoryRecord) -> object:
    await provider.delete(DeleteRequest(scope=record.scope, record_id=record.id),
                          make_ctx(clock))
    return await _hard_delete(provider, clock, record)


async def _hard_delete_updated(provider: NativeMemoryProvider, clock: ManualClock,
                               record: MemoryRecord) -> object:
    await provider.update(UpdateRequest(scope=record.scope, record_id=record.id,
                                        content=f"now {MARKER} twice {MARKER}"),
                          make_ctx(clock))
    return await _hard_delete(provider, clock, record)


async def _delete_user(provider: NativeMemoryProvider, clock: ManualClock,
                       record: MemoryRecord) -> object:
    assert record.scope.user_id is not None
    return await provider.delete_user(
        DeleteUserRequest(tenant_id=record.scope.tenant_id, user_id=record.scope.user_id),
        make_ctx(clock))


async def _delete_all(provider: NativeMemoryProvider, clock: ManualClock,
                      record: MemoryRecord) -> object:
    return await provider.delete_all(DeleteAllRequest(scope=record.scope), make_ctx(clock))


async def _purge_expired(provider: NativeMemoryProvider, clock: ManualClock,
                         record: MemoryRecord) -> object:
    assert record.expires_at is not None
    clock.set(record.expires_at)
    page = await provider.purge_expired(PurgeExpiredRequest(scope=record.scope),
                                        make_ctx(clock))
    assert page.deleted == 1
    return page


async def _add_over_expired_key(provider: NativeMemoryProvider, clock: ManualClock,
                                record: MemoryRecord) -> object:
    assert record.expires_at is not None and record.key is not None
    clock.set(record.expires_at)
    return await provider.add(note("a new holder of the key", key=record.key),
                              make_ctx(clock))


# Where the marker record's words are when it is erased: in its scope's delta (the
# default bound, never reached here), merged into the main tables (a delta of two rows,
# merged before the erasure), or written there directly (no delta).
PLACES: dict[str, int] = {"delta": 128, "merged": 2, "eager": 0}


async def _settled(provider: NativeMemoryProvider) -> None:
    merger = provider.lexical_merger
    if merger is not None:
        await merger.flush()


ERASURES: dict[str, Erasure] = {
    "hard delete": _hard_delete,
    "hard delete of a tombstone": _hard_delete_tombstone,
    "hard delete after an update": _hard_delete_updated,
    "delete_user": _delete_user,
    "delete_all": _delete_all,
    "purge_expired": _purge_expired,
    "add over an expired key": _add_over_expired_key,
}


@pytest.mark.parametrize("place", list(PLACES))
@pytest.mark.parametrize("kind", list(ERASURES))
async def test_erasure_leaves_no_trace_in_any_table_or_file(
        tmp_path: Path, clock: ManualClock, kind: str, place: str) -> None:
    path = tmp_path / "memory.db"
    provider = build_native_provider({"path": str(path), "lexical_delta_max": PLACES[place]},
                                     clock)
    await provider.start()
    rng = random.Random(kind)
    try:
        await _fill(provider, clock, OTHER_USER, 40, rng)
        expiring = kind in ("purge_expired", "add over an expired key")
        record = await provider.add(AddRequest(
            scope=USER_SCOPE, content=f"the code word is {MARKER}, keep it",
            key="code-word", metadata={"note": MARKER},
            expires_at=clock.now() + 60 if expiring else None,
        ), make_ctx(clock))
        await _fill(provider, clock, OTHER_USER, 40, rng)
        await _fill(provider, clock, USER_SCOPE, 5, rng)
        await _settled(provider)
        before = _rows_holding_needle(path)
        assert before["memory_records"] == 1
        if place == "delta":
            assert (before["lexical_delta"], before["lexical_postings"]) == (1, 0)
        else:
            assert before["lexical_postings"] == 1 and before["lexical_terms"] == 1
            assert before["lexical_delta"] == 0

        await ERASURES[kind](provider, clock, record)

        after = _rows_holding_needle(path)
        assert {table: count for table, count in after.items() if count} == {}
        check_sqlite_index(path)
        search = await provider.search(
            SearchRequest(scopes=(USER_SCOPE,), query=MARKER), make_ctx(clock))
        assert search.hits == ()
    finally:
        await provider.close()
    assert _bytes_holding_needle(path) == 0


@pytest.mark.parametrize("place", list(PLACES))
async def test_soft_delete_unindexes_but_keeps_the_history(tmp_path: Path,
                                                           clock: ManualClock,
                                                           place: str) -> None:
    """A soft delete takes the record out of the lexical index (its content stays in the
    record and its history by design). A merged record's postings are hidden by a
    tombstone at once and removed by the next merge; an unmerged one's delta row goes."""
    path = tmp_path / "memory.db"
    provider = build_native_provider({"path": str(path), "lexical_delta_max": PLACES[place]},
                                     clock)
    await provider.start()
    try:
        await _fill(provider, clock, OTHER_USER, 20, random.Random(1))
        record = await provider.add(note(f"the code word is {MARKER}"), make_ctx(clock))
        await _fill(provider, clock, USER_SCOPE, 3, random.Random(2))
        await _settled(provider)
        await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=record.id),
                              make_ctx(clock))
        found = _rows_holding_needle(path)
        assert found["memory_records"] == 1 and found["memory_versions"] == 2
        assert found["lexical_delta"] == 0
        if place == "merged":  # hidden, not yet removed: one tombstone names it
            assert found["lexical_postings"] == 1 and table_counts(path)[
                "lexical_tombstones"] == 1
        else:
            assert found["lexical_postings"] == 0 and found["lexical_terms"] == 0
        check_sqlite_index(path)
        search = await provider.search(SearchRequest(scopes=(USER_SCOPE,), query=MARKER),
                                       make_ctx(clock))
        assert search.hits == ()
        if place == "merged":  # the next merge removes the hidden postings for good
            await _fill(provider, clock, USER_SCOPE, 2, random.Random(3))
            await _settled(provider)
            found = _rows_holding_needle(path)
            assert found["lexical_postings"] == 0 and found["lexical_terms"] == 0
        # a later hard delete of the tombstone clears the rest
        await _hard_delete(provider, clock, record)
        assert {table: n for table, n in _rows_holding_needle(path).items() if n} == {}
    finally:
        await provider.close()
    assert _bytes_holding_needle(path) == 0
