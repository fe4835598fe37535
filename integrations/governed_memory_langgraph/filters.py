"""LangGraph's ``search(filter=...)``: what the datastore can apply, and the rest.

A filter maps top-level value fields to a value (equality, nested mappings and lists
compared structurally) or to operators (``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``,
``$lte``), as LangGraph's own stores read it. The governed search filters metadata by
equality of top-level scalars in the datastore, before ranking; everything else is
checked here on the decoded value, after. Equality compares JSON types, as the governed
filter does, so ``1`` matches ``1`` and ``1.0`` but never ``true`` (LangGraph's
in-memory store compares with Python's ``==``, where ``True == 1``); an ordering
operator on a value that is not a number matches nothing instead of raising.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from governed_memory import MemoryValidationError
from governed_memory.provider_kit import json_kind

from governed_memory_langgraph.items import RESERVED_PREFIX

__all__ = ["check", "matches", "pushdown"]

_ORDERING = {"$gt", "$gte", "$lt", "$lte"}
_OPERATORS = {"$eq", "$ne", *_ORDERING}


def _kind(value: Any) -> str:
    """The JSON type, as the governed filter reads scalars (``json_kind``), with the
    structured ones told apart: nested values are compared here, not in the datastore."""
    kind = json_kind(value)
    if kind != "structured":
        return kind
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return "other"


def _equal(left: Any, right: Any) -> bool:
    kind = _kind(left)
    if kind != _kind(right):
        return False
    if kind == "object":
        return left.keys() == right.keys() and all(_equal(left[k], right[k]) for k in left)
    if kind == "array":
        return len(left) == len(right) and all(map(_equal, left, right))
    return bool(left == right)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _operator(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return _equal(value, operand)
    if operator == "$ne":
        return not _equal(value, operand)
    left, right = _number(value), _number(operand)
    if left is None or right is None:
        return False
    if operator == "$gt":
        return left > right
    if operator == "$gte":
        return left >= right
    if operator == "$lt":
        return left < right
    return left <= right


def _is_operators(condition: Any) -> bool:
    return isinstance(condition, Mapping) and any(str(k).startswith("$") for k in condition)


def _compare(value: Any, condition: Any) -> bool:
    if _is_operators(condition):
        return all(_operator(value, op, operand) for op, operand in condition.items())
    if isinstance(condition, Mapping):
        return isinstance(value, Mapping) and all(
            _compare(value.get(k), v) for k, v in condition.items())
    if isinstance(condition, list | tuple):
        return (isinstance(value, list | tuple) and len(value) == len(condition)
                and all(map(_compare, value, condition)))
    return _equal(value, condition)


def check(filter: Mapping[str, Any] | None) -> None:
    """Refuse what no store could answer: an unknown operator (LangGraph's stores raise
    on it too) or a non-string field name."""
    for name, condition in (filter or {}).items():
        if not isinstance(name, str):
            raise MemoryValidationError("filter fields are strings", field="filter")
        if _is_operators(condition):
            unknown = sorted(set(map(str, condition)) - _OPERATORS)
            if unknown:
                raise MemoryValidationError(
                    f"unsupported filter operator(s) {', '.join(unknown)} (supported: "
                    f"{', '.join(sorted(_OPERATORS))})", field=f"filter.{name}")


def matches(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """Whether a decoded value passes the whole filter (a missing field is ``None``)."""
    return all(_compare(value.get(name), condition)
               for name, condition in (filter or {}).items())


def _scalar(condition: Any) -> tuple[bool, Any]:
    if _is_operators(condition) and set(condition) == {"$eq"}:
        condition = condition["$eq"]
    if isinstance(condition, str | int | float) and not (
            isinstance(condition, float) and not math.isfinite(condition)):
        return True, condition  # bool is an int: covered
    return False, None


def pushdown(filter: Mapping[str, Any] | None, *, moved_field: str) -> dict[str, Any]:
    """The part of ``filter`` the datastore applies exactly: equality with a string,
    number or boolean on a field that stays in metadata (not ``moved_field``, which a
    record may hold as its content). ``None`` is never pushed down: LangGraph's filter
    matches a missing field with it, an equality filter in storage would not."""
    pushed: dict[str, Any] = {}
    for name, condition in (filter or {}).items():
        if name == moved_field or name.startswith(RESERVED_PREFIX):
            continue
        ok, scalar = _scalar(condition)
        if ok and not (isinstance(scalar, str) and "\x00" in scalar) and "\x00" not in name:
            pushed[name] = scalar
    return pushed
