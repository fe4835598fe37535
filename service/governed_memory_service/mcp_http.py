"""The MCP server over streamable HTTP, at ``/mcp`` on the service's own app.

Every HTTP request to ``/mcp`` is authenticated by the app's :class:`Authenticator`
(the ``Authorization: Bearer`` header, as for the REST routes) before the SDK sees it:
no or bad credentials get the same ``401`` problem document. The principal travels
with that request only: it is put in the request's ASGI scope, and a tool reads it from
the request its call arrived in (the SDK hands each message's HTTP request to the
tool's context). The SDK runs in stateless mode, so no MCP session outlives the request
that opened it and nothing can carry one caller's principal into another's call.

A POST's body is read and checked by the service before the SDK parses it, with the
routes' own helpers: past the app's byte limit it is a 413 problem document, and
anything but RFC 8259 JSON within :mod:`~governed_memory_service.json_input`'s bounds
(no ``NaN``, no 5,000-digit integer, no nesting 50,000 deep), or JSON that is not one
JSON-RPC message, is a 422 problem naming what is wrong, as on every route.

It is dispatched by a middleware rather than a route: ``/mcp`` speaks JSON-RPC, not
the REST API that the routes table and the OpenAPI document describe.

DNS-rebinding protection (the SDK's Host/Origin allow-list) is off: it guards local
servers that trust whoever can reach them, while this endpoint trusts only a bearer
credential, which a rebound browser page does not have.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from governed_memory import GovernedMemoryManager, Principal
from governed_memory.errors import (
    GovernedMemoryError,
    MemoryUnavailableError,
    MemoryValidationError,
)
from governed_memory.tiers import MemoryTiers
from governed_memory.turncontext import MemoryContextBuilder
from mcp.server.mcpserver import Context
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import jsonrpc_message_adapter
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from governed_memory_service.authentication import Authenticator
from governed_memory_service.errors import AuthenticationError
from governed_memory_service.http_input import read_body
from governed_memory_service.json_input import parse_json
from governed_memory_service.mcp_tools import build_mcp_server
from governed_memory_service.routes import problem_response

__all__ = ["MCP_PATH", "McpEndpoint"]

MCP_PATH = "/mcp"
PRINCIPAL_KEY = "governed_memory.principal"
"""The ASGI scope key the authenticated principal of one request travels under."""

Lifespan = Callable[[Starlette], AbstractAsyncContextManager[None]]


def request_principal(ctx: Context[Any, Any]) -> Principal:
    """The principal of the HTTP request that carried this tool call."""
    request = ctx.request_context.request
    scope = getattr(request, "scope", None)
    principal = scope.get(PRINCIPAL_KEY) if isinstance(scope, dict) else None
    if not isinstance(principal, Principal):
        raise AuthenticationError()  # unreachable through McpEndpoint: it authenticates first
    return principal


class McpEndpoint:
    """The MCP server of one app: its tools over ``manager``, its principals from
    ``authenticator``; :meth:`middleware` routes ``/mcp`` to it and :meth:`around` runs
    the SDK's session manager inside the app's lifespan."""

    def __init__(self, manager: GovernedMemoryManager, authenticator: Authenticator, *,
                 max_body_bytes: int, path: str = MCP_PATH, tiers: MemoryTiers | None = None,
                 builder: MemoryContextBuilder | None = None) -> None:
        self.path = path
        self._authenticator = authenticator
        self._max_body_bytes = max_body_bytes
        self._server = build_mcp_server(manager, request_principal, tiers=tiers,
                                        builder=builder)
        self._sessions: StreamableHTTPSessionManager | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Serve MCP requests while open. The SDK's session manager runs once, so each
        run (each app startup) builds its own."""
        self._server.streamable_http_app(
            streamable_http_path=self.path, stateless_http=True, json_response=True,
            max_request_body_size=self._max_body_bytes,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
        sessions = self._server.session_manager
        async with sessions.run():
            self._sessions = sessions
            try:
                yield
            finally:
                self._sessions = None

    def around(self, lifespan: Lifespan) -> Lifespan:
        """``lifespan`` with MCP running inside it: started after it (the manager is
        open before a tool can run) and stopped before it."""

        @contextlib.asynccontextmanager
        async def combined(app: Starlette) -> AsyncIterator[None]:
            async with lifespan(app), self.running():
                yield

        return combined

    def middleware(self) -> Middleware:
        return Middleware(_Dispatch, endpoint=self)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        """One HTTP request to the MCP endpoint: authenticate, read and check a POST's
        body as every route does, then hand the request to the SDK."""
        try:
            principal = await self._authenticator.authenticate(
                Headers(scope=scope).get("authorization"))
            sessions = self._sessions
            if sessions is None:
                # The app was not started (an ASGI transport without lifespan events).
                raise MemoryUnavailableError("the MCP endpoint runs only while the app's "
                                             "lifespan is running")
            if scope.get("method") == "POST":
                body = await self._message(Request(scope, receive))
                receive = _replaying(body, receive)
        except GovernedMemoryError as error:
            await problem_response(error)(scope, receive, send)
            return
        await sessions.handle_request({**scope, PRINCIPAL_KEY: principal}, receive, send)

    async def _message(self, request: Request) -> bytes:
        """A POST's body, refused as the routes refuse theirs (problem documents: 413
        past the app's limit, 422 for anything but RFC 8259 JSON within the bounds of
        :mod:`~governed_memory_service.json_input`, or for JSON that is not one JSON-RPC
        2.0 message), so the SDK only ever parses a body the service would accept."""
        body = await read_body(request, self._max_body_bytes)
        message = parse_json(body)
        try:
            jsonrpc_message_adapter.validate_python(message, by_name=False)
        except ValidationError as exc:
            raise _not_jsonrpc(message, exc) from None
        return body


def _not_jsonrpc(message: object, exc: ValidationError) -> MemoryValidationError:
    """What is wrong with a JSON body that is no JSON-RPC message, judged as the kind of
    message it looks like (a request when it names a method). Field names and the
    validator's messages only: never a value the caller sent."""
    if not isinstance(message, dict):
        return MemoryValidationError("the body must be one JSON-RPC 2.0 message: a JSON "
                                     "object (batches are not part of MCP)", field="body")
    kind = "JSONRPCRequest" if "method" in message else "JSONRPCResponse"
    problems = [(".".join(str(part) for part in error["loc"][1:]), error["msg"])
                for error in exc.errors(include_url=False, include_input=False)
                if error["loc"][:1] == (kind,)]
    detail = "; ".join(f"{where or 'body'}: {text}" for where, text in problems[:3])
    field = f"body.{problems[0][0]}" if problems and problems[0][0] else "body"
    return MemoryValidationError(
        "the body is not a JSON-RPC 2.0 message" + (f" ({detail})" if detail else ""),
        field=field)


def _replaying(body: bytes, receive: Receive) -> Receive:
    """``receive`` with the body already read handed out again first, so the SDK reads
    the request as the client sent it."""
    pending = True

    async def replay() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class _Dispatch:
    """ASGI middleware: requests for the endpoint's path go to MCP, the rest on."""

    def __init__(self, app: ASGIApp, endpoint: McpEndpoint) -> None:
        self._app = app
        self._endpoint = endpoint
        self._paths = {endpoint.path, endpoint.path + "/"}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path: str = scope["path"]
            root: str = scope.get("root_path", "")
            if root and path.startswith(root):
                path = path[len(root):]
            if path in self._paths:
                await self._endpoint.handle(scope, receive, send)
                return
        await self._app(scope, receive, send)
