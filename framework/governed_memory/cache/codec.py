"""The stored form of one cached search: the provider's ``SearchResult`` as JSON, in an
envelope that names what it was computed under.

The envelope repeats the digest, the revisions and the scope hashes a lookup expects,
so an entry that reached the wrong key (a store bug, a corrupted value, a hand edit)
is refused as a decode error instead of being served. Values necessarily hold record
content: this is a cache of search results, which is why stores bound their size and
lifetime and why keys hold no query text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final

import attrs

from governed_memory.canonical import canonical_json
from governed_memory.converter import structure, unstructure
from governed_memory.errors import MemoryValidationError
from governed_memory.records import SearchResult

ENTRY_SCHEMA: Final = "gmc1-entry"


class CacheDecodeError(Exception):
    """A stored value that cannot be trusted as the answer to this lookup."""


@attrs.frozen(slots=True)
class CachedSearch:
    result: SearchResult
    computed_at: float
    valid_until: float | None

    def serves(self, now: float) -> bool:
        """Whether this answer is the provider's answer at ``now``: not computed in the
        caller's future, and before any expiry that could change it."""
        return self.computed_at <= now and (self.valid_until is None or now < self.valid_until)


def valid_until(result: SearchResult, horizon: float | None) -> float | None:
    """The first instant the answer may change without a write: the earliest expiry
    mark of the scopes searched, or of a record on the page (covering records written
    before the cache was in place)."""
    instants = [hit.record.expires_at for hit in result.hits if hit.record.expires_at is not None]
    if horizon is not None:
        instants.append(horizon)
    return min(instants) if instants else None


def encode_entry(result: SearchResult, *, digest: str, revisions: Sequence[int],
                 computed_at: float, until: float | None) -> bytes:
    body: dict[str, Any] = {
        "schema": ENTRY_SCHEMA,
        "digest": digest,
        "revisions": list(revisions),
        "computed_at": computed_at,
        "valid_until": until,
        "result": unstructure(result),
    }
    return canonical_json(body).encode("utf-8")


def decode_entry(data: bytes, *, digest: str, revisions: Sequence[int],
                 scope_hashes: Sequence[str]) -> CachedSearch:
    """Rebuild an entry strictly, refusing anything that is not exactly what was asked."""
    try:
        body = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        raise CacheDecodeError("the value is not JSON") from None
    if not isinstance(body, dict) or body.get("schema") != ENTRY_SCHEMA:
        raise CacheDecodeError("unknown entry schema")
    if body.get("digest") != digest or body.get("revisions") != list(revisions):
        raise CacheDecodeError("the entry belongs to another lookup")
    computed_at, until = body.get("computed_at"), body.get("valid_until")
    if not isinstance(computed_at, int | float) or isinstance(computed_at, bool) or not (
            until is None or (isinstance(until, int | float) and not isinstance(until, bool))):
        raise CacheDecodeError("the entry's validity window is malformed")
    try:
        result = structure(body.get("result"), SearchResult)
    except MemoryValidationError:
        raise CacheDecodeError("the cached result does not match SearchResult") from None
    allowed = set(scope_hashes)
    for hit in result.hits:
        record = hit.record
        if record.scope_hash not in allowed or record.scope.scope_hash != record.scope_hash:
            raise CacheDecodeError("the cached result holds a record of another scope")
    return CachedSearch(result, float(computed_at), None if until is None else float(until))
