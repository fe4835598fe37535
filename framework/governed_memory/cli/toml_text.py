"""TOML text for a profile's plain form (``unstructure_profile``), so a command can write
a profile a person can read, edit and pass back with ``--profile FILE``.

Python reads TOML (``tomllib``) but does not write it, and a dependency for one demo
file is not worth it: profiles hold tables, strings, numbers, booleans and arrays of
those, which is all this writes. ``None`` (an unset optional) and empty tables are left
out, so the file says only what is set; the demo loads the file back and checks that
its revision is the one it meant to write.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _key(name: str) -> str:
    return name if _BARE_KEY.fullmatch(name) else json.dumps(name, ensure_ascii=False)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"TOML has no portable spelling of {value!r} here")
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a TOML basic string
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    if isinstance(value, Mapping):
        inner = ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()
                          if v is not None)
        return "{ " + inner + " }" if inner else "{}"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def _has_content(value: Any) -> bool:
    if isinstance(value, Mapping):
        return any(_has_content(v) for v in value.values())
    return value is not None


def dumps(data: Mapping[str, Any], *, header: str = "") -> str:
    """``data`` as a TOML document: its scalars and arrays first, then one table per
    nested mapping (depth first, dotted names)."""
    lines = [f"# {line}".rstrip() for line in header.splitlines()]
    _table(lines, (), data)
    return "\n".join(lines).strip("\n") + "\n"


def _table(lines: list[str], path: tuple[str, ...], data: Mapping[str, Any]) -> None:
    scalars = [(k, v) for k, v in data.items()
               if v is not None and not isinstance(v, Mapping)]
    tables = [(k, v) for k, v in data.items() if isinstance(v, Mapping) and _has_content(v)]
    if path and (scalars or not tables):
        lines.extend(["", "[" + ".".join(_key(part) for part in path) + "]"])
    lines.extend(f"{_key(k)} = {_value(v)}" for k, v in scalars)
    for name, table in tables:
        _table(lines, (*path, name), table)
