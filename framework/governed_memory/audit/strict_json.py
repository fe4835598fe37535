"""The one JSON reader of the audit tools: strict, so that a document means one thing.

Python's ``json`` keeps the last of two equal keys in an object; other readers keep the
first, or refuse. An event file holding ``"outcome"`` twice would then hash as the
event the trail recorded while reading, elsewhere, as one it never recorded. So every
JSON text the audit tools read (trail lines, events, proofs, checkpoints) goes through
:func:`read_json`, which refuses what the canonical form (:func:`canonical_bytes`, the
one byte form the chain hashes and files use) cannot have written and another reader
could take for something else:

- two equal keys in one object, at any depth, compared after escapes are decoded
  (``"outcom\\u0065"`` is ``"outcome"``);
- ``NaN``, ``Infinity`` and ``-Infinity`` (not JSON), and numbers beyond a double;
- a number not written as the canonical form writes it (``1E2`` for ``100.0``,
  ``1.0000000000000001`` for ``1.0``, ``-0`` for ``0``): it would hash as the canonical
  number while a reader keeping exact decimals sees another value;
- a byte order mark, text that is not UTF-8 (``json`` would guess UTF-16 or UTF-32),
  and anything but whitespace after the value;
- nesting deeper than the parser's recursion allows (a ``RecursionError`` otherwise).

Documents that must be canonical (trail lines, proofs, checkpoints) are also compared
with their canonical bytes by their readers (:func:`read_canonical_json` for the hot
one, trail lines); an event handed to an auditor may come in any layout, and this
reader is what keeps that freedom from becoming ambiguity.

Each refusal is a :class:`JsonDocumentError` (a :class:`DuplicateKeyError` for equal
keys) naming the document and, for a duplicate, the key and the object holding it. A
reader of one family (chain lines, proofs) passes its own subclasses, so its callers
catch one family error and still see the type.
"""

from __future__ import annotations

import codecs
import json
import math
import re
from typing import Any, Final

INVALID_JSON: Final = "invalid_json"
"""Not JSON at all (a syntax error, not UTF-8, nested too deeply)."""
NON_CANONICAL_JSON: Final = "non_canonical_json"
"""JSON a lax reader takes, that the canonical form never writes (``NaN``, a BOM,
``1E2``, data after the value)."""
DUPLICATE_KEY: Final = "duplicate_key"

_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def canonical_bytes(value: Any) -> bytes:
    """The one byte form of a JSON value that hashes and files use: sorted keys, no
    spaces, ASCII, no ``NaN``."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False).encode("ascii")


class JsonDocumentError(ValueError):
    """A JSON document the audit tools refuse to read. ``document`` names it (a file,
    or what it is; empty when the caller says where), ``reason`` says why, and
    ``code`` (``invalid_json``, ``non_canonical_json``, ``duplicate_key``) is what the
    command line prints as ``error (<code>)``."""

    code: str = INVALID_JSON

    def __init__(self, document: str, reason: str, *, code: str | None = None) -> None:
        super().__init__(f"{document}: {reason}" if document else reason)
        self.document = document
        self.reason = reason
        if code is not None:
            self.code = code


class DuplicateKeyError(JsonDocumentError):
    """Two equal keys in one object: readers disagree on which value counts."""

    code = DUPLICATE_KEY

    def __init__(self, document: str, key: str, where: str) -> None:
        self.key = key
        self.where = where
        """The object holding the key, as a path from the top (``$``, ``$.event``;
        empty if it could not be told)."""
        place = ("the top-level object" if where == "$" else f"the object at {where}"
                 if where else "an object")
        super().__init__(document, f"duplicate key {json.dumps(key)} in {place} (one "
                                   "reader takes the first value, another the last)")


class _Refused(Exception):
    """Raised inside the decoder's hooks; :func:`read_json` names the document."""

    def __init__(self, reason: str, code: str = NON_CANONICAL_JSON) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code


class _Duplicate(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Duplicate(key)
            seen.add(key)
    return value


def _float(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise _Refused(f"the number {token[:40]} is beyond a double's range")
    if repr(value) != token:
        raise _Refused(f"the number {token[:40]} is not written as the canonical form "
                       f"writes it ({value!r}), so readers may take it for two values")
    return value


def _int(token: str) -> int:
    if token == "-0":  # the only integer JSON allows that ``str(int(...))`` rewrites
        raise _Refused("the number -0 is not written as the canonical form writes it (0)")
    return int(token)


def _constant(name: str) -> Any:
    raise _Refused(f"{name} is not JSON (the canonical form never writes it)")


_DECODER: Final = json.JSONDecoder(object_pairs_hook=_object, parse_float=_float,
                                   parse_int=_int, parse_constant=_constant)


class _Pairs(list[tuple[str, Any]]):
    """An object as the pairs it was written with (to find where a duplicate sits)."""


_LOCATOR: Final = json.JSONDecoder(object_pairs_hook=_Pairs)


def read_json(data: bytes | str, document: str, *,
              error: type[JsonDocumentError] = JsonDocumentError,
              duplicate: type[DuplicateKeyError] = DuplicateKeyError) -> Any:
    """The value of the JSON text ``data``, or ``error``/``duplicate`` naming
    ``document`` and why it is refused (see the module docstring)."""
    if isinstance(data, str):
        text = data
    else:
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise error(document, f"not JSON: not UTF-8 text (byte {exc.start})") from None
    if text.startswith(codecs.BOM_UTF8.decode("utf-8")):
        raise error(document, "starts with a byte order mark, which the canonical form "
                              "never writes", code=NON_CANONICAL_JSON)
    try:
        return _DECODER.decode(text)
    except _Duplicate as found:
        key, where = _first_duplicate(text) or (found.key, "")
        raise duplicate(document, key, where) from None
    except _Refused as refused:
        raise error(document, refused.reason, code=refused.code) from None
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":
            raise error(document, f"data after the JSON value (line {exc.lineno} column "
                                  f"{exc.colno})", code=NON_CANONICAL_JSON) from None
        raise error(document, f"not JSON: {exc.msg} (line {exc.lineno} column "
                              f"{exc.colno})") from None
    except RecursionError:
        raise error(document, "not JSON this reader can take: nested too deeply") from None
    except ValueError:  # an integer of more digits than int() converts
        raise error(document, "not JSON this reader can take: a number of more digits "
                              "than it converts") from None


def _first_duplicate(text: str) -> tuple[str, str] | None:
    """A duplicate key and the path of its object, outermost first (an object's own
    keys are looked at before its members'); ``None`` if the text cannot be walked
    (nested past the recursion limit after the duplicate the strict pass met)."""
    try:
        root = _LOCATOR.decode(text)
    except (RecursionError, ValueError):
        return None
    stack: list[tuple[Any, str]] = [(root, "$")]
    while stack:
        node, path = stack.pop()
        children: list[tuple[Any, str]] = []
        if isinstance(node, _Pairs):
            seen: set[str] = set()
            for key, value in node:
                if key in seen:
                    return key, path
                seen.add(key)
                children.append((value, path + _member(key)))
        elif isinstance(node, list):
            children = [(value, f"{path}[{index}]") for index, value in enumerate(node)]
        stack.extend(reversed(children))
    return None


def _member(key: str) -> str:
    return f".{key}" if _IDENTIFIER.fullmatch(key) else f"[{json.dumps(key)}]"


def read_canonical_json(data: bytes, document: str, *, edited: str,
                        error: type[JsonDocumentError] = JsonDocumentError,
                        duplicate: type[DuplicateKeyError] = DuplicateKeyError) -> Any:
    """The value of ``data``, which must be exactly its canonical bytes; ``edited`` is
    the reason given when it is strict JSON in another layout.

    A text equal to its canonical bytes is strict by construction (the canonical form
    writes no duplicate key, ``NaN``, byte order mark or other spelling of a number), so
    it is parsed the fast way; anything else is read by :func:`read_json`, which names
    what is wrong. This is what keeps verifying a long trail at the plain parser's speed.
    """
    try:
        value = json.loads(data)
        if canonical_bytes(value) == data:
            return value
    except (ValueError, RecursionError):
        pass
    read_json(data, document, error=error, duplicate=duplicate)  # raises, naming why
    raise error(document, edited, code=NON_CANONICAL_JSON)  # strict, in another layout
