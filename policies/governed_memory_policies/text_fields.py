"""The free text a write carries, found and rewritten in one place.

Secret and PII checks must look everywhere a caller can put text that gets stored —
content, the record key, metadata values (at any depth), metadata keys and provenance
— or a secret simply moves to the field nobody scans.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs
from governed_memory.records import Provenance
from governed_memory.requests import AddRequest, MemoryRequest, UpdateRequest

WriteRequest = AddRequest | UpdateRequest


def stored_texts(request: MemoryRequest) -> Iterator[tuple[str, str]]:
    """``(field, text)`` for every string the request would store. ``field`` is a
    category (``content``, ``key``, ``metadata``, ``metadata key``, ``provenance``),
    never a metadata key name, so it is safe to put into a reason."""
    if not isinstance(request, AddRequest | UpdateRequest):
        return
    if request.content is not None:
        yield "content", request.content
    if isinstance(request, AddRequest):
        if request.key is not None:
            yield "key", request.key
        for value in request.provenance.as_dict().values():
            yield "provenance", value
    if request.metadata is not None:
        yield from _metadata_texts(request.metadata)


def _metadata_texts(value: Any) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield "metadata", value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield "metadata key", str(key)
            yield from _metadata_texts(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _metadata_texts(item)


def rewrite_texts(request: WriteRequest, rewrite: Callable[[str], str]) -> WriteRequest:
    """The request with ``rewrite`` applied to every stored string except metadata keys
    (renaming a key could merge two keys; callers refuse instead)."""
    changes: dict[str, Any] = {}
    if request.content is not None:
        changes["content"] = rewrite(request.content)
    if request.metadata is not None:
        changes["metadata"] = _rewrite_value(request.metadata, rewrite)
    if isinstance(request, AddRequest):
        if request.key is not None:
            changes["key"] = rewrite(request.key)
        changes["provenance"] = Provenance(**{
            name: rewrite(value) for name, value in request.provenance.as_dict().items()})
    return attrs.evolve(request, **changes)


def _rewrite_value(value: Any, rewrite: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return rewrite(value)
    if isinstance(value, Mapping):
        return {key: _rewrite_value(item, rewrite) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_rewrite_value(item, rewrite) for item in value]
    return value
