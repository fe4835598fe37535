"""``POST /v1/tenants/{tenant}/memories/from-messages``: memories formed from a
conversation, each fact decided against what the scope holds.

A thin translation like every route: the scope from the path and query (the same
parameters as the other memory routes), the messages from the body, and the manager's
``remember`` with the authenticated principal. The answer lists each decision (added,
updated, superseded, unchanged, held for review, refused) with its reason; every write
it made was its own governed operation, idempotent on the messages' turn ids, so a
client may retry the same request. A server whose profile names no language model
answers ``501`` (``capability_unsupported``), as a tier it does not declare does.
"""

from __future__ import annotations

import attrs
from governed_memory import GovernedMemoryManager, Principal
from governed_memory.converter import unstructure
from governed_memory.remembering import (
    DEFAULT_CONFIDENCE_FLOOR,
    DEFAULT_WINDOW,
    Message,
)
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from governed_memory_service.bodies import parse_body
from governed_memory_service.endpoint import Endpoint
from governed_memory_service.http_input import SCOPE_PARAMS, query_values, read_json, scope_of
from governed_memory_service.tier_calls import remembering

__all__ = ["FROM_MESSAGES", "REMEMBER_ENDPOINTS", "RememberBody", "RememberRoutes"]

FROM_MESSAGES = "/v1/tenants/{tenant}/memories/from-messages"


@attrs.frozen(kw_only=True)
class RememberBody:
    """``POST .../memories/from-messages``: the conversation (``role``, ``content``,
    and optionally ``turn_id`` and ``source_type`` per message), how many messages one
    model call reads, and the confidence under which a fact counts as inferred."""

    messages: tuple[Message, ...]
    window: int = DEFAULT_WINDOW
    confidence_floor: float = DEFAULT_CONFIDENCE_FLOOR


REMEMBER_ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint(path=FROM_MESSAGES, method="POST", operation_id="remember", body=RememberBody,
             summary="Form memories from a conversation: each fact added, updated, "
                     "superseded, unchanged, held for review or refused (idempotent on "
                     "the turn ids)"),
)


class RememberRoutes:
    """The handler; mixed into the route class that binds the principal."""

    manager: GovernedMemoryManager
    max_body_bytes: int

    async def remember(self, request: Request, principal: Principal) -> Response:
        scope = scope_of(request, query_values(request, SCOPE_PARAMS), principal)
        body = parse_body(await read_json(request, self.max_body_bytes), RememberBody)
        result = await remembering(self.manager).remember(principal, scope, body.messages,
                                             window=body.window,
                                             confidence_floor=body.confidence_floor)
        return JSONResponse(unstructure(result))
