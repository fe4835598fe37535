"""One strict cattrs converter for every value object.

Strict means: unknown keys are errors, ``"1"`` is not an int, ``1`` is not a string,
and an error names the path (``scope.tenant_id``) so a bad payload is fixable.
"""

from __future__ import annotations

import enum
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

import cattrs
from cattrs.errors import BaseValidationError, IterableValidationError, IterableValidationNote
from cattrs.v import format_exception, transform_error

from governed_memory.errors import MemoryValidationError
from governed_memory.principal import Permission
from governed_memory.records import json_copy
from governed_memory.scope import Scope

T = TypeVar("T")


def _strict(kind: type[Any]) -> Any:
    def structure(value: Any, _: type[Any]) -> Any:
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
            raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")
        return value

    return structure


def _structure_enum(value: Any, kind: type[enum.Enum]) -> enum.Enum:
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise TypeError(f"expected one of {[m.value for m in kind]}, got {type(value).__name__}")
    try:
        return kind(value)
    except ValueError:
        raise ValueError(
            f"{value!r} is not one of {', '.join(str(m.value) for m in kind)}"
        ) from None


def _structure_scope(value: Any, _: type[Any]) -> Scope:
    if isinstance(value, Scope):
        return value  # frozen and validated when it was built: nothing to check again
    if not isinstance(value, Mapping):
        raise TypeError(f"expected a mapping of scope dimensions, got {type(value).__name__}")
    return Scope.from_dimensions(value)


def _structure_mapping(value: Any, _: type[Any]) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"expected a mapping, got {type(value).__name__}")
    return dict(value)


def _is_homogeneous_tuple(kind: Any) -> bool:
    args = typing.get_args(kind)
    return typing.get_origin(kind) is tuple and len(args) == 2 and args[1] is Ellipsis


def _structure_tuple_with(conv: cattrs.Converter) -> Any:
    """``tuple[T, ...]`` from a JSON array only: a string is not a tuple of characters."""

    def structure(value: Any, kind: Any) -> tuple[Any, ...]:
        if not isinstance(value, list | tuple):
            raise TypeError(f"expected an array, got {type(value).__name__}")
        item = typing.get_args(kind)[0]
        result, errors = [], []
        for index, element in enumerate(value):
            try:
                result.append(conv.structure(element, item))
            except Exception as exc:  # collected, so every bad index is named
                exc.__notes__ = [*getattr(exc, "__notes__", []), IterableValidationNote(
                    f"Structuring {kind} @ index {index}", index, item)]
                errors.append(exc)
        if errors:
            raise IterableValidationError(f"While structuring {kind!r}", errors, kind)
        return tuple(result)

    return structure


def make_converter() -> cattrs.Converter:
    conv = cattrs.Converter(forbid_extra_keys=True)
    for kind in (str, int, float, bool):
        conv.register_structure_hook(kind, _strict(kind))
    # StrEnum before str in the MRO: members are str, but must structure as members.
    for base in (enum.StrEnum, enum.Enum):
        conv.register_structure_hook(base, _structure_enum)
        conv.register_unstructure_hook(base, lambda member: member.value)
    conv.register_unstructure_hook(Scope, lambda scope: scope.dimensions())
    conv.register_structure_hook(Scope, _structure_scope)
    conv.register_unstructure_hook(types.MappingProxyType, json_copy)
    conv.register_structure_hook_func(lambda t: t == Mapping[str, Any], _structure_mapping)
    conv.register_structure_hook_func(
        lambda t: t == (Mapping[str, Any] | None),
        lambda v, t: None if v is None else _structure_mapping(v, t),
    )
    conv.register_structure_hook_func(_is_homogeneous_tuple, _structure_tuple_with(conv))
    conv.register_unstructure_hook_func(
        lambda t: t == frozenset[Permission], lambda perms: sorted(p.value for p in perms)
    )
    return conv


converter = make_converter()


def _describe(exc: BaseException, kind: type[Any] | None) -> str:
    if isinstance(exc, MemoryValidationError):
        return str(exc)
    return format_exception(exc, kind)


def unstructure(value: Any) -> Any:
    """A JSON-safe form of any value object."""
    return converter.unstructure(value)


def structure(data: Any, kind: type[T]) -> T:
    """Rebuild a value object, raising ``MemoryValidationError`` that names each bad path."""
    try:
        return converter.structure(data, kind)
    except MemoryValidationError:
        raise
    except BaseValidationError as exc:
        messages = transform_error(exc, path=kind.__name__, format_exception=_describe)
        raise MemoryValidationError("; ".join(messages), field=kind.__name__) from None
    except (TypeError, ValueError) as exc:
        raise MemoryValidationError(f"{kind.__name__}: {exc}", field=kind.__name__) from None
