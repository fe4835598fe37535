"""Opaque, self-checking page cursors shared by every provider.

A cursor names the operation and the scope it was issued for. Handing a ``list``
cursor of one scope to another scope (or to ``purge_expired``) is a validation error,
never a silent restart or a peek into another owner's order.
"""

from __future__ import annotations

import base64
import binascii
import json

from governed_memory.errors import MemoryValidationError

_PREFIX = "c1."


def encode_cursor(kind: str, scope_hash: str, position: str) -> str:
    payload = json.dumps({"k": kind, "s": scope_hash[-16:], "p": position},
                         separators=(",", ":")).encode()
    return _PREFIX + base64.urlsafe_b64encode(payload).decode().rstrip("=")


def decode_cursor(cursor: str, kind: str, scope_hash: str, field: str = "cursor") -> str:
    """The position inside a cursor issued for ``kind`` over ``scope_hash``."""
    if not cursor.startswith(_PREFIX):
        raise MemoryValidationError(f"{field} is malformed", field=field)
    body = cursor[len(_PREFIX):]
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        data = json.loads(raw)
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise MemoryValidationError(f"{field} is malformed", field=field) from None
    if not isinstance(data, dict) or set(data) != {"k", "s", "p"} or not all(
        isinstance(v, str) for v in data.values()
    ):
        raise MemoryValidationError(f"{field} is malformed", field=field)
    if data["k"] != kind or data["s"] != scope_hash[-16:]:
        raise MemoryValidationError(
            f"{field} was issued for another operation or scope", field=field
        )
    return str(data["p"])
