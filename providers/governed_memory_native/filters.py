"""Metadata equality with JSON typing, for backends that filter in Python.

JSON has distinct types where Python blurs them (``True == 1``), so a filter only
matches a value of the same JSON type: ``"1"`` never matches ``1`` and ``True`` never
matches ``1``, exactly as the SQLite backend compares ``json_each`` types.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "structured"


def metadata_matches(metadata: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Every wanted top-level key is present with an equal value of the same JSON type."""
    for name, expected in wanted.items():
        if name not in metadata:
            return False
        actual = metadata[name]
        if json_kind(actual) != json_kind(expected) or json_kind(expected) == "structured":
            return False
        if actual != expected:
            return False
    return True
