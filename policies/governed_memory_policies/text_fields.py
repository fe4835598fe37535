"""The free text a write carries, found and rewritten in one place.

Secret and PII checks must look everywhere a caller can put text that gets stored —
content, the record key, metadata values (at any depth), metadata keys and provenance
— or a secret simply moves to the field nobody scans. The conversation and working
tiers store text too: a turn's content, name, tool-call arguments and metadata,
working-state values and keys ("state key", refused rather than renamed, like a
metadata key), and a memory block's whole new text.

``inspectable`` says whether a write is of a kind these checks know; a guard refuses
any other write rather than let an unknown request type carry text past it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs
from governed_memory.operations import OperationKind
from governed_memory.records import Provenance
from governed_memory.request import Request
from governed_memory.requests import (
    AddRequest,
    ApproveRequest,
    DeleteAllRequest,
    DeleteRequest,
    DeleteUserRequest,
    PurgeExpiredRequest,
    RejectRequest,
    UpdateRequest,
)
from governed_memory.tiers.block_requests import EditBlockRequest, EraseUserBlocksRequest
from governed_memory.tiers.requests import (
    AppendTurnRequest,
    ClearTurnsRequest,
    ClearWorkingStateRequest,
    EraseUserTurnsRequest,
    UpdateWorkingStateRequest,
)

WriteRequest = (AddRequest | UpdateRequest | AppendTurnRequest | UpdateWorkingStateRequest
                | EditBlockRequest)
TEXT_WRITES = (AddRequest, UpdateRequest, AppendTurnRequest, UpdateWorkingStateRequest,
               EditBlockRequest)
_TEXTLESS_WRITES = (DeleteRequest, DeleteAllRequest, DeleteUserRequest, PurgeExpiredRequest,
                    ApproveRequest, RejectRequest, ClearTurnsRequest, ClearWorkingStateRequest,
                    EraseUserTurnsRequest, EraseUserBlocksRequest)


def inspectable(request: object) -> bool:
    """A read, store-wide indexing work (it stores no caller text), or a write whose
    stored text (if any) ``stored_texts`` finds."""
    operation = getattr(request, "operation", None)
    if operation is not None and operation.kind is not OperationKind.WRITE:
        return True
    return isinstance(request, TEXT_WRITES + _TEXTLESS_WRITES)


def stored_texts(request: Request[Any]) -> Iterator[tuple[str, str]]:
    """``(field, text)`` for every string the request would store. ``field`` is a
    category (``content``, ``key``, ``metadata``, ``metadata key``, ``provenance``),
    never a metadata key name, so it is safe to put into a reason."""
    if isinstance(request, AppendTurnRequest):
        turn = request.turn
        yield "content", turn.content
        if turn.name is not None:
            yield "turn name", turn.name
        for call in turn.tool_calls:
            yield "tool call", call.name
            yield "tool call", call.arguments
        yield from _metadata_texts(turn.metadata)
        return
    if isinstance(request, UpdateWorkingStateRequest):
        for key, value in request.changes.items():
            yield "state key", str(key)
            yield from _state_texts(value)
        return
    if isinstance(request, EditBlockRequest):
        yield "block", request.value
        return
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


def _state_texts(value: Any) -> Iterator[tuple[str, str]]:
    for field, text in _metadata_texts(value):
        yield ("state key" if field == "metadata key" else "state"), text


def rewrite_texts(request: WriteRequest, rewrite: Callable[[str], str]) -> WriteRequest:
    """The request with ``rewrite`` applied to every stored string except metadata and
    state keys (renaming a key could merge two keys; callers refuse instead)."""
    if isinstance(request, AppendTurnRequest):
        turn = request.turn
        turn = attrs.evolve(
            turn, content=rewrite(turn.content),
            name=None if turn.name is None else rewrite(turn.name),
            tool_calls=tuple(attrs.evolve(c, name=rewrite(c.name),
                                          arguments=rewrite(c.arguments))
                             for c in turn.tool_calls),
            metadata=_rewrite_value(turn.metadata, rewrite))
        return attrs.evolve(request, turn=turn)
    if isinstance(request, UpdateWorkingStateRequest):
        return attrs.evolve(request, changes=_rewrite_value(request.changes, rewrite))
    if isinstance(request, EditBlockRequest):
        return attrs.evolve(request, value=rewrite(request.value))
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
