"""A small process-local memo of decoded entries, so a hot entry is parsed once.

Decoding a stored result strictly (JSON, then the strict converter with every check)
is most of a hit's cost. The memo keeps the decoded result next to the exact bytes it
came from; a later hit whose bytes are identical reuses it, so the answer is exactly
what decoding would have produced. Results are shared between callers only when they
are deeply immutable: frozen records over flat metadata. A record whose metadata nests
a mapping or a list is decoded afresh on every hit, so no caller can change what
another one sees.
"""

from __future__ import annotations

from collections import OrderedDict
from types import MappingProxyType
from typing import Final

from governed_memory.cache.codec import CachedSearch
from governed_memory.records import SearchResult

DEFAULT_MEMO_ENTRIES: Final = 1024
_SCALARS: Final = (str, int, float, bool, type(None))


def shareable(result: SearchResult) -> bool:
    """True when nothing reachable from ``result`` can be mutated by a caller: tuples,
    frozen values and read-only metadata of scalars (a provider's own result may hold
    a list where a tuple belongs; a decoded one never does)."""
    if not isinstance(result.hits, tuple):
        return False
    for hit in result.hits:
        record = hit.record
        if (not isinstance(hit.explanation.signals, tuple)
                or not isinstance(record.entity_ids, tuple)
                or not isinstance(record.metadata, MappingProxyType)
                or not all(isinstance(value, _SCALARS) for value in record.metadata.values())):
            return False
    return True


class DecodedMemo:
    def __init__(self, max_entries: int = DEFAULT_MEMO_ENTRIES) -> None:
        self.max_entries = max_entries
        self._entries: OrderedDict[str, tuple[bytes, CachedSearch]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str, value: bytes) -> CachedSearch | None:
        found = self._entries.get(key)
        if found is None or found[0] != value:
            return None
        self._entries.move_to_end(key)
        return found[1]

    def put(self, key: str, value: bytes, entry: CachedSearch) -> None:
        if self.max_entries < 1 or not shareable(entry.result):
            return
        self._entries[key] = (value, entry)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def drop_tenant(self, tag: str) -> int:
        """Forget every decoded entry of one tenant (an erasure); returns how many."""
        keys = [key for key in self._entries if key.startswith(tag + ":")]
        for key in keys:
            del self._entries[key]
        return len(keys)
