"""Identifiers: time-sortable record ids and opaque revisions.

Record ids sort by creation time, which is what makes ``list`` pages stable: a cursor
never repeats or skips a record that existed when it was issued, and records created
after it by this process land after it. Across processes the order follows their
clocks, so a record another process creates at the same moment may sort before a
cursor already handed out; it is then seen by the next listing, not this one. The
layout is ULID's (48-bit millisecond time, then 80 bits that increase within a
millisecond in this process), written as 26 Crockford base32 characters.
"""

from __future__ import annotations

import os
import threading
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_PAIRS = tuple(hi + lo for hi in _CROCKFORD for lo in _CROCKFORD)
_RANDOM_BITS = 80
_lock = threading.Lock()
_last_ms = -1
_last_rand = 0


def new_id(now_ms: int | None = None) -> str:
    """A 26-character id, strictly increasing within this process."""
    global _last_ms, _last_rand
    ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    with _lock:
        if ms <= _last_ms:
            ms = _last_ms
            rand = _last_rand + 1
        else:
            rand = int.from_bytes(os.urandom(10), "big") >> 1  # leave headroom to increment
        _last_ms, _last_rand = ms, rand
    value = (ms << _RANDOM_BITS) | rand
    chunks = []
    for _ in range(13):  # two characters (10 bits) per step
        value, rem = divmod(value, 1024)
        chunks.append(_PAIRS[rem])
    return "".join(reversed(chunks))


def new_revision() -> str:
    """An opaque revision token; never derived from content, so equal writes still differ."""
    return "r" + os.urandom(12).hex()


def is_record_id(value: str) -> bool:
    return len(value) == 26 and all(ch in _CROCKFORD for ch in value)
