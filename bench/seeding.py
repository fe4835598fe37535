"""The one fast seeding path the benches share: memories written through the native
storage port, many per write transaction, instead of one governed add each.

Why: 100k or 1M governed adds (one fsync each) take hours on a small machine, and a
bench measures the operations that follow, not the seeding. Records are built exactly
as the provider's ``add`` builds them (id, revision, content hash, version 1,
``index_state=indexed``, and in hybrid mode the vector a sync-indexing add stores), so
rows and index entries are the ones a governed add writes. What seeding skips is the
per-write policy decision, idempotency lookup, event and fsync.

Only port-level calls are used (``backend.writing()``, ``records.insert``,
``versions.append``, ``vectors.put``; on PostgreSQL the records repository's
``insert_new`` COPY path when it exists), so backend internals can change
under it. Keep every bench's seeding here, so a port change is fixed in one place.
"""

from __future__ import annotations

import os
import secrets
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from governed_memory import Scope
from governed_memory.ids import new_id, new_revision
from governed_memory.records import (
    IndexState,
    MemoryRecord,
    MemoryType,
    MemoryVersion,
    RecordStatus,
    VersionOperation,
    content_hash,
)

POSTGRES_DSN = os.environ.get("GOVERNED_MEMORY_POSTGRES_DSN",
                              "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("GOVERNED_MEMORY_REDIS_URL", "redis://127.0.0.1:6379/0")
BATCH = 2000


def seed_version(scope: Scope, content: str, now: float) -> MemoryVersion:
    """The record and version-1 row a governed ``add`` of ``content`` writes."""
    record = MemoryRecord(
        id=new_id(), scope=scope, scope_hash=scope.scope_hash, content=content,
        memory_type=MemoryType.NOTE, version=1, revision=new_revision(),
        content_hash=content_hash(content), status=RecordStatus.ACTIVE,
        created_at=now, updated_at=now, index_state=IndexState.INDEXED,
    )
    return MemoryVersion(record, VersionOperation.ADD, now, "op_bench_seed")


@contextmanager
def storage(backend: str) -> Iterator[dict[str, Any]]:
    """A fresh, empty store's provider config for one run: the memory backend, a SQLite
    file in a temporary directory, or a PostgreSQL schema dropped afterwards."""
    if backend == "memory":
        yield {"backend": "memory"}
        return
    if backend == "sqlite":
        with tempfile.TemporaryDirectory(prefix="gm-bench-") as tmp:
            yield {"backend": "sqlite", "path": str(Path(tmp) / "memory.db")}
        return

    schema = f"gm_bench_{secrets.token_hex(4)}"
    try:
        yield {"backend": "postgres", "dsn": POSTGRES_DSN, "schema": schema}
    finally:
        drop_schema(schema)


def drop_schema(schema: str) -> None:
    """Drop a bench run's PostgreSQL schema with everything in it."""
    import psycopg

    with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
        conn.execute(psycopg.sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
            psycopg.sql.Identifier(schema)))


def delete_prefix(prefix: str) -> None:
    """Delete a bench run's Redis keys (everything under ``prefix``)."""
    import redis

    if not prefix:
        raise ValueError("an empty prefix would match every key of the server")
    client = redis.Redis.from_url(REDIS_URL)
    try:
        keys = list(client.scan_iter(match=prefix + "*", count=1000))
        for start in range(0, len(keys), 500):
            client.delete(*keys[start:start + 500])
    finally:
        client.close()


def settle(config: dict[str, Any]) -> None:
    """Bring a store seeded in bulk to the state it reaches on its own soon after: on
    PostgreSQL, ``VACUUM (ANALYZE)`` of its tables, which autovacuum runs within a minute
    of a bulk insert (until then every index read also visits the table, since no page
    is marked all-visible yet). SQLite needs nothing."""
    if config.get("backend") != "postgres":
        return
    import psycopg

    with psycopg.connect(config["dsn"], autocommit=True,
                         options=f"-c search_path={config['schema']}") as conn:
        conn.execute("VACUUM (ANALYZE) memory_records, memory_versions, memory_vectors,"
                     " lexical_postings, lexical_terms, lexical_docs, lexical_scopes")


async def vectors_for(embedder: Any, versions: Sequence[MemoryVersion],
                      now: float) -> list[Any]:
    """The vectors a sync-indexing add stores for these records."""
    from governed_memory_native.retrieval.cosine import encode
    from governed_memory_native.storage.port import StoredVector

    records = [version.record for version in versions]
    raw = await embedder.embed([record.content for record in records])
    return [StoredVector(record_id=record.id, scope_hash=record.scope_hash,
                         version=record.version, content_hash=record.content_hash,
                         identity=embedder.identity, vector=encode(values, embedder.identity),
                         created_at=now)
            for record, values in zip(records, raw, strict=True)]


async def seed_texts(backend: Any, scope: Scope, texts: Sequence[str], *,
                     embedder: Any | None = None, batch: int = BATCH) -> list[str]:
    """Write ``texts`` as memories of ``scope`` through a started backend (with their
    vectors when ``embedder`` is given); returns the new record ids in order."""
    ids: list[str] = []
    for start in range(0, len(texts), batch):
        now = time.time()
        versions = [seed_version(scope, text, now) for text in texts[start:start + batch]]
        vectors = [] if embedder is None else await vectors_for(embedder, versions, now)
        async with backend.writing() as tx:
            bulk = getattr(tx.records, "insert_new", None)
            if bulk is not None:  # PostgreSQL: the same rows by COPY
                await bulk(versions)
            else:
                for version in versions:
                    await tx.records.insert(version.record)
                    await tx.versions.append(version)
            for vector in vectors:
                await tx.vectors.put(vector)
        ids.extend(version.record.id for version in versions)
    return ids
