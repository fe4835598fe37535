"""What a cache hit's retrieval snapshot is, and the port a provider offers to record it.

A provider that stores retrieval snapshots gives every ``SearchResult`` a
``snapshot_id`` naming what *that* search returned: its operation id, principal,
decision, policy and profile revisions, time, and the hits at their versions. An
answer served from the cache was computed by an earlier search, so the id stored with
it describes the earlier operation; handing it to a later caller would make a replay
of the later search report the earlier one's ids and revisions.

So a hit gets a snapshot of its own: the wrapper asks the provider to record that this
operation answered this request with the cached hits, and returns the new id. A
provider that stores snapshots but cannot record one for a cached answer has its hits
answered with ``snapshot_id = None``, as its own search answers when storage refuses
the snapshot, and the hit event says so (reason ``no_snapshot``): a replay can then
say there is nothing to replay, never show another operation's answer.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from governed_memory.operation_context import OperationContext
from governed_memory.records import SearchResult
from governed_memory.requests import SearchRequest


@runtime_checkable
class SnapshotRecordingProvider(Protocol):
    """A provider that can store a retrieval snapshot for an answer it did not compute
    in this operation (a search cache hit)."""

    async def record_snapshot(self, request: SearchRequest, ctx: OperationContext,
                              result: SearchResult) -> str | None:
        """Store a snapshot saying that operation ``ctx`` answered ``request`` with
        ``result``, exactly as a search of its own would have (the operation id,
        principal, decision, profile and policy revisions and time of ``ctx``; the
        hits, versions, scores, explanations and candidate count of ``result``), and
        return its id; ``result.snapshot_id`` names the snapshot of the search that
        computed the answer, which the new one may record as its source.

        Returns ``None`` when the provider stores no snapshots (``[retrieval] snapshots
        = "off"``). Raises ``MemoryUnavailableError`` when storage cannot take it now;
        the hit is then answered without a snapshot, as the provider's own search does
        in that case."""
        ...
