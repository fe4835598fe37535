"""The routes of the memory blocks: read them all, edit one, read one's history.

They go through ``MemoryTiers.blocks``, so each is governed like a memory operation
(decision, span, events) and keeps the blocks' own rules: a block lives at the level
its profile declares (the scope in the query narrowed to it), an edit is one verb with
its fields, and ``expected_version`` makes it a compare-and-set (``409`` on a block
that moved on). A server whose profile declares no blocks answers ``501``
(``capability_unsupported``), never an empty list that would look like no data.
"""

from __future__ import annotations

from governed_memory import Principal
from governed_memory.converter import unstructure
from governed_memory.tiers import Block, MemoryTiers
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from governed_memory_service.bodies import BlockEditBody, parse_body
from governed_memory_service.endpoint import Endpoint
from governed_memory_service.http_input import (
    SCOPE_PARAMS,
    integer,
    query_values,
    read_json,
    scope_of,
)
from governed_memory_service.tier_calls import blocks, edit_block

__all__ = ["BLOCK_ENDPOINTS", "BlockRoutes", "block_json"]

BLOCKS = "/v1/tenants/{tenant}/blocks"
BLOCK = BLOCKS + "/{name}"

BLOCK_ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint(path=BLOCKS, method="GET", operation_id="read_blocks",
             query=(*SCOPE_PARAMS, "name"),
             summary="The memory blocks the profile declares (or those named by `name`), "
                     "each with its text, version, size and limit"),
    Endpoint(path=BLOCK + "/edits", method="POST", operation_id="edit_block",
             body=BlockEditBody,
             summary="Edit one memory block: replace one exact passage, append a line or "
                     "rethink the whole text; expected_version makes it compare-and-set"),
    Endpoint(path=BLOCK + "/history", method="GET", operation_id="block_history",
             query=(*SCOPE_PARAMS, "before_version", "limit"),
             summary="The stored versions of one memory block, newest first"),
)

_QUERY = {e.operation_id: e.query for e in BLOCK_ENDPOINTS}


def block_json(block: Block) -> dict[str, object]:
    data: dict[str, object] = unstructure(block)
    data["chars"] = block.chars
    return data


class BlockRoutes:
    """The block handlers; mixed into the route class that binds the principal."""

    tiers: MemoryTiers
    max_body_bytes: int

    async def read_blocks(self, request: Request, principal: Principal) -> Response:
        values = query_values(request, _QUERY["read_blocks"])
        scope = scope_of(request, values, principal)
        names = values.get("name")
        found = await blocks(self.tiers).read(principal, scope, names)
        return JSONResponse({"blocks": [block_json(b) for b in found]})

    async def edit_block(self, request: Request, principal: Principal) -> Response:
        scope = scope_of(request, query_values(request, _QUERY["edit_block"]), principal)
        body = parse_body(await read_json(request, self.max_body_bytes), BlockEditBody)
        block = await edit_block(
            self.tiers, principal, scope, request.path_params["name"], body.edit,
            {"old": body.old, "new": body.new, "text": body.text, "value": body.value},
            body.expected_version)
        return JSONResponse(block_json(block))

    async def block_history(self, request: Request, principal: Principal) -> Response:
        values = query_values(request, _QUERY["block_history"])
        scope = scope_of(request, values, principal)
        limit = integer(values, "limit")
        history = await blocks(self.tiers).history(
            principal, scope, request.path_params["name"],
            before_version=integer(values, "before_version"),
            limit=20 if limit is None else limit)
        return JSONResponse(unstructure(history))
