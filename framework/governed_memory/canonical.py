"""Canonical JSON: the one serialisation every hash in the project is taken over
(fingerprints, revisions, receipts, the audit chain), so two processes that hold equal
values always agree on their hash.
"""

from __future__ import annotations

import json
from typing import Any


def canonical_json(value: Any) -> str:
    """Deterministic JSON (sorted keys, no spaces) for hashes and size accounting."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)
