"""Which searches the cache may answer.

A search that updates access statistics (hit counts, last-accessed times) has an
effect on the provider, so serving it from the cache would silently drop that
effect. ``SearchRequest`` has no such flag yet; the rule lives in this one predicate
so that a future ``update_access_stats`` field plugs in here and nowhere else.
"""

from __future__ import annotations

from governed_memory.requests import SearchRequest


def is_cacheable(request: SearchRequest) -> bool:
    """True unless the request asks the provider to update access statistics."""
    return not bool(getattr(request, "update_access_stats", False))
