"""W3C trace context across the wire: an incoming ``traceparent`` (and ``tracestate``)
becomes the current context while the request runs, so the operation's span, which the
manager starts in the current context, is a child of the caller's span.

Only the trace-context propagator is used, never the host's global one: ``baggage``
from an unauthenticated caller must not reach what the process records. A malformed
header is ignored (the W3C rule), and the span records nothing from the request
besides what the manager already records: credentials never become attributes.
"""

from __future__ import annotations

from opentelemetry import context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["TraceContextMiddleware"]

_PROPAGATOR = TraceContextTextMapPropagator()
_HEADERS = (b"traceparent", b"tracestate")


class TraceContextMiddleware:
    """Pure ASGI (no task switch), so the attached context is the handler's."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        carrier = {name.decode("latin-1"): value.decode("latin-1")
                   for name, value in scope["headers"] if name in _HEADERS}
        if "traceparent" not in carrier:
            await self.app(scope, receive, send)
            return
        token = context.attach(_PROPAGATOR.extract(carrier))
        try:
            await self.app(scope, receive, send)
        finally:
            context.detach(token)
