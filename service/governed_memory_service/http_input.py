"""Reading what a request carries: the body under a byte limit, the scope from the path
and query, and the ``If-Match`` and ``Idempotency-Key`` headers.

Every refusal is a library error naming the field (``body``, ``query.limit``,
``If-Match``), so it reaches the caller as the same 422 problem as the library's own.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import attrs
from governed_memory import Scope
from governed_memory.errors import MemoryValidationError
from governed_memory.scope import DIMENSIONS
from starlette.requests import Request

from governed_memory_service.bodies import ScopeBody
from governed_memory_service.errors import PayloadTooLargeError, PreconditionFailedError

__all__ = ["SCOPE_QUERY", "etag", "expected_revision", "idempotency_key", "query_values",
           "read_json", "scope_of", "scopes_of"]

SCOPE_QUERY: tuple[str, ...] = tuple(d for d in DIMENSIONS if d != "tenant_id")
"""The scope dimensions a query string may carry; the tenant is the path's."""


async def read_json(request: Request, limit: int) -> Any:
    """The body as JSON, refusing it once more than ``limit`` bytes have arrived.

    A ``Content-Length`` over the limit is refused before reading, but the limit is
    enforced on the bytes as they stream in, so a missing or lying length (chunked
    uploads) buys nothing.
    """
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise PayloadTooLargeError(limit)
    content_type = request.headers.get("content-type", "application/json")
    media = content_type.split(";", 1)[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        raise MemoryValidationError("the body must be application/json", field="body")
    received = bytearray()
    async for chunk in request.stream():
        received += chunk
        if len(received) > limit:
            raise PayloadTooLargeError(limit)
    try:
        return json.loads(bytes(received).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MemoryValidationError(f"the body is not valid JSON: {type(exc).__name__}",
                                    field="body") from None


def query_values(request: Request, allowed: Iterable[str]) -> dict[str, list[str]]:
    """The query string by name, refusing names the route does not take (a misspelt
    scope dimension must not silently widen or change the scope)."""
    allowed_set = set(allowed)
    values: dict[str, list[str]] = {}
    for name, value in request.query_params.multi_items():
        if name not in allowed_set:
            raise MemoryValidationError(f"unknown query parameter {name!r}",
                                        field=f"query.{name}")
        values.setdefault(name, []).append(value)
    return values


def single(values: dict[str, list[str]], name: str) -> str | None:
    given = values.get(name)
    if not given:
        return None
    if len(given) > 1:
        raise MemoryValidationError(f"{name} may be given once", field=f"query.{name}")
    return given[0]


def scope_of(request: Request, values: dict[str, list[str]]) -> Scope:
    """``/v1/tenants/{tenant}/...?user_id=...&project_id=...``: one exact scope."""
    dimensions: dict[str, object] = {"tenant_id": request.path_params["tenant"]}
    for name in SCOPE_QUERY:
        value = single(values, name)
        if value is not None:
            dimensions[name] = value
    return Scope.from_dimensions(dimensions)


def scopes_of(request: Request, bodies: Sequence[ScopeBody]) -> tuple[Scope, ...]:
    """The exact scopes of a multi-scope search, each under the path's tenant.

    An empty list is refused here rather than searched as nothing, and a bad dimension
    is named by its place in the body (``body.scopes[1].user_id``).
    """
    if not bodies:
        raise MemoryValidationError("scopes must name at least one scope",
                                    field="body.scopes")
    tenant = request.path_params["tenant"]
    scopes = []
    for index, body in enumerate(bodies):
        dimensions = {k: v for k, v in attrs.asdict(body).items() if v is not None}
        try:
            scopes.append(Scope.from_dimensions({"tenant_id": tenant, **dimensions}))
        except MemoryValidationError as exc:
            name = (exc.field or "").removeprefix("scope.").removeprefix("scope")
            field = f"body.scopes[{index}]" + (f".{name}" if name else "")
            raise MemoryValidationError(str(exc), field=field) from None
    return tuple(scopes)


def integer(values: dict[str, list[str]], name: str) -> int | None:
    value = single(values, name)
    if value is None:
        return None
    if not value.isdigit():
        raise MemoryValidationError(f"{name} must be a non-negative integer",
                                    field=f"query.{name}")
    return int(value)


def boolean(values: dict[str, list[str]], name: str) -> bool:
    value = single(values, name)
    if value is None:
        return False
    if value not in ("true", "false"):
        raise MemoryValidationError(f"{name} must be true or false", field=f"query.{name}")
    return value == "true"


def etag(revision: str | None) -> dict[str, str]:
    """The ``ETag`` header for a record revision (strong: a revision is exact)."""
    return {} if revision is None else {"ETag": f'"{revision}"'}


def expected_revision(request: Request) -> str | None:
    """The revision ``If-Match`` names; ``None`` when absent or ``*`` (any revision)."""
    value = request.headers.get("if-match")
    if value is None or value.strip() == "*":
        return None
    value = value.strip()
    if "," in value:
        raise MemoryValidationError("If-Match must name one entity tag", field="If-Match")
    if value.startswith("W/"):
        # RFC 9110: If-Match uses the strong comparison, which a weak tag never passes.
        raise PreconditionFailedError("a weak entity tag never matches")
    if len(value) < 3 or not (value.startswith('"') and value.endswith('"')):
        raise MemoryValidationError('If-Match must be a quoted entity tag ("...")',
                                    field="If-Match")
    return value[1:-1]


def idempotency_key(request: Request) -> str | None:
    value = request.headers.get("idempotency-key")
    return None if value is None else value.strip()
