"""A database written by schema v1 upgrades in place and then behaves like a new one.

The v1 file is built with v1's own DDL and rows shaped like v1 wrote them (content
indexed raw by ``unicode61``), so the test fails if a migration forgets existing data.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from governed_memory import MemoryRecord, RecordStatus
from governed_memory.clock import ManualClock
from governed_memory.requests import DeleteRequest, GetRequest, HistoryRequest, SearchRequest
from governed_memory_native import MemoryBackend, NativeMemoryProvider, build_native_provider
from governed_memory_native.sqlite.rows import record_params
from governed_memory_native.sqlite.schema import LATEST_VERSION, MIGRATIONS
from governed_memory_native.storage.copies import record_to_json
from native_support import USER_SCOPE, make_ctx, note

FULLWIDTH = "\uff46\uff55\uff4c\uff4cwidth"  # "fullwidth" in fullwidth forms

V1_COLUMNS = (
    "id", "scope_hash", "tenant_id", "user_id", "scope", "record_key", "content",
    "memory_type", "status", "version", "revision", "content_hash", "metadata",
    "provenance", "visibility", "importance", "entity_ids", "valid_from", "invalid_at",
    "supersedes", "superseded_by", "expires_at", "created_at", "updated_at", "index_state",
)


def write_v1_database(path: Path, records: list[MemoryRecord]) -> None:
    """A schema-v1 file holding ``records``, each with its one version, as v1 stored them."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("BEGIN")
        conn.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY,"
                     " description TEXT NOT NULL, applied_at REAL NOT NULL)")
        for statement in MIGRATIONS[0].statements:
            conn.execute(statement)
        conn.execute("INSERT INTO schema_migrations VALUES (1, ?, 0)",
                     (MIGRATIONS[0].description,))
        columns = ", ".join(V1_COLUMNS)
        values = ", ".join(f":{name}" for name in V1_COLUMNS)
        for record in records:
            params = record_params(record)
            cursor = conn.execute(f"INSERT INTO memory_records ({columns}) VALUES ({values})",
                                  {name: params[name] for name in V1_COLUMNS})
            conn.execute("INSERT INTO memory_versions VALUES (?, ?, 'add', ?, NULL, ?)",
                         (record.id, record.version, record.created_at, record_to_json(record)))
            if record.status is not RecordStatus.DELETED:
                conn.execute("INSERT INTO memory_fts (rowid, content) VALUES (?, ?)",
                             (cursor.lastrowid, record.content))
        conn.execute("PRAGMA user_version = 1")
        conn.execute("COMMIT")
    finally:
        conn.close()


async def _records(maker: NativeMemoryProvider, clock: ManualClock,
                   contents: list[str]) -> list[MemoryRecord]:
    """Complete, valid records made by the provider itself (on the memory backend)."""
    made = [await maker.add(note(content), make_ctx(clock)) for content in contents]
    made.append(await maker.add(note("ﬁnance pending", status=RecordStatus.PENDING_REVIEW),
                                make_ctx(clock)))
    return made


async def test_a_v1_database_is_upgraded_and_reindexed(tmp_path: Path,
                                                       clock: ManualClock) -> None:
    path = tmp_path / "memory.db"
    maker = NativeMemoryProvider(MemoryBackend(), clock)
    await maker.start()
    records = await _records(maker, clock, ["ﬁnance report", FULLWIDTH + " note",
                                            "x² formula", "green tea",
                                            "green tea and more tea", "tea"])
    write_v1_database(path, records)

    provider = build_native_provider({"path": str(path)}, clock)
    await provider.start()
    try:
        ctx = make_ctx(clock)
        assert (await provider.health()).detail == f"sqlite schema v{LATEST_VERSION}, wal"
        # token counts were filled in: scores equal the memory backend's on the same records
        for query in ("tea", "green tea", "finance formula tea"):
            request = SearchRequest(scopes=(USER_SCOPE,), query=query)
            expected = await maker.search(request, ctx)
            upgraded = await provider.search(request, ctx)
            assert [(hit.record, hit.score) for hit in upgraded.hits] == [
                (hit.record, hit.score) for hit in expected.hits], query
        for record in records:
            assert await provider.history(
                HistoryRequest(scope=USER_SCOPE, record_id=record.id), ctx) != ()
        for query, expected in (("finance", records[0]), ("fullwidth", records[1]),
                                ("x2", records[2])):
            result = await provider.search(SearchRequest(scopes=(USER_SCOPE,), query=query),
                                           ctx)
            assert [hit.record for hit in result.hits] == [expected], query
        # the upgraded index is a live one: updates and deletes keep it right
        await provider.delete(DeleteRequest(scope=USER_SCOPE, record_id=records[0].id), ctx)
        result = await provider.search(SearchRequest(scopes=(USER_SCOPE,), query="finance"),
                                       ctx)
        assert result.hits == ()
        assert (await provider.get(GetRequest(scope=USER_SCOPE, record_id=records[3].id),
                                   ctx)) == records[3]
    finally:
        await provider.close()
        await maker.close()
    with sqlite3.connect(path) as conn:
        versions = [row[0] for row in conn.execute("SELECT version FROM schema_migrations")]
    conn.close()
    assert versions == list(range(1, LATEST_VERSION + 1))
