"""What the vector index tests of every backend share: a table of chosen vectors, stores
filled in bulk, and the exact ranking the index must reproduce.

The index is checked against exact search, so the data must be controlled (clustered
vectors with duplicates for ties, read from a table the test fills) and the reference
must not go through the code under test (:func:`exact_ranking` reads the vectors through
the storage port's exact path and ranks them with ``cosine_ranking``). The memory,
SQLite and PostgreSQL tests (``test_native_vector_index*``) all use these.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from governed_memory import MemoryType, RecordStatus
from governed_memory.clock import ManualClock
from governed_memory.embedding import EmbedderIdentity
from governed_memory.ids import new_id, new_revision
from governed_memory.indexing import IndexingMode, IndexingSettings, RankingConfig
from governed_memory.records import (
    IndexState,
    MemoryRecord,
    MemoryVersion,
    VersionOperation,
    content_hash,
)
from governed_memory.requests import SearchRequest
from governed_memory.scope import Scope
from governed_memory_native import NativeMemoryProvider, build_native_provider
from governed_memory_native.retrieval import fusion
from governed_memory_native.retrieval.cosine import cosine_ranking, encode
from governed_memory_native.storage.port import SearchQuery, StoredVector, VectorQuery
from native_support import config_for, make_ctx

DIMENSION = 16
ALICE = Scope("acme", user_id="alice")
BOB = Scope("acme", user_id="bob")
VECTOR_ONLY = RankingConfig(modes=("vector",))


class TableEmbedder:
    """Each text's vector from a table the test fills (clustered data, chosen ties)."""

    def __init__(self, dimension: int = DIMENSION) -> None:
        self.identity = EmbedderIdentity("table", "t1", dimension)
        self.table: dict[str, np.ndarray] = {}

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.table[text].tolist() for text in texts]

    async def close(self) -> None:
        return None


def clustered(rng: np.random.Generator, count: int, clusters: int, dimension: int = DIMENSION,
              spread: float = 0.35, duplicates: int = 0) -> np.ndarray:
    """Unit vectors around ``clusters`` random centres; the last ``duplicates`` repeat
    earlier rows exactly (ties that only the id can break)."""
    centres = rng.standard_normal((clusters, dimension))
    rows = centres[rng.integers(0, clusters, count)] + spread * rng.standard_normal(
        (count, dimension))
    for i in range(max(0, count - duplicates), count):
        rows[i] = rows[int(rng.integers(0, max(1, count - duplicates)))]
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def provider_for(backend: str, directory: Path, clock: ManualClock, embedder: TableEmbedder,
                 **config: Any) -> NativeMemoryProvider:
    config.setdefault("vector_index_min_vectors", 0)
    provider = build_native_provider(config_for(backend, directory, **config), clock)
    provider.configure_indexing(IndexingSettings(mode=IndexingMode.SYNC, embedder=embedder,
                                                 ranking=VECTOR_ONLY))
    return provider


async def bulk_add(provider: NativeMemoryProvider, embedder: TableEmbedder,
                   records: Sequence[tuple[Scope, str, np.ndarray]], clock: ManualClock,
                   **fields: Any) -> list[MemoryRecord]:
    """Records written as a sync-indexing add writes them, in one transaction (fast)."""
    stored: list[MemoryRecord] = []
    now = clock.now()

    async def unit(tx: Any) -> None:  # one unit of work: one trip to storage
        versions = []
        for scope, text, vector in records:
            embedder.table[text] = vector
            record = MemoryRecord(
                id=new_id(), scope=scope, scope_hash=scope.scope_hash, content=text,
                memory_type=fields.get("memory_type", MemoryType.NOTE), version=1,
                revision=new_revision(), content_hash=content_hash(text),
                status=RecordStatus.ACTIVE, created_at=now, updated_at=now,
                index_state=IndexState.INDEXED, metadata=fields.get("metadata", {}))
            versions.append(MemoryVersion(record, VersionOperation.ADD, now, "op"))
            stored.append(record)
        bulk = getattr(tx.records, "insert_new", None)
        if bulk is not None:  # PostgreSQL: the same rows by COPY (tested to equal adds)
            await bulk(versions)
        else:
            for version in versions:
                await tx.records.insert(version.record)
                await tx.versions.append(version)
        for version, (_, _, vector) in zip(versions, records, strict=True):
            record = version.record
            await tx.vectors.put(StoredVector(  # the port's own write: the log sees it
                record_id=record.id, scope_hash=record.scope_hash, version=1,
                content_hash=record.content_hash, identity=embedder.identity,
                vector=encode(vector.tolist(), embedder.identity), created_at=now))

    await provider.backend.run_write(unit)
    return stored


async def exact_ranking(provider: NativeMemoryProvider, embedder: TableEmbedder,
                        request: SearchRequest, now: float) -> list[tuple[str, float]]:
    """What exact search returns: cosine_ranking over every vector passing the filters
    (read through the port's exact path), positive scores, the fused top ``limit``."""
    query = encode(embedder.table[request.query].tolist(), embedder.identity)
    filters = SearchQuery(
        scope_hashes=tuple(dict.fromkeys(s.scope_hash for s in request.scopes)), tokens=(),
        now=now, limit=fusion.pool_size(request.limit), memory_types=request.memory_types,
        metadata_filter=dict(request.metadata_filter), valid_at=now)
    async with provider.backend.reading() as tx:
        rows = await tx.vectors.candidates(VectorQuery(filters, embedder.identity))
    ranked = cosine_ranking(query, rows, embedder.identity.dimension, filters.limit)
    return [(record_id, score) for record_id, score in ranked if score > 0][: request.limit]


async def searched(provider: NativeMemoryProvider, request: SearchRequest,
                   clock: ManualClock) -> list[tuple[str, float]]:
    """The provider's vector search: each hit's id and vector signal, in order."""
    result = await provider.search(request, make_ctx(clock))
    found = []
    for hit in result.hits:
        (signal,) = [s for s in hit.explanation.signals if s.name == fusion.VECTOR]
        assert hit.explanation.tie_break == "score desc, id asc"
        found.append((hit.record.id, signal.value))
    return found
