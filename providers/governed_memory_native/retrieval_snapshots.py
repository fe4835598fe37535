"""Retrieval snapshots: what one search returned, stored so it can be replayed exactly.

A snapshot holds ids, versions, scores and each hit's explanation, the searched scopes,
the profile and policy revisions, the decision id and the ranking configuration. It
holds no content and no query text (a hash of the query, filters and limit instead):
replay reads each record at its stored version from the version history, so what it
shows is exactly what the search showed, and nothing a later erasure removed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Final

from governed_memory.canonical import canonical_json
from governed_memory.converter import structure, unstructure
from governed_memory.errors import MemoryNotFoundError, MemoryStorageError, MemoryValidationError
from governed_memory.indexing import RankingConfig
from governed_memory.operation_context import OperationContext, ProfileRef
from governed_memory.records import HitExplanation, SearchHit, SignalScore
from governed_memory.replay import ReplayResult, SnapshotHeader
from governed_memory.requests import SearchRequest
from governed_memory.scope import Scope

from governed_memory_native.port import ReadTransaction
from governed_memory_native.record_copies import detach

FORMAT: Final = 1


def _digest(value: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical_json(value).encode()).hexdigest()


def _hashed_request(request: SearchRequest) -> dict[str, Any]:
    """What the request hash covers. The time fields count only when set, so a search
    without them hashes as it did before they existed."""
    hashed: dict[str, Any] = {"query": request.query, "limit": request.limit,
                              "memory_types": [t.value for t in request.memory_types],
                              "entity_ids": list(request.entity_ids),
                              "metadata_filter": dict(request.metadata_filter)}
    for name in ("occurred_since", "occurred_before", "as_of"):
        if getattr(request, name) is not None:
            hashed[name] = getattr(request, name)
    return hashed


def snapshot_body(snapshot_id: str, request: SearchRequest, ctx: OperationContext,
                  ranking: RankingConfig, embedder: str | None, signals: Sequence[str],
                  hits: Sequence[SearchHit], candidates: int) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "snapshot_id": snapshot_id,
        "created_at": ctx.now,
        "operation_id": ctx.operation_id,
        "principal_id": ctx.principal.principal_id,
        "tenant_id": request.scopes[0].tenant_id,
        "scopes": [scope.dimensions() for scope in request.scopes],
        "request_hash": _digest(_hashed_request(request)),
        "profile": {"id": ctx.profile.id, "version": ctx.profile.version,
                    "revision": ctx.profile.revision},
        "decision_id": ctx.decision_id,
        "policy_revision": ctx.policy_revision,
        "ranking": {**ranking.as_dict(), "revision": ranking.revision, "embedder": embedder,
                    "signals": list(signals)},
        "candidates": candidates,
        "hits": [{"record_id": hit.record.id, "version": hit.record.version,
                  "score": hit.score, "rank": hit.rank,
                  "signals": [unstructure(signal) for signal in hit.explanation.signals],
                  "tie_break": hit.explanation.tie_break}
                 for hit in hits],
    }


def tombstone(tenant_id: str, erased_at: float, operation_id: str) -> dict[str, Any]:
    """What is left of a snapshot that named an erased user: that it existed."""
    return {"format": FORMAT, "erased": True, "tenant_id": tenant_id,
            "erased_at": erased_at, "erased_by": operation_id}


def header(snapshot_id: str, body: Mapping[str, Any] | None, tenant_id: str) -> SnapshotHeader:
    if body is None or body.get("tenant_id") != tenant_id:
        # Another tenant's snapshot is indistinguishable from a missing one.
        raise MemoryNotFoundError("no retrieval snapshot with that id")
    if body.get("erased"):
        return SnapshotHeader(snapshot_id, tenant_id, (), erased=True)
    try:
        scopes = tuple(Scope.from_dimensions(dims) for dims in body["scopes"])
    except (KeyError, TypeError, MemoryValidationError):
        raise MemoryStorageError("a stored retrieval snapshot could not be read") from None
    return SnapshotHeader(snapshot_id, tenant_id, scopes)


async def replay(tx: ReadTransaction, snapshot_id: str,
                 body: Mapping[str, Any]) -> ReplayResult:
    """Every hit at its stored version; versions erased since are listed, not shown."""
    hits: list[SearchHit] = []
    erased: list[str] = []
    try:
        for hit in body["hits"]:
            version = await tx.versions.get(hit["record_id"], int(hit["version"]))
            if version is None:
                erased.append(str(hit["record_id"]))
                continue
            signals = tuple(structure(signal, SignalScore) for signal in hit["signals"])
            hits.append(SearchHit(record=detach(version.record), score=float(hit["score"]),
                                  rank=int(hit["rank"]),
                                  explanation=HitExplanation(signals, str(hit["tie_break"]))))
        profile = body["profile"]
        return ReplayResult(
            snapshot_id=snapshot_id, created_at=float(body["created_at"]), hits=tuple(hits),
            erased_record_ids=tuple(erased), candidates=int(body["candidates"]),
            profile=ProfileRef(profile["id"], profile["version"], profile["revision"]),
            policy_revision=body["policy_revision"], decision_id=body["decision_id"],
            ranking=body["ranking"])
    except (KeyError, TypeError, ValueError):
        raise MemoryStorageError("a stored retrieval snapshot could not be read") from None
