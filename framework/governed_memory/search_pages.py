"""Paging a search past ``limit``: a self-checking cursor over one ranked window.

A search's ranking is deterministic for one request over one state of the store, so
page ``n`` is rank positions ``[n * limit, (n + 1) * limit)``: the manager asks the
provider for the top ``offset + limit`` (one request, with every filter applied before
the top-k as always) and returns the last ``limit`` of them. The cursor carries the
offset and a fingerprint of the request (scopes, query, page size, filters, ranking),
so a cursor handed to another search is refused (``MemoryValidationError``,
``field="cursor"``), never silently restarted.

Guarantee: on a store nobody writes between pages, the pages concatenated are the top
``offset + limit`` of the search, without repeats or gaps. Records written, changed or
removed between pages move the ranking, so a later page may then repeat or skip
records. Paging reaches the first ``MAX_PAGE_SIZE`` ranked results; the page that
reaches that bound has no ``next_cursor``. The trail and the retrieval snapshot of a
page describe the window it was cut from (every result up to the page's end).
"""

from __future__ import annotations

import hashlib

from governed_memory.canonical import canonical_json
from governed_memory.converter import unstructure
from governed_memory.cursor import decode_cursor, encode_cursor
from governed_memory.errors import MemoryValidationError
from governed_memory.limits import MAX_PAGE_SIZE
from governed_memory.read_requests import SearchRequest

_KIND = "search"


def search_fingerprint(request: SearchRequest) -> str:
    """What a search cursor is bound to: everything that decides the ranking."""
    body = {
        "scopes": sorted(scope.scope_hash for scope in request.scopes),
        "query": request.query,
        "limit": request.limit,
        "memory_types": [t.value for t in request.memory_types],
        "metadata_filter": dict(request.metadata_filter),
        "entity_ids": list(request.entity_ids),
        "ranking": None if request.ranking is None else unstructure(request.ranking),
        "occurred_since": request.occurred_since,
        "occurred_before": request.occurred_before,
        "as_of": request.as_of,
        "visibility": None if request.visibility is None else request.visibility.value,
        "source_types": list(request.source_types),
        "sensitivity": list(request.sensitivity),
        "exclude_sensitivity": list(request.exclude_sensitivity),
    }
    return hashlib.sha256(canonical_json(body).encode()).hexdigest()


def page_offset(cursor: str | None, request: SearchRequest) -> int:
    """Where the page ``cursor`` names starts (0 without one)."""
    if cursor is None:
        return 0
    if not isinstance(cursor, str):
        raise MemoryValidationError("cursor must be a string", field="cursor")
    position = decode_cursor(cursor, _KIND, search_fingerprint(request))
    if not position.isdigit():
        raise MemoryValidationError("cursor is malformed", field="cursor")
    offset = int(position)
    if offset <= 0 or offset % request.limit or offset + request.limit > MAX_PAGE_SIZE:
        raise MemoryValidationError("cursor is malformed", field="cursor")
    return offset


def next_page_cursor(request: SearchRequest, offset: int, returned: int) -> str | None:
    """The cursor of the page after ``[offset, offset + limit)``, when the window was
    full (there may be more) and the next page stays within ``MAX_PAGE_SIZE``."""
    end = offset + request.limit
    if returned < end or end + request.limit > MAX_PAGE_SIZE:
        return None
    return encode_cursor(_KIND, search_fingerprint(request), str(end))
