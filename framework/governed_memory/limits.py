"""The size and shape limits every provider shares, checked before anything is written.

Limits live in one place so the manager, the providers and the conformance suite agree
on exactly where the line is (a 64 KiB body is fine, one byte more is not).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from typing import Any, Final

from governed_memory.canonical import canonical_json
from governed_memory.errors import MemoryValidationError

MAX_CONTENT_BYTES: Final = 64 * 1024
MAX_KEY_BYTES: Final = 256
MAX_METADATA_PROVENANCE_BYTES: Final = 16 * 1024
MAX_SCOPE_VALUE_CHARS: Final = 256
MAX_IDEMPOTENCY_KEY_BYTES: Final = 256
MAX_QUERY_BYTES: Final = 4 * 1024
MIN_PAGE_SIZE: Final = 1
MAX_PAGE_SIZE: Final = 100
MAX_ENTITY_IDS: Final = 64
MAX_JSON_DEPTH: Final = 32
MAX_EPOCH_SECONDS: Final = 253_402_300_799.0
"""9999-12-31T23:59:59Z: the last second a timestamp field may name. Beyond it a value is
no date at all (``1e300``), and no datastore or datetime library agrees on it."""
MAX_INT64: Final = 2**63 - 1
"""The largest integer every backend holds (SQLite ``INTEGER``, PostgreSQL ``bigint``,
Redis): a sequence number, a count or any other integer a request carries is bounded by
it here, so no datastore ever sees a number it would overflow on."""
WILDCARDS: Final = frozenset("*%")
"""Characters no identifier may hold: ``*`` (glob, Mem0 and Redis patterns) and ``%``
(SQL ``LIKE``), so no value can ever act as a wildcard in a datastore."""


def utf8_size(value: str, field: str) -> int:
    """Byte size in UTF-8, refusing strings that cannot be encoded (lone surrogates)."""
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise MemoryValidationError(
            f"{field} is not valid UTF-8 (unpaired surrogate at index {exc.start})", field=field
        ) from None


def check_text(value: object, field: str, *, max_bytes: int, allow_empty: bool = False) -> str:
    """A string within ``max_bytes`` of UTF-8, non-empty unless allowed."""
    if not isinstance(value, str):
        raise MemoryValidationError(f"{field} must be a string, not {type(value).__name__}",
                                    field=field)
    size = utf8_size(value, field)
    if size > max_bytes:
        raise MemoryValidationError(
            f"{field} is {size} UTF-8 bytes; the limit is {max_bytes}", field=field
        )
    if not allow_empty and not value.strip():
        raise MemoryValidationError(f"{field} must not be empty", field=field)
    return value


def check_identifier(value: object, field: str) -> str:
    """An identifier used for isolation: printable, no wildcard, bounded length."""
    text = check_text(value, field, max_bytes=4 * MAX_SCOPE_VALUE_CHARS)
    if len(text) > MAX_SCOPE_VALUE_CHARS:
        raise MemoryValidationError(
            f"{field} is {len(text)} characters; the limit is {MAX_SCOPE_VALUE_CHARS}", field=field
        )
    if text != text.strip():
        raise MemoryValidationError(f"{field} must not start or end with whitespace", field=field)
    if not text.isprintable():
        raise MemoryValidationError(f"{field} contains a control character", field=field)
    for wildcard in WILDCARDS:
        if wildcard in text:
            raise MemoryValidationError(
                f"{field} contains {wildcard!r}: wildcards are never identifiers", field=field
            )
    return text


def is_real(value: object) -> bool:
    """An ``int`` or ``float`` (never a ``bool``) that is a finite 64-bit float.

    ``math.isfinite`` converts an ``int`` to a float first and raises ``OverflowError``
    for one past ``1.8e308``; this answers ``False`` instead, so every numeric check
    built on it refuses such a value with a validation error rather than crashing.
    """
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return -sys.float_info.max <= value <= sys.float_info.max
    return isinstance(value, float) and math.isfinite(value)


def shown(number: int) -> str:
    """An integer for an error message: in full when short, else its size only (a
    message never echoes a huge number, and ``str`` refuses one past 4300 digits)."""
    if abs(number) < 10**20:
        return str(number)
    return f"a {abs(number).bit_length()}-bit integer"


def check_int(value: object, field: str, *, minimum: int = 0,
              maximum: int = MAX_INT64) -> int:
    """An ``int`` (never a ``bool``) in ``[minimum, maximum]``; the default range is the
    non-negative 64-bit integers every backend stores."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise MemoryValidationError(f"{field} must be an integer", field=field)
    if not minimum <= value <= maximum:
        raise MemoryValidationError(
            f"{field} must be an integer from {minimum} to {maximum}", field=field)
    return value


def check_page_size(limit: object, field: str = "limit") -> int:
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise MemoryValidationError(f"{field} must be an integer", field=field)
    if not MIN_PAGE_SIZE <= limit <= MAX_PAGE_SIZE:
        raise MemoryValidationError(
            f"{field} must be between {MIN_PAGE_SIZE} and {MAX_PAGE_SIZE}, got {shown(limit)}",
            field=field
        )
    return limit


def check_json_safe(value: Any, field: str, _depth: int = 0) -> None:
    """Plain JSON values only: str keys, finite numbers, no sets, bytes or objects."""
    if _depth > MAX_JSON_DEPTH:
        raise MemoryValidationError(f"{field} nests deeper than {MAX_JSON_DEPTH}", field=field)
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        utf8_size(value, field)
        return
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise MemoryValidationError(f"{field} holds an integer outside 64 bits", field=field)
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise MemoryValidationError(f"{field} contains a non-finite number", field=field)
        return
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, str):
                raise MemoryValidationError(
                    f"{field} has a non-string key of type {type(k).__name__}", field=field
                )
            utf8_size(k, field)
            check_json_safe(v, f"{field}.{k}", _depth + 1)
        return
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            check_json_safe(item, f"{field}[{i}]", _depth + 1)
        return
    raise MemoryValidationError(
        f"{field} is not JSON-safe: {type(value).__name__} values are not allowed", field=field
    )


def check_metadata_budget(metadata: Mapping[str, Any], provenance: Mapping[str, Any]) -> None:
    """Metadata and provenance share one 16 KiB budget, measured as canonical JSON."""
    check_json_safe(metadata, "metadata")
    try:
        size = sum(len(canonical_json(dict(part)).encode()) for part in (metadata, provenance)
                   if part)
    except (ValueError, RecursionError):
        raise MemoryValidationError("metadata cannot be serialized as JSON",
                                    field="metadata") from None
    if size > MAX_METADATA_PROVENANCE_BYTES:
        raise MemoryValidationError(
            f"metadata and provenance are {size} bytes together; the limit is "
            f"{MAX_METADATA_PROVENANCE_BYTES}",
            field="metadata",
        )


def clip_query(query: str) -> str:
    """A query within :data:`MAX_QUERY_BYTES`, cut on a character boundary (a search
    built from stored or model text, which may be longer than a caller may ask)."""
    data = query.encode("utf-8")
    if len(data) <= MAX_QUERY_BYTES:
        return query
    return data[:MAX_QUERY_BYTES].decode("utf-8", errors="ignore")
