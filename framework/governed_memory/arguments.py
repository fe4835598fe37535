"""Caller arguments turned into request fields, refused with the field named.

A caller writes ``memory_type="preference"`` or passes a list where a request holds an
enum member or a tuple. Converting here, while the manager builds the request, means a
bad value is a ``MemoryValidationError`` naming its field (recorded as a rejected
operation), never a ``ValueError`` from deep inside a request, and a lone string is
never taken for a sequence of one-character strings.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import TypeVar

from governed_memory.errors import MemoryValidationError
from governed_memory.records import MemoryType

E = TypeVar("E", bound=enum.Enum)


def member(kind: type[E], value: object, field: str) -> E:
    """An enum member from a member or its value; a bad value names its field."""
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(str(m.value) for m in kind)
        raise MemoryValidationError(f"{field} must be one of {allowed}, got {value!r}",
                                    field=field) from None


def optional_member(kind: type[E], value: object, field: str) -> E | None:
    return None if value is None else member(kind, value, field)


def memory_type_tuple(values: Iterable[MemoryType | str] | None) -> tuple[MemoryType, ...]:
    if isinstance(values, str):
        raise MemoryValidationError("memory_types must be a list of types, not a string",
                                    field="memory_types")
    return tuple(member(MemoryType, v, "memory_types") for v in values or ())


def string_tuple(values: Iterable[str], field: str) -> tuple[str, ...]:
    if isinstance(values, str):
        raise MemoryValidationError(f"{field} must be a list of strings, not a string",
                                    field=field)
    return tuple(values)
