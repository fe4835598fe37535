"""A LangGraph item as a governed record, and back.

The record's ``content`` is what governed search ranks (and what the secret guard, PII
redaction and the per-turn context builder read), so it is the item's *indexed text*:
the text at the ``index`` paths of the put (or the store's default fields), as LangGraph
would embed it. The value itself travels in ``metadata``, so a search can filter on its
top-level fields in the datastore. One field may move instead of being copied: when the
indexed text is exactly the value's top-level string ``content_field`` (``"content"``,
what LangMem writes), that string is the record's content and leaves the metadata, so a
memory ``{"content": "Alice likes tea"}`` is the governed memory "Alice likes tea".

Reserved metadata keys, all starting with ``langgraph:``, carry the rest: the format
(``langgraph:item``), the namespace (``langgraph:namespace``, and one key per label,
``langgraph:ns:0``, ``langgraph:ns:1``, ..., so a namespace prefix is an equality
filter), the LangGraph key, the moved field's name and whether the item is indexed. A
value may not use that prefix itself.

The record key is ``lg1:`` and the SHA-256 of the namespace and key: unique per scope
as LangGraph's key is per namespace, fixed-length whatever the labels (keys are limited
to 256 bytes), and holding no label text for a redacting policy to rewrite, so an item
stays addressable whatever its labels hold.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final, Literal

import attrs
from governed_memory import MemoryRecord, MemoryValidationError
from governed_memory.records import json_copy
from langgraph.store.base import Item, SearchItem, get_text_at_path, tokenize_path

__all__ = [
    "FORMAT",
    "RESERVED_PREFIX",
    "DecodedItem",
    "EncodedItem",
    "decode",
    "encode",
    "level_key",
    "record_key",
]

RESERVED_PREFIX: Final = "langgraph:"
FORMAT: Final = 1
ITEM: Final = "langgraph:item"
NAMESPACE: Final = "langgraph:namespace"
KEY: Final = "langgraph:key"
CONTENT_FIELD: Final = "langgraph:content"
INDEXED: Final = "langgraph:indexed"
WHOLE_VALUE: Final = "$"


def level_key(index: int) -> str:
    """The reserved metadata key holding the namespace label at ``index``."""
    return f"langgraph:ns:{index}"


def record_key(namespace: Sequence[str], key: str) -> str:
    """The governed record key of the item ``key`` in ``namespace`` (what
    ``manager.get(..., key=...)`` or the CLI's ``get --key`` takes)."""
    body = json.dumps([list(namespace), key], ensure_ascii=False, separators=(",", ":"))
    return "lg1:" + hashlib.sha256(body.encode("utf-8")).hexdigest()


@attrs.frozen(slots=True)
class EncodedItem:
    content: str
    metadata: dict[str, Any]
    indexed: bool


def _whole(value: Mapping[str, Any]) -> str:
    return get_text_at_path(dict(value), WHOLE_VALUE)[0]


def encode(namespace: Sequence[str], key: str, value: Mapping[str, Any],
           index: Literal[False] | Sequence[str] | None, *,
           default_fields: Sequence[str] | None, content_field: str) -> EncodedItem:
    """The record content and metadata of a put.

    ``index`` is the put's (``None``: the store's ``default_fields``; ``False``: not
    indexed). ``default_fields`` ``None`` means "the ``content_field`` when the value
    has it as a string, else the whole value" (LangGraph's ``"$"``).
    """
    if not isinstance(value, Mapping):
        raise MemoryValidationError("a LangGraph value is a mapping", field="value")
    for name in value:
        if not isinstance(name, str):
            raise MemoryValidationError("value keys are strings", field="value")
        if name.startswith(RESERVED_PREFIX):
            raise MemoryValidationError(
                f"value keys starting with {RESERVED_PREFIX!r} are reserved by the store",
                field="value")
    text_field = value.get(content_field)
    has_text = isinstance(text_field, str) and bool(text_field.strip())
    paths: Sequence[str] | None
    if index is False:
        paths = None
    elif index is None:
        paths = default_fields if default_fields is not None else (
            [content_field] if has_text else [WHOLE_VALUE])
    else:
        if isinstance(index, str):
            raise MemoryValidationError("index is a list of paths, not a string",
                                        field="index")
        paths = list(index)
    moves = has_text and (paths is None or (
        len(paths) == 1 and tokenize_path(paths[0]) == [content_field]))
    if paths is None:
        text = ""
    elif moves:
        text = str(text_field)
    else:
        text = "\n".join(t for path in paths for t in get_text_at_path(dict(value), path))
    indexed = bool(text.strip())
    metadata = json_copy(dict(value))
    if moves:
        content = str(text_field)
        del metadata[content_field]
        metadata[CONTENT_FIELD] = content_field
    else:
        content = text if indexed else _whole(value)
    metadata.update({ITEM: FORMAT, NAMESPACE: list(namespace), KEY: key, INDEXED: indexed})
    metadata.update({level_key(i): label for i, label in enumerate(namespace)})
    return EncodedItem(content, metadata, indexed)


@attrs.frozen(slots=True)
class DecodedItem:
    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime

    def item(self) -> Item:
        return Item(value=self.value, key=self.key, namespace=self.namespace,
                    created_at=self.created_at, updated_at=self.updated_at)

    def search_item(self, score: float | None = None) -> SearchItem:
        return SearchItem(self.namespace, self.key, self.value, self.created_at,
                          self.updated_at, score)


def _when(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC)


def decode(record: MemoryRecord) -> DecodedItem | None:
    """The item a record holds, or ``None`` for a record this store did not write (a
    memory added through the manager directly shares the user scope)."""
    metadata = record.metadata
    if metadata.get(ITEM) != FORMAT:
        return None
    namespace, key = metadata.get(NAMESPACE), metadata.get(KEY)
    if (not isinstance(namespace, list | tuple) or not all(isinstance(x, str) for x in namespace)
            or not isinstance(key, str)):
        return None
    value = {name: json_copy(v) for name, v in metadata.items()
             if not name.startswith(RESERVED_PREFIX)}
    field = metadata.get(CONTENT_FIELD)
    if isinstance(field, str):
        value[field] = record.content
    return DecodedItem(tuple(namespace), key, value, _when(record.created_at),
                       _when(record.updated_at))
