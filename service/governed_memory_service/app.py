"""The Starlette application: the memory routes, liveness (``/healthz``: the process
answers) and readiness (``/readyz``: storage, event sinks and key store answer; see
:mod:`~governed_memory_service.readiness`), the OpenAPI document, and problem documents
for everything that goes wrong."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from governed_memory import GovernedMemoryManager
from governed_memory.tiers import MemoryTiers
from governed_memory.turncontext import MemoryContextBuilder
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from governed_memory_service.authentication import Authenticator
from governed_memory_service.mcp_http import McpEndpoint
from governed_memory_service.openapi import openapi_document
from governed_memory_service.problems import PROBLEM_JSON, TYPE_PREFIX
from governed_memory_service.readiness import RETRY_AFTER_S, readiness
from governed_memory_service.routes import ENDPOINTS, MemoryRoutes
from governed_memory_service.tier_calls import context_over
from governed_memory_service.tracing import TraceContextMiddleware

__all__ = ["DEFAULT_MAX_BODY_BYTES", "create_app"]

DEFAULT_MAX_BODY_BYTES = 256 * 1024
"""Room for the largest valid record (64 KiB content, 16 KiB metadata and provenance)
as JSON with escapes, and little more: the limit is checked as bytes arrive."""


def create_app(manager: GovernedMemoryManager, authenticator: Authenticator, *,
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
               manage_lifespan: bool = False, tiers: MemoryTiers | None = None,
               builder: MemoryContextBuilder | None = None) -> Starlette:
    """The HTTP API over ``manager``, with principals from ``authenticator``.

    ``tiers`` default to the ones the manager's profile declares (``[stores.turns]``,
    ``[stores.working_state]``) and ``builder`` to a context builder over them with the
    profile's ``[context]`` budgets and no language model. ``manage_lifespan=True``
    starts the manager and the tiers' stores on the server's startup and closes them on
    shutdown (for a server that owns its manager); by default the caller owns them.
    """
    if max_body_bytes < 1:
        raise ValueError("max_body_bytes must be positive")
    built_here = tiers is None
    tiers, builder = context_over(manager, tiers, builder)
    handlers = MemoryRoutes(manager, authenticator, max_body_bytes, tiers=tiers,
                            builder=builder)
    document = openapi_document()

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        # Storage, the event sinks and the key store, each a real round trip (see
        # readiness); no detail: it may count records, and readiness needs no
        # credentials.
        ready, body = await readiness(manager, authenticator)
        if ready:
            return JSONResponse(body)
        return JSONResponse(body, status_code=503,
                            headers={"Retry-After": str(RETRY_AFTER_S)})

    async def openapi(request: Request) -> Response:
        return JSONResponse(document)

    async def http_problem(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        code = {404: "not_found", 405: "method_not_allowed"}.get(status, "http_error")
        return JSONResponse({"type": TYPE_PREFIX + code, "title": "No such route"
                             if status == 404 else "HTTP error", "status": status,
                             "detail": f"HTTP {status}", "code": code},
                            status_code=status, media_type=PROBLEM_JSON,
                            headers=getattr(exc, "headers", None))

    routes = [Route(e.path, handlers.handler(e), methods=[e.method], name=e.operation_id)
              for e in ENDPOINTS]
    routes += [Route("/healthz", healthz, methods=["GET"]),
               Route("/readyz", readyz, methods=["GET"]),
               Route("/openapi.json", openapi, methods=["GET"])]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if manage_lifespan:
            async with tiers:
                yield
        elif built_here:
            # The caller owns the manager, but the tier stores were built here.
            stores = [s for s in (tiers.turn_store, tiers.working_store) if s is not None]
            async with contextlib.AsyncExitStack() as stack:
                for store in stores:
                    await store.start()
                    stack.push_async_callback(store.close)
                yield
        else:
            yield

    # MCP (streamable HTTP) at /mcp, authenticated like the routes: see mcp_http.
    mcp = McpEndpoint(manager, authenticator, max_body_bytes=max_body_bytes, tiers=tiers,
                      builder=builder)
    return Starlette(routes=routes, lifespan=mcp.around(lifespan),
                     middleware=[Middleware(TraceContextMiddleware), mcp.middleware()],
                     exception_handlers={HTTPException: http_problem})
