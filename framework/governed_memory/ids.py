"""Identifiers: time-sortable record ids (ULID layout) and opaque revisions.

Record ids sort by creation time, which is what makes ``list`` pages stable and lets a
cursor keep going across concurrent inserts: new records land after it.
"""

from __future__ import annotations

import os
import threading
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_lock = threading.Lock()
_last_ms = -1
_last_rand = 0


_PAIRS = tuple(hi + lo for hi in _CROCKFORD for lo in _CROCKFORD)


def _encode(value: int, length: int) -> str:
    """Crockford base32, two characters (10 bits) per step; ``length`` is even."""
    chunks = []
    for _ in range(length // 2):
        value, rem = divmod(value, 1024)
        chunks.append(_PAIRS[rem])
    return "".join(reversed(chunks))


def new_id(now_ms: int | None = None) -> str:
    """A 26-character ULID, strictly increasing within this process."""
    global _last_ms, _last_rand
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    with _lock:
        if ms <= _last_ms:
            ms = _last_ms
            rand = _last_rand + 1
        else:
            rand = int.from_bytes(os.urandom(10), "big") >> 1  # leave headroom to increment
        _last_ms, _last_rand = ms, rand
    return _encode(ms, 10) + _encode(rand, 16)


def new_revision() -> str:
    """An opaque revision token; never derived from content, so equal writes still differ."""
    return "r" + os.urandom(12).hex()


def is_record_id(value: str) -> bool:
    return len(value) == 26 and all(ch in _CROCKFORD for ch in value)
