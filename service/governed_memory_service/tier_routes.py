"""The routes of the conversation and working-state tiers and of the per-turn context.

They go through ``MemoryTiers`` and ``MemoryContextBuilder``, so each is governed like a
memory operation (decision, span, events) and keeps the tiers' own scope rules: turns
live in a session scope, working state in a run scope, and a scope without ``user_id``
is the principal's own. A tier the profile does not declare answers with the library's
capability error (``501``, code ``capability_unsupported``), never with an empty result
that would look like no data.
"""

from __future__ import annotations

from governed_memory import Principal
from governed_memory.converter import unstructure
from governed_memory.tiers import MemoryTiers, TurnDraft
from governed_memory.turncontext import MemoryContextBuilder
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from governed_memory_service.bodies import ContextBody, TurnBody, WorkingStateBody, parse_body
from governed_memory_service.endpoint import Endpoint
from governed_memory_service.http_input import (
    SCOPE_PARAMS,
    integer,
    query_values,
    read_json,
    scope_of,
)
from governed_memory_service.tier_calls import conversation, read_turns, working

__all__ = ["TIER_ENDPOINTS", "TierRoutes"]

TURNS = "/v1/tenants/{tenant}/turns"
WORKING = "/v1/tenants/{tenant}/working-state"
CONTEXT = "/v1/tenants/{tenant}/context"

TIER_ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint(path=TURNS, method="POST", operation_id="append_turn", body=TurnBody,
             status=201, summary="Append a turn to the session (session_id in the query; "
                                 "turn_id makes it idempotent)"),
    Endpoint(path=TURNS, method="GET", operation_id="recent_turns",
             query=(*SCOPE_PARAMS, "limit", "after_seq"),
             summary="The session's newest turns, oldest first; with after_seq, the turns "
                     "after that sequence number"),
    Endpoint(path=TURNS, method="DELETE", operation_id="clear_turns",
             summary="Remove every turn of the session and its rolling summary"),
    Endpoint(path=WORKING, method="GET", operation_id="read_working_state",
             summary="The run's working state (run_id in the query), or null"),
    Endpoint(path=WORKING, method="PATCH", operation_id="update_working_state",
             body=WorkingStateBody,
             summary="Merge keys into the run's working state (or replace it); the TTL "
                     "moves on with every write"),
    Endpoint(path=WORKING, method="DELETE", operation_id="clear_working_state",
             summary="Drop the run's working state"),
    Endpoint(path=CONTEXT, method="POST", operation_id="build_context", body=ContextBody,
             summary="Build the per-turn context: the recent window, the summary and the "
                     "recalled memories as quoted data (session_id in the query)"),
)

_QUERY = {e.operation_id: e.query for e in TIER_ENDPOINTS}


class TierRoutes:
    """The tier handlers; mixed into the route class that binds the principal."""

    tiers: MemoryTiers
    builder: MemoryContextBuilder
    max_body_bytes: int

    def _turns(self) -> MemoryTiers:
        return conversation(self.tiers)  # shared with the MCP tools: tier_calls

    def _working(self) -> MemoryTiers:
        return working(self.tiers)

    async def append_turn(self, request: Request, principal: Principal) -> Response:
        scope = scope_of(request, query_values(request, _QUERY["append_turn"]), principal)
        body = parse_body(await read_json(request, self.max_body_bytes), TurnBody)
        turn = await self._turns().append(principal, scope, TurnDraft(
            body.role, body.content, name=body.name, tool_call_id=body.tool_call_id,
            tool_calls=body.tool_calls, metadata=body.metadata or {},
            turn_id=body.turn_id))
        return JSONResponse(unstructure(turn), status_code=201)

    async def recent_turns(self, request: Request, principal: Principal) -> Response:
        values = query_values(request, _QUERY["recent_turns"])
        scope = scope_of(request, values, principal)
        turns = await read_turns(self.tiers, principal, scope, limit=integer(values, "limit"),
                                 after_seq=integer(values, "after_seq"))
        return JSONResponse({"turns": unstructure(turns)})

    async def clear_turns(self, request: Request, principal: Principal) -> Response:
        scope = scope_of(request, query_values(request, _QUERY["clear_turns"]), principal)
        return JSONResponse({"removed": await self._turns().clear(principal, scope)})

    async def read_working_state(self, request: Request, principal: Principal) -> Response:
        scope = scope_of(request, query_values(request, _QUERY["read_working_state"]), principal)
        state = await self._working().working_state(principal, scope)
        return JSONResponse({"working_state": None if state is None else unstructure(state)})

    async def update_working_state(self, request: Request, principal: Principal) -> Response:
        scope = scope_of(request, query_values(request, _QUERY["update_working_state"]), principal)
        body = parse_body(await read_json(request, self.max_body_bytes), WorkingStateBody)
        state = await self._working().update(principal, scope, body.state,
                                        ttl_seconds=body.ttl_seconds, replace=body.replace)
        return JSONResponse(unstructure(state))

    async def clear_working_state(self, request: Request, principal: Principal) -> Response:
        scope = scope_of(request, query_values(request, _QUERY["clear_working_state"]), principal)
        return JSONResponse({"removed": await self._working().clear_working(principal, scope)})

    async def build_context(self, request: Request, principal: Principal) -> Response:
        scope = scope_of(request, query_values(request, _QUERY["build_context"]), principal)
        body = parse_body(await read_json(request, self.max_body_bytes), ContextBody)
        context = await self.builder.build(principal, scope, body.question,
                                           anchor_entity_ids=body.anchor_entity_ids)
        return JSONResponse(unstructure(context))
