"""Untrusted JSON in: RFC 8259 JSON only, with everything a body could exhaust bounded.

``json.loads`` accepts more than JSON and fails in ways that are not parse errors: it
takes ``NaN`` and ``Infinity``, turns ``1e999`` into an infinity, raises
``RecursionError`` on deep nesting and ``ValueError`` on an integer past Python's
4,300-digit conversion limit, keeps the last of two equal keys and hands back unpaired
surrogates (``"\\ud800"``) that no UTF-8 response, log line or datastore can hold. A
body under the byte limit can carry every one of those, so each is refused here, before
anything is structured, as a :class:`MemoryValidationError` naming the body: the caller
gets a 422 problem saying what is wrong, never a 500, and nothing is written.

The bounds are wide enough for every valid request (the library bounds each field
again, naming it): integers are 64-bit, as the library's and every backend's are, and
the nesting bound leaves room for metadata nested to the library's own limit inside a
body.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Final, NoReturn

from governed_memory.errors import MemoryValidationError
from governed_memory.limits import MAX_JSON_DEPTH

__all__ = ["MAX_BODY_NESTING", "parse_json"]

MAX_BODY_NESTING: Final = MAX_JSON_DEPTH + 8
"""Arrays and objects inside one another: the library's metadata depth and the few
levels a body wraps it in (``{"scopes": [{...}]}``, a tool call's fields)."""
_MAX_INT_CHARS: Final = 20
"""``-9223372036854775808``: longer integer text is outside 64 bits without parsing it."""
_INT64: Final = (-(2**63), 2**63 - 1)
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class _Refused(Exception):
    """Raised inside a ``json.loads`` hook; becomes the validation error."""


def _int(text: str) -> int:
    if len(text) > _MAX_INT_CHARS:
        raise _Refused(f"an integer of {len(text)} digits is outside the 64-bit range")
    value = int(text)
    if not _INT64[0] <= value <= _INT64[1]:
        raise _Refused("an integer is outside the 64-bit range (-2^63 to 2^63-1)")
    return value


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused("a number is too large for a 64-bit float")
    return value


def _constant(name: str) -> NoReturn:
    raise _Refused(f"{name} is not a JSON value (RFC 8259 has no NaN or Infinity)")


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                # ASCII escapes: the key may hold anything, the message must not.
                name = json.dumps(key)[:80]
                raise _Refused(f"an object names the key {name} twice")
            seen.add(key)
    return result


def parse_json(data: bytes, field: str = "body") -> Any:
    """``data`` as JSON, or a :class:`MemoryValidationError` on ``field`` that says what
    is wrong (where it can: the line and column of a syntax error, the path of an
    unpaired surrogate)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MemoryValidationError(f"the {field} is not UTF-8 (byte {exc.start} is not)",
                                    field=field) from None
    try:
        value = json.loads(text, parse_int=_int, parse_float=_float,
                           parse_constant=_constant, object_pairs_hook=_object)
    except _Refused as exc:
        raise MemoryValidationError(f"the {field} is not acceptable JSON: {exc}",
                                    field=field) from None
    except RecursionError:
        raise MemoryValidationError(
            f"the {field} nests arrays and objects deeper than {MAX_BODY_NESTING} levels",
            field=field) from None
    except json.JSONDecodeError as exc:
        raise MemoryValidationError(
            f"the {field} is not valid JSON: {exc.msg} at line {exc.lineno} column "
            f"{exc.colno}", field=field) from None
    # Both walks are skipped unless the text could hold what they look for: most bodies
    # have a handful of brackets and no surrogate escape.
    deep = text.count("[") + text.count("{") > MAX_BODY_NESTING
    surrogates = _SURROGATE_ESCAPE.search(text) is not None
    if deep or surrogates:
        _check_tree(value, field, surrogates=surrogates)
    return value


def _check_tree(root: Any, field: str, *, surrogates: bool) -> None:
    """Refuse nesting past :data:`MAX_BODY_NESTING` and unpaired surrogates in keys and
    strings, walking iteratively (a recursive walk would hit the recursion limit
    itself)."""
    stack: list[tuple[Any, int, tuple[str | int, ...]]] = [(root, 0, ())]
    while stack:
        value, depth, path = stack.pop()
        if isinstance(value, str):
            if surrogates and _SURROGATE.search(value):
                _unpaired(field, path)
        elif isinstance(value, dict | list):
            if depth >= MAX_BODY_NESTING:
                raise MemoryValidationError(
                    f"the {field} nests arrays and objects deeper than {MAX_BODY_NESTING} "
                    "levels", field=_path(field, path))
            if isinstance(value, dict):
                for key, item in value.items():
                    if surrogates and _SURROGATE.search(key):
                        _unpaired(field, path, key=True)
                    stack.append((item, depth + 1, (*path, key)))
            else:
                stack.extend((item, depth + 1, (*path, index))
                             for index, item in enumerate(value))


def _unpaired(field: str, path: tuple[str | int, ...], *, key: bool = False) -> NoReturn:
    where = "a key" if key else "a string"
    raise MemoryValidationError(
        f"{where} in the {field} holds an unpaired UTF-16 surrogate (\\ud800-\\udfff), "
        "which is not text", field=_path(field, path))


def _path(field: str, path: tuple[str | int, ...]) -> str:
    """``body.metadata.tags[2]``; a key that is not a plain name is shown as JSON."""
    text = field
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part.isidentifier() and part.isascii():
            text += f".{part}"
        else:
            text += f"[{json.dumps(part)[:80]}]"
    return text
