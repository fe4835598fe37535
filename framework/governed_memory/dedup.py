"""What an identical new memory does: a profile's ``[write] dedup``, carried by each add
request. A value of its own, so the profile model and the requests both name it without
either importing the other."""

from __future__ import annotations

import enum


class DedupMode(enum.StrEnum):
    """What an identical new memory does (a profile's ``[write] dedup``)."""

    OFF = "off"
    """Every add is a new record."""
    CONTENT_HASH = "content_hash"
    """An add whose content equals a live record's of the same scope (same content
    hash: active or pending, not expired, valid now) returns that record instead."""
    SIMILARITY = "similarity"
    """As ``content_hash``, and also when the nearest live record of the scope is at
    least ``dedup_threshold`` similar by the profile's embedder."""
