"""The SQLite lexical delta (``sqlite_lexical``, ``lexical_merger``): writes go to one
delta row per record, merges run in the background in their own write unit, and the
index stays exact through full deltas, crashes, cancellations and a second process.

Every test checks the stored tables against the index the records call for
(``lexical_support.check_sqlite_index``) and searches against exhaustive BM25.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
import sqlite3
import struct
import sys
import textwrap
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from governed_memory.clock import ManualClock
from governed_memory.errors import MemoryConfigurationError
from governed_memory.ids import new_id, new_revision
from governed_memory.records import (
    IndexState,
    MemoryRecord,
    MemoryType,
    RecordStatus,
    content_hash,
)
from governed_memory.requests import DeleteRequest, UpdateRequest
from governed_memory_native import NativeMemoryProvider, build_native_provider
from governed_memory_native.config import (
    DEFAULT_LEXICAL_DELTA_MAX,
    parse_indexing_config,
)
from governed_memory_native.retrieval.bm25 import Document, score_documents
from governed_memory_native.retrieval.tokens import words
from governed_memory_native.sqlite.backend import SqliteBackend
from governed_memory_native.sqlite.lexical import _statistics_sql
from governed_memory_native.sqlite.transaction import SqliteTransaction
from governed_memory_native.storage.port import SearchQuery
from lexical_support import check_sqlite_index, table_counts
from native_support import OTHER_USER, USER_SCOPE, make_ctx, note

WORDS = ("tea", "green", "dark", "mode", "billing", "hike", "the", "a", "zebra", "quiet")
NOW = 1_000_000.0


def _text(rng: random.Random, size: int = 8) -> str:
    return " ".join(rng.choices(WORDS, k=size))


def _record(content: str, scope: Any = USER_SCOPE) -> MemoryRecord:
    return MemoryRecord(
        id=new_id(), scope=scope, scope_hash=scope.scope_hash, content=content,
        memory_type=MemoryType.NOTE, version=1, revision=new_revision(),
        content_hash=content_hash(content), status=RecordStatus.ACTIVE,
        created_at=NOW - 10, updated_at=NOW - 10, index_state=IndexState.INDEXED)


async def _insert_all(backend: SqliteBackend, records: list[Any]) -> None:
    """Store ``records`` in one write unit, as a batch of adds would."""

    async def insert(tx: Any) -> None:
        for record in records:
            await tx.records.insert(record)

    await backend.run_write(insert)


def _exhaustive(path: Path, tokens: tuple[str, ...], limit: int) -> list[tuple[str, float]]:
    """BM25 top ``limit`` over the active records of USER_SCOPE, from the rows alone."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute("SELECT id, content FROM memory_records WHERE scope_hash = ?"
                            " AND status = 'active'", (USER_SCOPE.scope_hash,)).fetchall()
    finally:
        conn.close()
    corpus = [Document(str(rid), Counter(words(content)), len(words(content)))
              for rid, content in rows]
    scores = score_documents(corpus, tokens)
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:limit]


async def _searched(backend: Any, tokens: tuple[str, ...],
                    limit: int = 5) -> list[tuple[str, float]]:
    query = SearchQuery(scope_hashes=(USER_SCOPE.scope_hash,), tokens=tokens, now=NOW,
                        limit=limit)
    page = await backend.run_read(lambda tx: tx.postings.search(query))
    return [(match.record.id, match.score) for match in page.matches]


async def _assert_exact(backend: Any, path: Path) -> None:
    check_sqlite_index(path)
    for tokens in (("tea",), ("green", "zebra"), ("the", "quiet", "mode"), ("absent",)):
        assert await _searched(backend, tokens) == _exhaustive(path, tokens, 5), tokens


def _sqlite(provider: NativeMemoryProvider) -> SqliteBackend:
    backend = provider.backend
    assert isinstance(backend, SqliteBackend)
    return backend


def _pending(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        row = conn.execute("SELECT coalesce(sum(pending), 0) FROM lexical_scopes").fetchone()
        return int(row[0])
    finally:
        conn.close()


# -- configuration --------------------------------------------------------------------


def test_lexical_delta_max_is_checked_at_load(tmp_path: Path) -> None:
    assert parse_indexing_config({}).lexical_delta_max == DEFAULT_LEXICAL_DELTA_MAX
    assert parse_indexing_config({"lexical_delta_max": 0}).lexical_delta_max == 0
    assert parse_indexing_config({"lexical_delta_max": 10_000}).lexical_delta_max == 10_000
    for bad in (-1, 10_001, 1.5, "64", True, None):
        with pytest.raises(MemoryConfigurationError, match="lexical_delta_max"):
            build_native_provider({"path": str(tmp_path / "m.db"), "lexical_delta_max": bad},
                                  ManualClock())


async def test_memory_and_postgres_keep_no_delta(clock: ManualClock) -> None:
    provider = build_native_provider({"backend": "memory", "lexical_delta_max": 4}, clock)
    assert provider.lexical_merger is None


# -- the delta and its merge ----------------------------------------------------------


async def test_writes_fill_the_delta_and_a_background_merge_empties_it(
        tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "memory.db"
    provider = build_native_provider({"path": str(path), "lexical_delta_max": 4}, clock)
    await provider.start()
    backend = provider.backend
    assert isinstance(backend, SqliteBackend) and provider.lexical_merger is not None
    rng = random.Random(1)
    try:
        for _ in range(3):
            await provider.add(note(_text(rng)), make_ctx(clock))
        counts = table_counts(path)
        assert (counts["lexical_delta"], counts["lexical_postings"],
                counts["lexical_terms"]) == (3, 0, 0)
        await _assert_exact(backend, path)
        await provider.add(note(_text(rng)), make_ctx(clock))
        # the write that filled the delta returned before any merge ran: it is queued
        assert table_counts(path)["lexical_delta"] == 4 and backend.stats.merges == 0
        assert provider.lexical_merger.due
        await _assert_exact(backend, path)  # a search meanwhile is exact
        await provider.lexical_merger.flush()
        assert (backend.stats.merges, backend.stats.merged_rows) == (1, 4)
        counts = table_counts(path)
        assert counts["lexical_delta"] == 0 and counts["lexical_postings"] > 0
        await _assert_exact(backend, path)
    finally:
        await provider.close()


async def test_updates_and_soft_deletes_of_merged_records_write_tombstones(
        tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "memory.db"
    provider = build_native_provider({"path": str(path), "lexical_delta_max": 6}, clock)
    await provider.start()
    merger = provider.lexical_merger
    assert merger is not None
    try:
        kept = [await provider.add(note(f"green tea number {n}"), make_ctx(clock))
                for n in range(6)]
        await merger.flush()
        assert _pending(path) == 0
        updated = await provider.update(UpdateRequest(
            scope=USER_SCOPE, record_id=kept[0].id, content="zebra crossing"),
            make_ctx(clock))
        counts = table_counts(path)
        assert (counts["lexical_tombstones"], counts["lexical_delta"]) == (1, 1)
        await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=kept[1].id),
                              make_ctx(clock))
        assert table_counts(path)["lexical_tombstones"] == 2
        await _assert_exact(provider.backend, path)
        assert [hit for hit, _ in await _searched(provider.backend, ("zebra",))] == [
            updated.id]
        found = [hit for hit, _ in await _searched(provider.backend, ("green",), limit=10)]
        assert sorted(found) == sorted(record.id for record in kept[2:])
        # an update of a record still in the delta only replaces its delta row
        await provider.update(UpdateRequest(scope=USER_SCOPE, record_id=kept[0].id,
                                            content="quiet zebra"), make_ctx(clock))
        assert table_counts(path)["lexical_delta"] == 1 and _pending(path) == 3
        await _assert_exact(provider.backend, path)
    finally:
        await provider.close()


async def test_a_full_delta_without_a_merger_indexes_directly(tmp_path: Path) -> None:
    """A backend nobody merges for (another process's tooling, seeding through the
    port) never lets a delta grow past the bound: writes go to the main tables."""
    path = tmp_path / "memory.db"
    backend = SqliteBackend(path, busy_timeout_ms=5000, lexical_delta_max=3)
    await backend.open()
    rng = random.Random(2)
    try:
        records = [_record(_text(rng)) for _ in range(10)]
        await _insert_all(backend, records)
        counts = table_counts(path)
        assert counts["lexical_delta"] == 3 and counts["lexical_postings"] > 0
        await _assert_exact(backend, path)
        # updates of merged records find no room for a tombstone: they go direct too
        for record in records[5:8]:
            changed = attrs.evolve(record, content=_text(rng), version=2,
                                   revision=new_revision())

            async def replace(tx: Any, changed: MemoryRecord = changed,
                              record: MemoryRecord = record) -> None:
                assert await tx.records.replace(changed, record.revision)

            await backend.run_write(replace)
        assert _pending(path) == 3
        await _assert_exact(backend, path)
        assert await backend.merge_lexical_delta([1]) == 3
        assert _pending(path) == 0 and backend.stats.merges == 1
        await _assert_exact(backend, path)
    finally:
        await backend.close()


async def test_close_runs_the_merges_already_reported(tmp_path: Path,
                                                       clock: ManualClock) -> None:
    path = tmp_path / "memory.db"
    provider = build_native_provider({"path": str(path), "lexical_delta_max": 5}, clock)
    await provider.start()
    rng = random.Random(3)
    for _ in range(5):
        await provider.add(note(_text(rng)), make_ctx(clock))
    await provider.close()
    assert _pending(path) == 0
    check_sqlite_index(path)


def _wal_pages(path: Path) -> list[int]:
    data = Path(f"{path}-wal").read_bytes()
    size = 4096 + 24
    return [struct.unpack(">I", data[at:at + 4])[0]
            for at in range(32, len(data) - size + 1, size)]


async def test_an_add_into_the_delta_writes_no_page_of_the_main_index(
        tmp_path: Path, clock: ManualClock) -> None:
    """The point of the delta, as pages: the WAL frames of an add name no page of
    ``lexical_postings``, ``lexical_terms`` or the expiry index, and one of the delta."""
    path = tmp_path / "memory.db"
    provider = build_native_provider({"path": str(path), "lexical_delta_max": 20}, clock)
    await provider.start()
    rng = random.Random(4)
    try:
        for _ in range(41):  # merged: a few pages of postings; room left in the delta
            await provider.add(note(_text(rng, 12), scope=OTHER_USER), make_ctx(clock))
        assert provider.lexical_merger is not None
        await provider.lexical_merger.flush()
        assert table_counts(path)["lexical_postings"] > 0 and _pending(path) < 19
        assert isinstance(provider.backend, SqliteBackend)
        await provider.backend.scrub()  # checkpoint: the WAL starts empty
        await provider.add(note(_text(rng, 12), scope=OTHER_USER), make_ctx(clock))
        conn = sqlite3.connect(path)
        try:
            try:
                owners = dict(conn.execute("SELECT pageno, name FROM dbstat"))
            except sqlite3.OperationalError:
                pytest.skip("this SQLite has no dbstat table")
        finally:
            conn.close()
        written = Counter(owners.get(page, "?") for page in _wal_pages(path))
        assert written["lexical_delta"] == 1
        for table in ("lexical_postings", "lexical_terms", "lexical_postings_doc",
                      "memory_records_corpus"):
            assert written[table] == 0, (table, written)
    finally:
        await provider.close()


def test_a_search_probes_tombstones_by_key() -> None:
    """The tombstone part of the statistics reads each tombstone's postings by key;
    the other join order would walk every posting of a common word."""
    conn = sqlite3.connect(":memory:")
    from governed_memory_native.sqlite.connection import register_functions
    from governed_memory_native.sqlite.schema import MIGRATIONS

    register_functions(conn)
    for migration in MIGRATIONS:
        for statement in migration.statements:
            conn.execute(statement)
    plan = [row[3] for row in conn.execute(
        "EXPLAIN QUERY PLAN " + _statistics_sql(1, 2, "1", ""),
        ["h", "a", "b", "a", "b", "h", NOW, "a", "$.a", '"a":', "b", "$.b", '"b":', "a", "b"])]
    conn.close()
    assert any(step.startswith("SEARCH t USING PRIMARY KEY") for step in plan), plan
    assert not any("SCAN p" in step or "SCAN t" in step for step in plan), plan


# -- crashes, cancellation, a second process ------------------------------------------

_MERGING_WRITER = textwrap.dedent("""
    import asyncio, json, sys, time
    sys.path[:0] = [{tests!r}, {native!r}]
    from governed_memory.clock import SystemClock
    from governed_memory_native import build_native_provider
    from governed_memory_native import sqlite_lexical
    from native_support import note, make_ctx

    hold = {hold!r}
    merge_scope = sqlite_lexical.LexicalWrites._merge_scope

    async def held(self, scope_id):
        await merge_scope(self, scope_id)
        print("merged, not committed", flush=True)
        time.sleep(600)  # the unit never reaches COMMIT

    if hold:
        sqlite_lexical.LexicalWrites._merge_scope = held

    async def main():
        clock = SystemClock()
        provider = build_native_provider(json.loads({config!r}), clock)
        await provider.start()
        n = 0
        words = ["tea", "green", "dark", "mode", "zebra", "hike", "quiet", "the", "a"]
        while True:
            text = " ".join(words[(n * k + k * k) % 9] for k in range(1, 1 + n % 7 + 2))
            record = await provider.add(note(text), make_ctx(clock))
            if n % 3 == 0:
                from governed_memory.requests import UpdateRequest
                await provider.update(UpdateRequest(
                    scope=record.scope, record_id=record.id, content=text + " again"),
                    make_ctx(clock))
            n += 1
            if n == 10:
                print("ready", flush=True)

    asyncio.run(main())
""")


async def _writer(path: Path, *, hold: bool, bound: int) -> asyncio.subprocess.Process:
    here = Path(__file__).parent
    import json
    script = _MERGING_WRITER.format(
        tests=str(here.parent), native=str(here), hold=hold,
        config=json.dumps({"path": str(path), "lexical_delta_max": bound}))
    return await asyncio.create_subprocess_exec(sys.executable, "-c", script,
                                                stdout=asyncio.subprocess.PIPE)


async def test_a_process_killed_mid_merge_leaves_the_delta_unmerged(
        tmp_path: Path) -> None:
    """The merge is one transaction: a writer killed after every merge statement ran
    but before COMMIT leaves the delta as it was, and the next merge works."""
    path = tmp_path / "memory.db"
    process = await _writer(path, hold=True, bound=12)
    assert process.stdout is not None
    while (line := await asyncio.wait_for(process.stdout.readline(), timeout=60)) != (
            b"merged, not committed\n"):
        assert line, "the writer ended before it merged"
    process.send_signal(signal.SIGKILL)
    await process.wait()
    assert _pending(path) >= 6  # the killed merge did not count
    backend = SqliteBackend(path, busy_timeout_ms=5000, lexical_delta_max=12)
    await backend.open()
    try:
        await _assert_exact(backend, path)
        assert await backend.merge_lexical_delta([1]) > 0
        assert _pending(path) == 0
        await _assert_exact(backend, path)
    finally:
        await backend.close()


async def test_writers_killed_at_random_points_leave_an_exact_index(
        tmp_path: Path) -> None:
    """A process adding and updating with a tiny delta merges all the time; SIGKILL at
    later and later points lands in writes and merges alike."""
    path = tmp_path / "memory.db"
    for round_ in range(3):
        process = await _writer(path, hold=False, bound=3)
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), timeout=60)
        assert line.strip() == b"ready", line
        await asyncio.sleep(0.03 * (round_ + 1))
        process.send_signal(signal.SIGKILL)
        await process.wait()
        backend = SqliteBackend(path, busy_timeout_ms=5000, lexical_delta_max=3)
        await backend.open()
        try:
            await _assert_exact(backend, path)
        finally:
            await backend.close()


@contextlib.contextmanager
def _cancel_at(victim: asyncio.Task[Any], target: int) -> Iterator[list[str]]:
    """Cancel ``victim`` as its unit reaches its ``target``-th statement (which then
    sees the cancel flag and rolls the unit back)."""
    loop = asyncio.get_running_loop()
    fetch, change = SqliteTransaction._fetch_tuples, SqliteTransaction._change
    seen: list[str] = []

    def reached(tx: SqliteTransaction, sql: str) -> None:
        seen.append(sql)
        if len(seen) == target:
            loop.call_soon_threadsafe(victim.cancel)
            if tx._cancel is not None:
                assert tx._cancel.wait(5), "the cancelled caller never flagged its unit"

    def patched_fetch(self: SqliteTransaction, sql: str, params: Any) -> Any:
        reached(self, sql)
        return fetch(self, sql, params)

    def patched_change(self: SqliteTransaction, sql: str, params: Any) -> Any:
        reached(self, sql)
        return change(self, sql, params)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SqliteTransaction, "_fetch_tuples", patched_fetch)
        patch.setattr(SqliteTransaction, "_change", patched_change)
        yield seen


async def test_a_merge_cancelled_at_each_statement_rolls_back(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    backend = SqliteBackend(path, busy_timeout_ms=5000, lexical_delta_max=8)
    await backend.open()
    rng = random.Random(5)
    try:
        records = [_record(_text(rng)) for _ in range(12)]
        await _insert_all(backend, records)
        await backend.merge_lexical_delta([1])
        for record in records[:3]:  # tombstones, and delta rows for the new words
            changed = attrs.evolve(record, content=_text(rng), version=2,
                                   revision=new_revision())

            async def replace(tx: Any, changed: MemoryRecord = changed,
                              record: MemoryRecord = record) -> None:
                assert await tx.records.replace(changed, record.revision)

            await backend.run_write(replace)
        await backend.run_write(lambda tx: tx.records.insert(_record(_text(rng))))
        before = _pending(path)
        assert before == 7
        interrupted = 0
        for target in range(1, 100):
            task = asyncio.create_task(backend.merge_lexical_delta([1]))
            with _cancel_at(task, target), contextlib.suppress(asyncio.CancelledError):
                await task
            if not task.cancelled():
                break
            interrupted += 1
            assert _pending(path) == before  # rolled back, whichever statement it was
            await _assert_exact(backend, path)
        assert interrupted >= 8 and _pending(path) == 0
        await _assert_exact(backend, path)
    finally:
        await backend.close()


async def test_two_providers_on_one_file_write_search_and_merge(
        tmp_path: Path, clock: ManualClock) -> None:
    """One provider writes (and merges) while the other searches and sometimes writes
    and merges too, each merge in the background of its own process's writes; every
    search of either is the exhaustive top-k of what is committed."""
    path = tmp_path / "memory.db"
    config = {"path": str(path), "lexical_delta_max": 3}
    first = build_native_provider(config, clock)
    second = build_native_provider(config, clock)
    await first.start()
    await second.start()
    rng = random.Random(6)
    live: list[MemoryRecord] = []
    try:
        stop = asyncio.Event()

        async def searching() -> int:
            count = 0
            while not stop.is_set():
                tokens = tuple(rng.sample(WORDS, 2))
                # a snapshot: the records committed when the search's transaction began
                await _searched(second.backend, tokens)
                count += 1
                await asyncio.sleep(0)
            return count

        searcher = asyncio.create_task(searching())
        for step in range(60):
            writer = second if step % 5 == 4 else first
            roll = rng.random()
            if roll < 0.5 or not live:
                live.append(await writer.add(note(_text(rng)), make_ctx(clock)))
            elif roll < 0.8:
                target = live.pop(rng.randrange(len(live)))
                live.append(await writer.update(UpdateRequest(
                    scope=USER_SCOPE, record_id=target.id, content=_text(rng)),
                    make_ctx(clock)))
            else:
                target = live.pop(rng.randrange(len(live)))
                await writer.delete(DeleteRequest(scope=USER_SCOPE, record_id=target.id,
                                                  hard=rng.random() < 0.5), make_ctx(clock))
            if step % 6 == 0:
                # no write in flight: both providers' searches equal exhaustive BM25
                for provider in (first, second):
                    for tokens in (("tea", "green"), ("zebra",), ("the", "a", "quiet")):
                        assert await _searched(provider.backend, tokens) == _exhaustive(
                            path, tokens, 5)
        stop.set()
        assert await searcher > 0
        for provider in (first, second):
            merger = provider.lexical_merger
            assert merger is not None
            await merger.flush()
        assert sum(_sqlite(provider).stats.merges for provider in (first, second)) > 0
        await _assert_exact(first.backend, path)
        await _assert_exact(second.backend, path)
    finally:
        await first.close()
        await second.close()


async def test_a_merge_waits_behind_another_process_holding_the_write_lock(
        tmp_path: Path, clock: ManualClock) -> None:
    """SQLite serialises the writers: a merge reported while another connection holds
    the write lock runs once it is released (within busy_timeout), never alongside."""
    path = tmp_path / "memory.db"
    provider = build_native_provider({"path": str(path), "lexical_delta_max": 2}, clock)
    await provider.start()
    merger = provider.lexical_merger
    assert merger is not None
    try:
        await provider.add(note("green tea"), make_ctx(clock))
        await provider.add(note("dark mode"), make_ctx(clock))  # full: a merge is queued
        # before the merge task gets to run, another connection takes the write lock
        holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        holder.execute("BEGIN IMMEDIATE")
        released = threading.Timer(0.3, holder.execute, ("COMMIT",))
        released.start()
        try:
            await merger.flush()
            assert _sqlite(provider).stats.merges == 1
        finally:
            released.join()
            holder.close()
        assert _pending(path) == 0
        await _assert_exact(provider.backend, path)
    finally:
        await provider.close()



# -- the expiry index -----------------------------------------------------------------


async def test_the_live_count_reads_the_partial_expiry_index(tmp_path: Path) -> None:
    """``memory_records_corpus`` leaves out active records that never expire (the
    common write writes no entry); the live-record count still equals a count of the
    rows, and both statements that read the index use it."""
    path = tmp_path / "memory.db"
    backend = SqliteBackend(path, busy_timeout_ms=5000)
    await backend.open()
    rng = random.Random(7)
    try:
        records = []
        for number in range(60):
            status = rng.choice([RecordStatus.ACTIVE] * 3 + [RecordStatus.DELETED,
                                RecordStatus.PENDING_REVIEW, RecordStatus.SUPERSEDED])
            expires = rng.choice([None, None, NOW - 5, NOW + 5])
            records.append(attrs.evolve(_record(f"note {number}"), status=status,
                                        expires_at=expires))

        await _insert_all(backend, records)
        for now in (NOW - 10, NOW, NOW + 10):
            expected = sum(1 for r in records if r.status is not RecordStatus.DELETED
                           and (r.expires_at is None or r.expires_at > now))
            async def count(tx: Any, now: float = now) -> int:
                return int(await tx.records.live_count(now))

            assert await backend.run_read(count) == expected
        conn = sqlite3.connect(path)
        try:
            entries = conn.execute("SELECT count(*) FROM memory_records"
                                   " INDEXED BY memory_records_corpus"
                                   " WHERE expires_at IS NOT NULL OR status <> 'active'"
                                   ).fetchone()[0]
            assert entries == sum(1 for r in records if r.expires_at is not None
                                  or r.status is not RecordStatus.ACTIVE)
            plan = " ".join(row[3] for row in conn.execute(
                "EXPLAIN QUERY PLAN SELECT r.seq FROM memory_records AS r"
                " WHERE r.scope_hash IN (?) AND r.status = 'active' AND r.expires_at <= ?",
                ("h", NOW)))
            assert "memory_records_corpus" in plan
        finally:
            conn.close()
    finally:
        await backend.close()
