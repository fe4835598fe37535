"""The native provider plus ``record_snapshot``, the port a search-cache hit needs to be
answered with a retrieval snapshot of its own (``governed_memory.cache.snapshots``).

The native provider does not offer it yet; until it does, the cache bypasses every
search of a native provider that keeps snapshots (the default, ``batched``), since a
hit could only be handed the earlier search's snapshot. This subclass is what the
native method is proposed to be, so the cache tests prove the whole path: a hit is
served, its snapshot names the hit's own operation, and replaying it through the
manager shows what this caller was shown. It reaches ``_store_snapshot`` because it
models code that belongs inside the provider; delete it once the provider has it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from governed_memory.clock import Clock
from governed_memory.context import OperationContext
from governed_memory.records import SearchResult
from governed_memory.requests import SearchRequest
from governed_memory_native import NativeMemoryProvider, build_native_provider
from governed_memory_native.indexing_config import parse_indexing_config
from governed_memory_native.retrieval import LEXICAL, VECTOR


class SnapshotRecordingNative(NativeMemoryProvider):
    async def record_snapshot(self, request: SearchRequest, ctx: OperationContext,
                              result: SearchResult) -> str | None:
        self._require_open()
        used = {signal.name for hit in result.hits for signal in hit.explanation.signals}
        signals = [name for name, signal in (("lexical", LEXICAL), ("vector", VECTOR))
                   if signal in used]
        return await self._store_snapshot(request, ctx, self._indexer.settings.ranking,
                                          signals, [], list(result.hits), result.candidates)


def build_recording_native(config: Mapping[str, Any], clock: Clock) -> SnapshotRecordingNative:
    built = build_native_provider(config, clock)
    return SnapshotRecordingNative(built.backend, clock, indexing=parse_indexing_config(config))
